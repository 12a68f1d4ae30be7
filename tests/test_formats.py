"""PDF, DOCX, HTML, email and mbox files: converted to Markdown sections with headings and tables,
given --acl's groups (they have no front matter), and hostile files of each kind skipped with a
reason, never a crash or a hang (fixtures/formats/ holds the samples; make_samples.py wrote them)."""
from __future__ import annotations

import io
import os
import shutil
import time
import zipfile

import pytest

from core.errors import BadDocument
from tests import format_faults
from tests.conftest import FIXTURES
from vector.ingest.formats import convert, run_bounded
from core.text.markdown import split_sections
from vector.ingest.sources import load_file, load_source

MB = 1_000_000
SAMPLES = FIXTURES / "formats"
SAMPLE_NAMES = ("report.pdf", "handbook.docx", "checklist.html", "delay.eml", "ops.mbox")


def sample(name: str) -> bytes:
    return (SAMPLES / name).read_bytes()


def load_one(tmp_path, name: str, data: bytes, acl=("staff",), max_bytes=MB):
    (tmp_path / name).write_bytes(data)
    return load_file(tmp_path / name, name, tuple(acl), max_bytes)


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    folder = tmp_path_factory.mktemp("formats")
    for name in SAMPLE_NAMES:
        shutil.copy(SAMPLES / name, folder / name)
    docs, skipped = load_source(folder, ["staff"], MB)
    assert skipped == []
    return {d.doc_id: d for d in docs}


@pytest.mark.parametrize("name, title, headings, table_row, phrase", [
    ("report.pdf", "Quarterly Freight Report", [("Quarterly Freight Report", "Shipments by office"), ("Quarterly Freight Report", "Risks")],
     None, "Berlin 1240 97%"),
    ("handbook.docx", "Warehouse Handbook", [("Warehouse Handbook", "Opening hours"), ("Warehouse Handbook", "Safety")],
     "| Berlin | 1240 | 97% |", "- Wear a helmet"),
    ("checklist.html", "Customs Checklist | Larkspur Intranet", [("Customs Checklist", "Documents per country"),
                                                                ("Customs Checklist", "Россия")],
     "| Kazakhstan | EAEU declaration |", "- Check the HS code."),
    ("delay.eml", "Отчёт о задержке рейса", [("Отчёт о задержке рейса",)], None, "Рейс LX-204 задержан"),
    ("ops.mbox", "ops", [("Forklift training",), ("Re: Forklift training",)], None, "From the hall: bring helmets."),
])
def test_each_format_becomes_markdown_sections_with_title_tables_and_the_acl_flag(samples, name, title, headings,
                                                                                   table_row, phrase):
    doc = samples[name]
    assert doc.title == title and doc.acl == ("staff",)
    assert phrase in doc.text
    assert name == "ops.mbox" or "Склад в Екатеринбурге" in " ".join(doc.text.split())  # PDF lines wrap
    paths = [s.heading_path for s in split_sections(doc.text)]
    assert all(h in paths for h in headings), paths
    if table_row:
        assert table_row in doc.text
        assert any(b.kind == "table" for s in split_sections(doc.text) for b in s.blocks)


def test_html_and_email_leave_out_scripts_chrome_and_attachment_bodies(samples):
    page = samples["checklist.html"].text
    for chrome in ("ignore-this", "font-family", "Intranet help desk", "Accept all cookies", "Canteen menu", "Imprint"):
        assert chrome not in page
    mail = samples["delay.eml"]
    assert mail.lang == "russian" and "Attachments: customs.pdf (application/pdf)" in mail.text
    assert "not really a pdf" not in mail.text


def test_format_files_without_any_acl_are_skipped_before_they_are_parsed(tmp_path):
    skipped = load_one(tmp_path, "report.pdf", sample("report.pdf"), acl=())
    assert skipped.doc_id == "report.pdf" and "no access groups" in skipped.reason and "--acl" in skipped.reason


def _encrypted_pdf() -> bytes:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(sample("report.pdf"))))
    writer.encrypt(user_password="secret", owner_password="owner")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def _scanned_pdf() -> bytes:
    from pypdf import PdfWriter

    writer = PdfWriter()
    writer.add_blank_page(595, 842)  # what a scan is to a text extractor: a page with no text on it
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def _zip_bomb_docx() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(sample("handbook.docx"))) as real, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as bomb:
        for item in real.infolist():
            bomb.writestr(item, real.read(item))
        bomb.writestr("word/media/bomb.bin", b"\0" * (30 * MB))  # 30 MB of zeros compress to ~30 KB
    return out.getvalue()


HOSTILE = [
    ("encrypted.pdf", _encrypted_pdf, "encrypted PDF"),
    ("scanned.pdf", _scanned_pdf, "no text layer: scanned PDF? OCR it first"),
    ("truncated.pdf", lambda: sample("report.pdf")[:4000], "truncated or damaged"),
    ("garbage.pdf", lambda: os.urandom(5000), "truncated or damaged"),
    ("truncated.docx", lambda: sample("handbook.docx")[:20000], "not a DOCX file"),
    ("renamed.docx", lambda: b"\xd0\xcf\x11\xe0 an old .doc file", "not a DOCX file"),
    ("bomb.docx", _zip_bomb_docx, "zip bomb"),
    ("huge.html", lambda: b"<p>" + b"word " * (MB // 4), "over the 1.0 MB limit"),
    ("scripts.html", lambda: b"<html><head><style>p{}</style></head><body><script>alert(1)</script><nav>menu</nav></body>",
     "no text in this HTML page"),
    ("empty.html", lambda: b"   \n", "empty file"),
    ("binary.html", lambda: b"\x00\x01\x02\x89PNG" * 100, "binary file"),
    ("text.mbox", lambda: b"just some text, not a mailbox\n", "not a mailbox"),
]


@pytest.mark.parametrize("name, make, reason", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_files_of_each_format_are_skipped_with_a_reason(tmp_path, name, make, reason):
    skipped = load_one(tmp_path, name, make())
    assert skipped.doc_id == name and reason in skipped.reason, skipped


def test_deeply_nested_and_large_html_is_read_without_recursion_limits(tmp_path):
    def nested(depth: int) -> bytes:
        return b"<p>Top text.</p>" + b"<div>" * depth + b"<p>Deep text.</p>" + b"</div>" * depth

    doc = load_one(tmp_path, "deep.html", nested(1_500))
    assert "Top text." in doc.text and "Deep text." in doc.text
    # libxml2 keeps nothing below 2048 levels; the rest of the page is still read, in bounded time
    doc = load_one(tmp_path, "deeper.html", nested(50_000))
    assert "Top text." in doc.text
    table = b"<table>" + b"".join(b"<tr><td>%d</td><td>cell</td></tr>" % i for i in range(20_000)) + b"</table>"
    started = time.monotonic()
    doc = load_one(tmp_path, "big-table.html", b"<h1>Big</h1>" + table)
    assert "| 19999 | cell |" in doc.text and time.monotonic() - started < 10


@pytest.mark.parametrize("name, data, expected", [
    ("unknown-charset.eml", b"Subject: =?x-unknown?q?hi?=\nContent-Type: text/plain; charset=x-unknown\n\n"
     b"Plain body in an unknown charset.\n", "Plain body in an unknown charset."),
    ("lying-charset.eml", b"Subject: cp1251\nContent-Type: text/plain; charset=utf-8\n\n"
     + "Счёт за перевозку оплачен полностью.".encode("cp1251"), "Сч"),
    ("broken-mime.eml", b"Subject: broken\nMIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"b\"\n\n"
     b"--b\nContent-Type: text/plain\n\nThe part before a boundary that never closes.\n--b\nContent-Type: ",
     "The part before a boundary that never closes."),
    ("koi8.html", "<meta charset=koi8-r><h1>Заголовок</h1><p>Текст страницы в KOI8-R.</p>".encode("koi8-r"),
     "Текст страницы в KOI8-R."),
    ("undeclared.html", "<h1>Отчёт</h1><p>Страница в Windows-1251 без объявленной кодировки, "
     "но с достаточным количеством русского текста.</p>".encode("cp1251"), "кодировки"),
])
def test_non_utf8_charsets_and_malformed_mime_are_read_safely(tmp_path, name, data, expected):
    doc = load_one(tmp_path, name, data)
    assert not hasattr(doc, "reason"), doc
    assert expected in doc.text


@pytest.mark.parametrize("function, reason", [(format_faults.sleep_forever, "took over 3 s"),
                                              (format_faults.crash, "crashed"), (format_faults.eat_memory, "memory")])
def test_a_reader_that_hangs_crashes_or_eats_memory_costs_only_its_file(function, reason):
    started = time.monotonic()
    with pytest.raises(BadDocument, match=reason):
        run_bounded(function, (), 3.0, "PDF")
    assert time.monotonic() - started < 10


def test_text_over_the_document_limit_after_conversion_is_refused():
    page = b"<p>" + b"many words " * 20_000 + b"</p>"  # 220 KB of HTML, and of text
    with pytest.raises(BadDocument, match="its text is 0.2 MB, over the 0.1 MB limit"):
        convert("page.html", page, 100_000)
