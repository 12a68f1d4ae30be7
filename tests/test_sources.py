"""Reading sources: front matter, ACLs, languages, and bad input that never stops a batch."""
from __future__ import annotations

import json

import pytest

from core.errors import BadDocument
from vector.ingest.front_matter import split_front_matter
from core.text.language import detect_language
from vector.ingest.sources import load_source, parse_acl

MB = 1_000_000


def write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    path.write_bytes(data)


def test_front_matter_acl_and_title_win_over_flag(tmp_path):
    write(tmp_path / "a.md", "---\ntitle: Alpha\nacl: [hr, staff]\n---\n# Heading\nThe body text is here.\n")
    write(tmp_path / "sub/b.md", "# Beta doc\nNo front matter in this one, the flag applies.\n")
    docs, skipped = load_source(tmp_path, ["public"], MB)
    assert skipped == []
    by_id = {d.doc_id: d for d in docs}
    assert by_id["a.md"].acl == ("hr", "staff") and by_id["a.md"].title == "Alpha"
    assert by_id["sub/b.md"].acl == ("public",) and by_id["sub/b.md"].title == "Beta doc"
    assert "title: Alpha" not in by_id["a.md"].text


def test_document_without_any_acl_is_skipped_not_made_public(tmp_path):
    write(tmp_path / "a.md", "Some text without groups.")
    docs, skipped = load_source(tmp_path, [], MB)
    assert docs == [] and len(skipped) == 1
    assert "acl" in skipped[0].reason and skipped[0].doc_id == "a.md"


def test_bad_input_batch_skips_each_with_reason_and_keeps_the_rest(tmp_path):
    write(tmp_path / "good.md", "---\nacl: [staff]\n---\nA perfectly normal document about retries.\n")
    write(tmp_path / "good_ru.md", "Обычный документ на русском языке о повторных попытках.\n")
    write(tmp_path / "binary.md", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    write(tmp_path / "cp1251.md", "Привет, это документ в кодировке Windows-1251, а не UTF-8.".encode("cp1251"))
    write(tmp_path / "empty.md", "   \n\n")
    write(tmp_path / "huge.md", b"a " * (3 * MB // 2))
    write(tmp_path / "broken_yaml.md", "---\ntitle: [unclosed\nacl: staff\n---\nbody\n")
    write(tmp_path / "unclosed.md", "---\ntitle: x\nbody without end\n")
    write(tmp_path / "image.png", b"\x89PNG")
    write(tmp_path / ".hidden/secret.md", "never read")
    docs, skipped = load_source(tmp_path, ["public"], MB)
    assert sorted(d.doc_id for d in docs) == ["good.md", "good_ru.md"]
    reasons = {s.doc_id: s.reason for s in skipped}
    assert set(reasons) == {"binary.md", "cp1251.md", "empty.md", "huge.md", "broken_yaml.md", "unclosed.md", "image.png"}
    assert "binary" in reasons["binary.md"]
    assert "not valid UTF-8" in reasons["cp1251.md"] and "iconv" in reasons["cp1251.md"]
    assert "empty" in reasons["empty.md"]
    assert "limit" in reasons["huge.md"] and "MB" in reasons["huge.md"]
    assert "YAML" in reasons["broken_yaml.md"] and "line" in reasons["broken_yaml.md"]
    assert "never closed" in reasons["unclosed.md"]
    assert "unsupported file type" in reasons["image.png"]
    assert all(str(tmp_path) in s.where for s in skipped)


def test_jsonl_corpus_with_bad_lines(tmp_path):
    lines = [
        json.dumps({"_id": "d1", "title": "One", "text": "The first document."}),
        "{not json",
        json.dumps({"title": "no id", "text": "x"}),
        json.dumps({"_id": "d2", "title": "Two", "text": 42}),
        json.dumps({"_id": "d1", "title": "Again", "text": "duplicate id"}),
        "",
        json.dumps({"_id": 7, "title": "Семь", "text": "Седьмой документ на русском языке.", "acl": ["hr"]}),
    ]
    write(tmp_path / "corpus.jsonl", "\n".join(lines) + "\n")
    docs, skipped = load_source(tmp_path / "corpus.jsonl", ["public"], MB)
    assert [(d.doc_id, d.acl, d.lang) for d in docs] == [("d1", ("public",), "english"), ("7", ("hr",), "russian")]
    where = {s.where.rsplit(":", 1)[1]: s for s in skipped}
    assert set(where) == {"2", "3", "4", "5"}
    assert "not valid JSON" in where["2"].reason and where["2"].doc_id is None
    assert "_id" in where["3"].reason
    assert "text" in where["4"].reason and where["4"].doc_id == "d2"
    assert "duplicate" in where["5"].reason


def test_parse_acl_normalises_and_rejects_garbage():
    assert parse_acl(" staff, hr ,,staff") == ("hr", "staff")
    assert parse_acl(["b", "a"]) == ("a", "b")
    with pytest.raises(BadDocument):
        parse_acl({"group": "x"})
    with pytest.raises(BadDocument):
        parse_acl([["nested"]])
    with pytest.raises(BadDocument, match="quote them"):  # YAML's `acl: [staff, 0]` is not the group "0"
        parse_acl(["staff", 0])


def test_front_matter_must_be_a_mapping():
    with pytest.raises(BadDocument):
        split_front_matter("---\n- a\n- b\n---\nbody")
    assert split_front_matter("no front matter") == ({}, "no front matter")


@pytest.mark.parametrize(
    "text, lang",
    [
        ("Сервис платежей повторяет запрос пять раз, т.е. до ERR_2043 дело доходит редко.", "russian"),
        ("The payments service retries the request five times before it gives up.", "english"),
        ("Der Dienst wiederholt die Anfrage fünfmal, bevor er aufgibt.", "simple"),
        ("12345 !!!", "simple"),
        ("Конфиг `retry_max_attempts: 5` в файле payments.yaml задаёт число попыток.", "russian"),
    ],
)
def test_detect_language(text, lang):
    assert detect_language(text) == lang


def test_a_jsonl_line_without_groups_is_told_how_to_name_them_in_jsonl(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_text(json.dumps({"_id": "d1", "title": "T", "text": "Some text."}) + "\n", encoding="utf-8")
    documents, skipped = load_source(path, [], 1_000_000)
    assert documents == [] and len(skipped) == 1
    assert '"acl": ["group", ...] to its line' in skipped[0].reason and "front matter" not in skipped[0].reason
