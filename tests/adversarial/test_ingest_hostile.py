"""Hostile input and faults at ingest: links out of the folder, special files, front matter that
would silently lose its ACL, invalid Unicode, unaddressable names, YAML bombs, concurrent runs.

Most tests call `vector.ingest.sources` on files in a temporary folder (no database); a few write through
the real pipeline, and one runs `crossroads ingest` on a generated hostile corpus end to end.
"""
from __future__ import annotations

import json
import os
import threading
import unicodedata
import uuid

import pytest

from tests.conftest import crossroads
from vector import store
from vector.search.factory import make_searcher
from vector.ingest.runner import ingest_documents
from core.text_safety import printable
from vector.ingest.sources import load_file, load_source

MB = 1_000_000
SECRET = "zebracorn-outside-7731"  # a word only the file outside the folder holds


def write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)


def reasons_by_id(skipped):
    return {s.doc_id: s.reason for s in skipped}


@pytest.fixture
def outside(tmp_path):
    """A folder next to the ingested one, holding a file that must never be read."""
    write(tmp_path / "outside" / "secret.md", f"---\nacl: [public]\n---\nThe {SECRET} secret.\n")
    return tmp_path / "outside"


@pytest.fixture
def root(tmp_path):
    write(tmp_path / "docs" / "good.md", "A normal document about retries.\n")
    return tmp_path / "docs"


# --- 1. links and special files ---------------------------------------------------------------


def test_symlinks_to_files_are_skipped_with_a_reason_and_never_read(root, outside):
    (root / "passwd.md").symlink_to("/etc/passwd")
    (root / "outside.md").symlink_to(outside / "secret.md")
    (root / "inside.md").symlink_to(root / "good.md")  # documented choice: no link is followed
    docs, skipped = load_source(root, ["public"], MB)
    assert [d.doc_id for d in docs] == ["good.md"]
    reasons = reasons_by_id(skipped)
    assert set(reasons) == {"passwd.md", "outside.md", "inside.md"}
    assert all(r.startswith("symbolic link: not followed") for r in reasons.values())


def test_directory_links_are_not_entered_so_there_is_no_loop_and_no_escape(root, outside):
    (root / "loop").symlink_to(root)
    (root / "up").symlink_to("..")
    (root / "elsewhere").symlink_to(outside)
    docs, skipped = load_source(root, ["public"], MB)
    assert [d.doc_id for d in docs] == ["good.md"]
    assert set(reasons_by_id(skipped)) == {"loop", "up", "elsewhere"}
    assert all("symbolic link" in s.reason for s in skipped)


def test_a_root_folder_named_through_a_link_is_read(root, tmp_path):
    (tmp_path / "via-link").symlink_to(root)
    docs, skipped = load_source(tmp_path / "via-link", ["public"], MB)
    assert [d.doc_id for d in docs] == ["good.md"] and skipped == []


def in_thread(function, timeout_s=10):
    """`function()`'s result, or a failure when it blocks (a FIFO read would block forever)."""
    result = []
    worker = threading.Thread(target=lambda: result.append(function()), daemon=True)
    worker.start()
    worker.join(timeout_s)
    assert not worker.is_alive(), "blocked: a special file was opened for reading"
    return result[0]


def test_fifos_are_skipped_without_blocking(root):
    os.mkfifo(root / "pipe.md")
    docs, skipped = in_thread(lambda: load_source(root, ["public"], MB))
    assert [d.doc_id for d in docs] == ["good.md"]
    assert reasons_by_id(skipped) == {"pipe.md": "a FIFO: only regular files are read"}
    # a FIFO named on the command line, or swapped in after the folder was listed, is opened without blocking
    named = in_thread(lambda: load_file(root / "pipe.md", "pipe.md", ("public",), MB))
    assert named.reason == "a FIFO: only regular files are read"


# --- 2. front matter that must never fall back to the default ACL -----------------------------


@pytest.mark.parametrize("name, text", [
    ("blank_line.md", "\n---\nacl: [hr]\n---\nBody.\n"),
    ("whitespace_lines.md", "  \n\t\n---\nacl: [hr]\n---\nBody.\n"),
    ("double_bom.md", "\ufeff\ufeff---\nacl: [hr]\n---\nBody.\n"),
    ("bom_then_blank.md", "\ufeff\n---\nacl: [hr]\n---\nBody.\n"),
    ("front_matter.txt", "---\nacl: [hr]\n---\nBody of a text file.\n"),
    ("crlf.md", "---\r\nacl: [hr]\r\n---\r\nBody.\r\n"),
])
def test_front_matter_after_blank_lines_or_boms_or_in_txt_files_is_read(tmp_path, name, text):
    write(tmp_path / name, text)
    docs, skipped = load_source(tmp_path, ["public"], MB)
    assert skipped == [] and [(d.doc_id, d.acl) for d in docs] == [(name, ("hr",))]
    assert "acl" not in docs[0].text


@pytest.mark.parametrize("front_matter, reason", [
    ("ACL: [hr]", "looks like a misspelt 'acl'"),
    ("Acl: hr", "looks like a misspelt 'acl'"),
    ("acls: [hr]", "looks like a misspelt 'acl'"),
    ("groups: [hr]", "looks like a misspelt 'acl'"),
    ("access: hr", "looks like a misspelt 'acl'"),
    ("acl: [hr]\nGroups: [staff]", "looks like a misspelt 'acl'"),
    ("acl: [true, 0]", "YAML reads bare yes/no"),
    ("acl: yes", "YAML reads bare yes/no"),
    ("acl: [staff, no]", "YAML reads bare yes/no"),
    ("acl:", "'acl' is empty"),
    ("acl: []", "no access groups"),
    ("title: [unclosed", "not valid YAML"),
])
def test_unreadable_or_misspelt_acl_skips_the_document_instead_of_defaulting(tmp_path, front_matter, reason):
    write(tmp_path / "a.md", f"\n---\n{front_matter}\n---\nConfidential body.\n")
    docs, skipped = load_source(tmp_path, ["public"], MB)
    assert docs == [] and len(skipped) == 1
    assert reason in skipped[0].reason and skipped[0].doc_id == "a.md"


def test_unknown_front_matter_keys_land_with_a_warning(tmp_path):
    write(tmp_path / "a.md", "---\nacl: [hr]\ntags: [ops]\nTitle: Typo\n---\nBody.\n")
    [doc], _ = load_source(tmp_path, ["public"], MB)
    assert doc.acl == ("hr",)
    assert doc.warnings == ("front matter key 'tags' is not used (Crossroads reads title, acl, lang)",
                            "front matter key 'Title' is not used (Crossroads reads title, acl, lang)")


def jsonl(tmp_path, *records):
    lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
    write(tmp_path / "corpus.jsonl", "\n".join(lines) + "\n")
    return tmp_path / "corpus.jsonl"


def skipped_lines(skipped):
    return {int(s.where.rsplit(":", 1)[1]): s.reason for s in skipped}


def test_jsonl_null_or_misspelt_acl_skips_the_line(tmp_path):
    path = jsonl(
        tmp_path,
        {"_id": "ok", "text": "Kept with the default groups."},
        {"_id": "null", "text": "x", "acl": None},
        {"_id": "upper", "text": "x", "ACL": ["hr"]},
        {"_id": "plural", "text": "x", "acls": ["hr"]},
        {"_id": "numbers", "text": "x", "acl": [1, 2]},
        {"_id": "extra", "text": "Other fields are ignored.", "metadata": {"url": "x"}},
    )
    docs, skipped = load_source(path, ["public"], MB)
    assert [(d.doc_id, d.acl) for d in docs] == [("ok", ("public",)), ("extra", ("public",))]
    lines = skipped_lines(skipped)
    assert set(lines) == {2, 3, 4, 5}
    assert "'acl' is empty" in lines[2]
    assert "'ACL' looks like a misspelt 'acl'" in lines[3] and "'acls'" in lines[4]
    assert "not a group name" in lines[5]


# --- 3. invalid Unicode: one bad line or file, never the whole batch ---------------------------


def test_jsonl_lone_surrogates_and_nuls_skip_only_their_line(tmp_path):
    path = jsonl(
        tmp_path,
        '{"_id": "text", "text": "bad \\ud800 text"}',
        {"_id": "good", "title": "Good", "text": "The one good line."},
        '{"_id": "title", "title": "\\udfff", "text": "t"}',
        '{"_id": "id\\ud800", "text": "t"}',
        '{"_id": "acl", "text": "t", "acl": ["hr\\udc80"]}',
        '{"_id": "nul", "text": "a\\u0000b"}',
        '{"_id": "nul\\u0000id", "text": "t"}',
        '{"_id": "new\\nline", "text": "t"}',
    )
    docs, skipped = load_source(path, ["public"], MB)
    assert [d.doc_id for d in docs] == ["good"]
    lines = skipped_lines(skipped)
    assert set(lines) == {1, 3, 4, 5, 6, 7, 8}
    assert "text contains a lone surrogate (U+D800)" in lines[1]
    assert "title contains a lone surrogate" in lines[3]
    assert "document id 'id\\ud800' is not valid Unicode" in lines[4]
    assert "lone surrogate" in lines[5]
    assert "text contains a NUL character" in lines[6] and "control character (\\x00)" in lines[7]
    assert "control character (\\n)" in lines[8]
    for entry in skipped:  # every message prints: no raw surrogate or control character left in it
        entry.reason.encode("utf-8")
        assert "\n" not in entry.reason


def test_a_bad_jsonl_line_no_longer_aborts_the_ingest(db, settings, local_embedder, tenant, tmp_path):
    path = jsonl(tmp_path, '{"_id": "bad", "text": "\\ud800"}', {"_id": "good", "text": "Landed despite its neighbour."})
    docs, skipped = load_source(path, ["public"], MB)
    report = ingest_documents(db, local_embedder, settings, tenant, docs, skipped)
    assert report.documents["added"] == 1 and report.documents["skipped"] == 1 and not report.errors


def test_file_names_that_are_not_utf8_or_hold_control_characters_are_skipped(root):
    os.close(os.open(os.fsencode(root) + b"/latin1-caf\xe9.md", os.O_CREAT | os.O_WRONLY))
    write(root / "new\nline.md", "Text.")
    write(root / "tab\t.md", "Text.")
    write(root / "[red]rich[/] markup.md", "A name that is markup to a terminal library, and valid.")
    docs, skipped = load_source(root, ["public"], MB)
    assert sorted(d.doc_id for d in docs) == ["[red]rich[/] markup.md", "good.md"]
    by_where = {s.where.rsplit("/", 1)[1]: s.reason for s in skipped}
    assert by_where == {
        "latin1-caf\\xe9.md": "file name is not valid UTF-8: rename it",
        "new\\nline.md": "file name contains a control character (\\n), so the HTTP API could not address it: rename it",
        "tab\\t.md": "file name contains a control character (\\t), so the HTTP API could not address it: rename it",
    }


def test_printable_escapes_what_a_terminal_or_encoder_would_choke_on():
    assert printable("a\nb\x1b[31m\udcff\ud800ok") == "a\\nb\\x1b[31m\\xff\\ud800ok"


# --- 6. YAML bombs and other front matter that is costly to read -------------------------------

BILLION_LAUGHS = "\n".join(
    ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    + [f"{k}: &{k} [{', '.join(['*' + p] * 9)}]" for p, k in zip("abcdefgh", "bcdefghi")]
)


@pytest.mark.parametrize("front_matter, reason", [
    (BILLION_LAUGHS + "\nacl: [hr]", "anchors or aliases"),
    ("base: &b {acl: [hr]}\n<<: *b", "anchors or aliases"),
    ("title: " + "[" * 2000 + "]" * 2000, "nests deeper than 16 levels"),
    ("title: " + "9" * 5000, "cannot be read"),
    ("title: 2024-13-45", "cannot be read"),
    ("title: " + "x" * (70 * 1024), "over the 64 KB limit"),
])
def test_yaml_bombs_and_oversized_front_matter_are_skipped(tmp_path, front_matter, reason):
    write(tmp_path / "bomb.md", f"---\n{front_matter}\n---\nBody.\n")
    docs, skipped = load_source(tmp_path, ["public"], MB)
    assert docs == [] and reason in skipped[0].reason


# --- 5. two ingests of one tenant at once ------------------------------------------------------


class SerialEmbedder:
    """The real local model, one thread at a time: the race under test is the database's, not the model's."""

    def __init__(self, inner):
        self.inner, self.model_id, self.dimension = inner, inner.model_id, inner.dimension
        self.lock = threading.Lock()

    def embed_documents(self, texts):
        with self.lock:
            return self.inner.embed_documents(texts)

    def embed_query(self, text):
        with self.lock:
            return self.inner.embed_query(text)


def test_two_concurrent_ingests_of_one_tenant_both_finish_cleanly(db, settings, local_embedder, tenant, tmp_path):
    for i in range(6):
        write(tmp_path / f"d{i}.md", f"# Service {i}\nService {i} retries the call {i + 2} times before it gives up.\n")
    docs, skipped = load_source(tmp_path, ["public"], MB)
    embedder = SerialEmbedder(local_embedder)
    both_planned = threading.Barrier(2)

    def wait_for_the_other(stage, done, total):
        # Both runs read the index before either writes, the race the stale plans lost. A run that
        # serialised the ingests would never meet the other here: the timeout lets it go on.
        try:
            both_planned.wait(timeout=2)
        except threading.BrokenBarrierError:  # the other run never came: the ingests were serialised
            pass

    reports, failures = [], []

    def run():
        try:
            reports.append(ingest_documents(db, embedder, settings, tenant, docs, skipped, progress=wait_for_the_other))
        except Exception as exc:  # noqa: BLE001 - the assertion below shows it
            failures.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == [] and all(r.clean for r in reports), [r.errors for r in reports]
    assert sorted(r.documents["added"] + r.documents["unchanged"] for r in reports) == [6, 6]
    assert sum(r.documents["added"] for r in reports) == 6
    with db.connection() as conn:
        rows = conn.execute("SELECT doc_id, count(*), count(DISTINCT chunk_no) FROM chunks WHERE tenant_id = %s"
                            " GROUP BY doc_id", (tenant,)).fetchall()
    assert len(rows) == 6 and all(total == distinct for _, total, distinct in rows)


def test_first_vector_indexes_of_a_model_built_at_once_do_not_collide(db):
    models = [f"race-{uuid.uuid4().hex[:8]}" for _ in range(4)]
    start = threading.Barrier(2)
    failures = []

    def build(model):
        try:
            start.wait(timeout=10)
            with db.connection() as conn:
                store.ensure_vector_index(conn, model, 3)
                conn.commit()
        except Exception as exc:  # noqa: BLE001 - the assertion below shows it
            failures.append(exc)

    try:
        for model in models:
            threads = [threading.Thread(target=build, args=(model,)) for _ in range(2)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        assert failures == []
    finally:
        with db.connection() as conn:
            for model in models:
                conn.execute(f'DROP INDEX IF EXISTS "{store.vector_index_name(model)}"')
            conn.execute("DELETE FROM embedding_models WHERE embed_model = ANY(%s)", (models,))
            conn.commit()


# --- 7. a hostile corpus through `crossroads ingest` --------------------------------------------


def category_samples(per_category: int = 12) -> dict[str, str]:
    """Up to `per_category` code points of each Unicode general category, spread over the code space."""
    found: dict[str, list[str]] = {}
    for code in range(0, 0x110000, 7):
        char = chr(code)
        found.setdefault(unicodedata.category(char), []).append(char)
    samples = {}
    for category, chars in found.items():
        step = max(1, len(chars) // per_category)
        samples[category] = "".join(chars[::step][:per_category]).replace("\x00", "")
    return samples


def hostile_corpus(root, outside):
    """Write the corpus; return (doc ids that must land, {file name as printed: words its reason holds})."""
    good, bad = [], {}
    for category, chars in sorted(category_samples().items()):
        name = f"unicode/{category}.md"
        text = f"# Category {category}\nSample of category {category}: {chars} end of sample.\n"
        if category == "Cs":  # lone surrogates cannot be UTF-8: written as their 3-byte forms, they are invalid
            write(root / name, text.encode("utf-8", "surrogatepass"))
            bad[name] = "not valid UTF-8"
        else:
            write(root / name, text)
            good.append(name)
    write(root / "fdfa.md", "Ligature " + "\ufdfa" * 30 + "\n")
    write(root / "utf16.md", "\ufeffUTF-16 text with a byte-order mark, Кириллица.\n".encode("utf-16-le"))
    write(root / "long_line.md", "word " * 300 + "x" * 1200)  # one line, no sentence to split at
    write(root / "[red]rich[/] markup.md", "A name a terminal library would read as markup.\n")
    write(root / "tagged.md", "---\nacl: [public]\ntags: [ops]\n---\nA document with a tag.\n")
    good += ["fdfa.md", "utf16.md", "long_line.md", "[red]rich[/] markup.md", "tagged.md"]

    write(root / "invalid.md", b"caf\xe9 \xff\xfe broken bytes")
    write(root / "[/bold] not markup.png", b"\x89PNG")  # printed in the report: rich must not read it as a tag
    write(root / "giant.md", ("giant " * (MB // 2)).encode())  # 3 MB on one line, over the 1 MB the run allows
    write(root / "empty.md", "")
    write(root / "nul_early.md", b"text\x00more")
    write(root / "nul_late.md", b"a" * 10_000 + b"\x00tail")
    write(root / "bomb.md", f"---\n{BILLION_LAUGHS}\n---\nBody.\n")
    write(root / "deep.md", "---\ntitle: " + "[" * 2000 + "]" * 2000 + "\n---\nBody.\n")
    write(root / "upper_acl.md", "\n---\nACL: [secret]\n---\nSecret body.\n")
    write(root / "bool_acl.md", "---\nacl: [true, 0]\n---\nBody.\n")
    write(root / "new\nline.md", "Text.")
    os.close(os.open(os.fsencode(root) + b"/caf\xe9.md", os.O_CREAT | os.O_WRONLY))
    write(root / "..dots.md", "A hidden file: ignored, as every hidden file is.")
    (root / "passwd.md").symlink_to("/etc/passwd")
    (root / "outside.md").symlink_to(outside / "secret.md")
    (root / "outside_dir").symlink_to(outside)
    (root / "loop").symlink_to(root)
    os.mkfifo(root / "pipe.md")
    bad.update({
        "invalid.md": "not valid UTF-8", "[/bold] not markup.png": "unsupported file type", "giant.md": "over the 1.0 MB limit", "empty.md": "empty file",
        "nul_early.md": "binary file", "nul_late.md": "NUL character", "bomb.md": "anchors or aliases",
        "deep.md": "nests deeper than 16 levels", "upper_acl.md": "misspelt 'acl'",
        "bool_acl.md": "not a group name",
        "new\\nline.md": "control character", "caf\\xe9.md": "not valid UTF-8", "passwd.md": "symbolic link",
        "outside.md": "symbolic link", "outside_dir": "symbolic link", "loop": "symbolic link", "pipe.md": "FIFO",
    })
    return good, bad


def test_hostile_corpus_through_the_cli(db, settings, local_embedder, cli_env, root, outside, tenant):
    good, bad = hostile_corpus(root, outside)
    env = dict(cli_env, CROSSROADS_MAX_DOCUMENT_BYTES=str(MB))
    proc = crossroads(env, "ingest", str(root), "--tenant", tenant, "--acl", "public", rc=None)
    assert proc.returncode == 3, f"rc={proc.returncode}, 3 expected (134/139: the embedder crashed)\n{proc.stderr}"
    reported = {line.split(": ", 1)[0].removeprefix(f"skipped {root}/"): line
                for line in proc.stderr.splitlines() if line.startswith("skipped ")}
    for name, words in bad.items():
        assert words in reported.get(name, ""), f"{name}: {reported.get(name)}"
    assert "front matter key 'tags' is not used" in proc.stderr
    with db.connection() as conn:
        landed = {r[0] for r in conn.execute("SELECT doc_id FROM documents WHERE tenant_id = %s", (tenant,))}
    assert landed == {"good.md", *good}
    with make_searcher(db, settings, embedder=local_embedder) as searcher:  # a public reader, in process
        assert searcher.search(tenant, ["public"], "root:x:0:0", k=10, mode="bm25").hits == []
        nearest = searcher.search(tenant, ["public"], f"root:x:0:0 {SECRET}", k=50, mode="hybrid").hits
    assert nearest and not any("root:x:0:0" in h.text or SECRET in h.text for h in nearest)
    # names that are markup to a terminal library are printed as they are, not styled or crashing
    listed = crossroads(env, "documents", "list", "--tenant", tenant)
    assert "[red]rich[/] markup.md" in listed.stdout.replace("\n", "")
