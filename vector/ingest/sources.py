"""Reading source documents: a folder of Markdown / text files and PDF, DOCX, HTML, email and mbox
files (converted to Markdown by vector.ingest.formats), or a JSONL corpus (`_id`, `title`, `text`).

Bad input never stops a batch: each unreadable file or line becomes a `Skipped` entry naming where
it is and why, and every other document still loads.

A folder is read without ever leaving it: symbolic links inside it are not followed (one could
point at /etc/passwd or at another team's files, and a link to a parent folder would loop), and
only regular files are opened (a FIFO would block the read forever, a device would never end).
Files are opened by name inside an open directory with O_NOFOLLOW, so an entry swapped for a link
after it was listed is refused too.

Anything that decides who may read a document is strict: front matter that looks like front
matter but cannot be read, an `acl` that is not a list of names, or a key that looks like a
misspelt `acl` skips the document; it is never given the default groups instead.
"""
from __future__ import annotations

import errno
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Callable, Iterable, Iterator

from core.errors import BadDocument
from core.text_safety import SURROGATE, printable
from vector.ingest.formats import FORMAT_SUFFIXES, convert
from vector.ingest.front_matter import front_matter_warnings, refuse_acl_lookalikes, split_front_matter, yaml_scalar_hint
from core.text.language import detect_language
from vector.document_ids import DOC_ID_MAX_CHARS, doc_id_problem

TEXT_SUFFIXES = (".md", ".markdown", ".txt")
LANGUAGES = ("russian", "english", "simple")
_LANG_ALIASES = {"ru": "russian", "en": "english", "russian": "russian", "english": "english", "simple": "simple"}
_SYMLINK_REASON = "symbolic link: not followed (ingest reads only files inside the folder; copy the file in instead)"
_OPEN_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True)
class SourceDocument:
    doc_id: str
    title: str
    text: str
    acl: tuple[str, ...]
    lang: str
    source: str
    # what was read but not used (an unknown front matter key): reported, the document still lands
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class Skipped:
    where: str
    reason: str
    doc_id: str | None = None  # known when the id could be read: such a document is never pruned


def _check_text(field: str, value: str) -> None:
    """PostgreSQL stores neither NUL nor lone surrogates: refuse them here, for this document only,
    instead of failing the whole batch when the text is hashed or written."""
    if "\x00" in value:
        raise BadDocument(f"{field} contains a NUL character at position {value.index(chr(0))}: binary data, not text")
    if found := SURROGATE.search(value):
        raise BadDocument(
            f"{field} contains a lone surrogate (U+{ord(found.group()):04X}) at position {found.start()}, which is not "
            "valid Unicode: fix the source (in JSON, a \\ud800-\\udfff escape needs its pair)"
        )


def parse_acl(value: object, where: str = "acl") -> tuple[str, ...]:
    """Groups from a list or a comma-separated string: stripped, non-empty, unique, sorted."""
    if value is None:
        raise BadDocument(f"{where} is empty: give a list of group names, e.g. acl: [staff]")
    if isinstance(value, str):
        items = value.split(",")
    elif isinstance(value, (list, tuple)):
        items = value
    else:
        raise BadDocument(
            f"{where} must be a list of group names or a comma-separated string, got {type(value).__name__}"
            f"{yaml_scalar_hint(value)}"
        )
    groups = []
    for item in items:
        if not isinstance(item, str):
            raise BadDocument(f"{where} contains {item!r}, which is not a group name: group names must be text"
                              f"{yaml_scalar_hint(item)}")
        _check_text(f"{where} group '{printable(item)}'", item)
        name = item.strip()
        if name:
            groups.append(name)
    return tuple(sorted(set(groups)))


def _too_big(size: int, max_bytes: int) -> BadDocument:
    return BadDocument(
        f"file is {size / 1e6:.1f} MB, over the {max_bytes / 1e6:.1f} MB limit "
        "(raise CROSSROADS_MAX_DOCUMENT_BYTES or split the file)"
    )


def decode(data: bytes, max_bytes: int) -> str:
    """Bytes -> text, or `BadDocument` saying why not (size, empty, binary, not UTF-8)."""
    if len(data) > max_bytes:
        raise _too_big(len(data), max_bytes)
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            text = data.decode("utf-16")
        except UnicodeDecodeError as exc:
            raise BadDocument(f"starts with a UTF-16 byte-order mark but is not valid UTF-16 ({exc.reason})") from None
    else:
        if b"\x00" in data[:8192]:
            raise BadDocument("binary file (contains NUL bytes), not text")
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise BadDocument(_not_utf8_message(data, exc)) from None
    if not text.strip():
        raise BadDocument("empty file")
    return text


def _not_utf8_message(data: bytes, exc: UnicodeDecodeError) -> str:
    from charset_normalizer import from_bytes

    guess = from_bytes(data[:65536]).best()
    hint = f" (it looks like {guess.encoding}: convert it with `iconv -f {guess.encoding} -t utf-8`)" if guess else ""
    return f"not valid UTF-8: byte 0x{data[exc.start]:02x} at offset {exc.start}{hint}"


def _first_heading(body: str) -> str | None:
    for line in body.splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return None


def build_document(
    doc_id: str, body: str, meta: dict, default_acl: tuple[str, ...], source: str, fallback_title: str,
    warnings: tuple[str, ...] = (), meta_from: str = "front matter",
) -> SourceDocument:
    """`meta_from` names where `meta` was read ("front matter", "JSONL"), for messages that say what to fix."""
    if problem := doc_id_problem(doc_id):
        raise BadDocument(f"document id '{printable(doc_id)}' {problem}: the HTTP API could not address it")
    acl = parse_acl(meta["acl"], "'acl'") if "acl" in meta else default_acl
    if not acl:
        how = '"acl": ["group", ...] to its line' if meta_from == "JSONL" else "`acl: [group, ...]` to its front matter"
        raise BadDocument(f"no access groups: add {how} or pass --acl")
    title = meta.get("title")
    if title is not None and not isinstance(title, (str, int, float)):
        raise BadDocument(f"{meta_from} 'title' must be text")
    title = str(title).strip() if title is not None else (_first_heading(body) or fallback_title)
    lang = meta.get("lang")
    if lang is not None:
        if str(lang).lower() not in _LANG_ALIASES:
            raise BadDocument(f"{meta_from} 'lang' is {lang!r}; use one of ru, en, simple")
        lang = _LANG_ALIASES[str(lang).lower()]
    body = body.replace("\ufeff", "")  # stray byte-order marks inside text (concatenated files) are noise
    if not body.strip():
        raise BadDocument("no text" + (" after the front matter" if meta_from == "front matter" else ""))
    _check_text("title", title)
    _check_text("text", body)
    return SourceDocument(doc_id, title, body, acl, lang or detect_language(title + "\n" + body), source, warnings)


def _read_regular_file(name: str | Path, dir_fd: int | None, max_bytes: int) -> bytes:
    """The bytes of a regular file, opened without following a final symbolic link and without
    blocking on a FIFO: the entry may have been swapped since the folder was listed."""
    try:
        fd = os.open(name, _OPEN_FILE, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise BadDocument(_SYMLINK_REASON) from None
        raise
    with open(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise BadDocument(_not_regular_reason(info.st_mode))
        if info.st_size > max_bytes:
            raise _too_big(info.st_size, max_bytes)
        return handle.read(max_bytes + 1)  # one byte over: a file that grew since fstat still fails the size check


def _not_regular_reason(mode: int) -> str:
    kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a plain file")
    return f"{kind}: only regular files are read"


def _load(where: str, doc_id: str, name: str, read: Callable[[], bytes], default_acl: tuple[str, ...],
          max_bytes: int) -> SourceDocument | Skipped:
    """One Markdown / text file or one file of another format, read by `read`, or the reason it cannot be indexed."""
    suffix = PurePath(name).suffix.lower()
    if suffix not in TEXT_SUFFIXES and suffix not in FORMAT_SUFFIXES:
        reason = (f"unsupported file type '{suffix or '(none)'}': expected "
                  f"{', '.join(TEXT_SUFFIXES + tuple(FORMAT_SUFFIXES))}")
        return Skipped(where, reason, doc_id)
    try:
        if suffix in FORMAT_SUFFIXES:
            return _load_converted(where, doc_id, name, read, default_acl, max_bytes)
        meta, body = split_front_matter(decode(read(), max_bytes))
        warnings = front_matter_warnings(meta)
        return build_document(doc_id, body, meta, default_acl, where, PurePath(name).stem, warnings)
    except BadDocument as exc:
        return Skipped(where, str(exc), doc_id)
    except OSError as exc:
        return Skipped(where, f"cannot read: {exc.strerror or exc}", doc_id)


def _load_converted(where: str, doc_id: str, name: str, read: Callable[[], bytes], default_acl: tuple[str, ...],
                    max_bytes: int) -> SourceDocument:
    """A PDF, DOCX, HTML or email file. These carry no front matter, so their groups are --acl's; without
    any the file is skipped before it is parsed, as a Markdown file without groups is."""
    kind = FORMAT_SUFFIXES[PurePath(name).suffix.lower()]
    if not default_acl:
        raise BadDocument(f"no access groups: a {kind} file has no front matter to name them; pass --acl "
                          "(or convert it to Markdown with `acl:` in its front matter)")
    data = read()
    if not data.strip():
        raise BadDocument("empty file")
    converted = convert(name, data, max_bytes)
    meta = {"title": converted.title} if converted.title else {}
    return build_document(doc_id, converted.text, meta, default_acl, where, PurePath(name).stem, meta_from=kind)


def load_file(path: Path, doc_id: str, default_acl: tuple[str, ...], max_bytes: int) -> SourceDocument | Skipped:
    """One file named on the command line: a link there is the user's own choice, so it is resolved."""
    return _load(printable(str(path)), doc_id, path.name,
                 lambda: _read_regular_file(os.path.realpath(path), None, max_bytes), default_acl, max_bytes)


def _walk(dir_fd: int, prefix: str, root: Path) -> Iterator[tuple[str, int, os.DirEntry] | Skipped]:
    """(path relative to the root, directory fd, entry) of every non-directory under `dir_fd`, depth
    first in name order, hidden names left out; a folder that cannot be read is a `Skipped`.
    Only real directories are entered (never a link), so the walk stays inside the root and cannot loop."""
    try:
        with os.scandir(dir_fd) as listing:
            entries = sorted(listing, key=lambda e: e.name)
    except OSError as exc:
        yield Skipped(printable(str(root / prefix)), f"cannot list folder: {exc.strerror or exc}")
        return
    for entry in entries:
        if entry.name.startswith("."):
            continue
        relative = prefix + entry.name
        if not entry.is_dir(follow_symlinks=False):
            yield relative, dir_fd, entry
        elif len(relative) >= DOC_ID_MAX_CHARS:  # also bounds the depth, and with it the open folders
            yield Skipped(printable(str(root / relative)), f"folder path is over {DOC_ID_MAX_CHARS} characters: "
                          "no file in it could get an id the HTTP API accepts; shorten the names")
        else:
            try:
                child = os.open(entry.name, _OPEN_DIR, dir_fd=dir_fd)
            except OSError as exc:
                yield Skipped(printable(str(root / relative)), f"cannot open folder: {exc.strerror or exc}")
                continue
            try:
                yield from _walk(child, relative + "/", root)
            finally:
                os.close(child)


def _load_entry(root: Path, relative: str, dir_fd: int, entry: os.DirEntry, default_acl: tuple[str, ...],
                max_bytes: int) -> SourceDocument | Skipped:
    where = printable(str(root / relative))
    if entry.is_symlink():
        return Skipped(where, _SYMLINK_REASON, relative)
    if not entry.is_file(follow_symlinks=False):
        try:
            return Skipped(where, _not_regular_reason(entry.stat(follow_symlinks=False).st_mode), relative)
        except OSError as exc:  # gone since the folder was listed
            return Skipped(where, f"cannot read: {exc.strerror or exc}", relative)
    if SURROGATE.search(entry.name):
        return Skipped(where, "file name is not valid UTF-8: rename it", relative)
    if problem := doc_id_problem(relative):
        return Skipped(where, f"file name {problem}, so the HTTP API could not address it: rename it", relative)
    return _load(where, relative, entry.name, lambda: _read_regular_file(entry.name, dir_fd, max_bytes),
                 default_acl, max_bytes)


def load_folder(root: Path, default_acl: tuple[str, ...], max_bytes: int) -> tuple[list[SourceDocument], list[Skipped]]:
    """Every Markdown / text file and every file of a converted format (PDF, DOCX, ...) under `root`
    (hidden files skipped); doc_id = path relative to root.
    `root` itself may be a link (the user named it); nothing inside it is followed."""
    documents, skipped = [], []
    try:
        root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        return [], [Skipped(printable(str(root)), f"cannot open folder: {exc.strerror or exc}")]
    try:
        for found in _walk(root_fd, "", root):
            loaded = found if isinstance(found, Skipped) else _load_entry(root, *found, default_acl, max_bytes)
            (skipped if isinstance(loaded, Skipped) else documents).append(loaded)
    finally:
        os.close(root_fd)
    return documents, skipped


def _jsonl_document(record: object, where: str, default_acl: tuple[str, ...], seen: set[str]) -> SourceDocument:
    if not isinstance(record, dict):
        raise BadDocument("line is not a JSON object")
    raw_id = record.get("_id")
    if not isinstance(raw_id, (str, int)) or str(raw_id).strip() == "":
        raise BadDocument("missing '_id'")
    doc_id = str(raw_id)
    if doc_id in seen:
        raise BadDocument(f"duplicate _id '{printable(doc_id)}' (the first occurrence was kept)")
    text = record.get("text")
    if not isinstance(text, str):
        raise BadDocument(f"'text' of '{printable(doc_id)}' is missing or not a string")
    refuse_acl_lookalikes(record, "field")
    # an `acl` that is present but null is a mistake to report, not a document without groups
    meta = {k: record[k] for k in ("title", "lang") if record.get(k) is not None}
    if "acl" in record:
        meta["acl"] = record["acl"]
    return build_document(doc_id, text, meta, default_acl, where, doc_id, meta_from="JSONL")


def load_jsonl(path: Path, default_acl: tuple[str, ...], max_bytes: int) -> tuple[list[SourceDocument], list[Skipped]]:
    """One document per line: `_id`, `title`, `text`, optional `acl` and `lang`; other fields are ignored."""
    documents, skipped, seen = [], [], set()
    with path.open("rb") as handle:
        for lineno, raw in enumerate(handle, start=1):
            where = f"{printable(str(path))}:{lineno}"
            if not raw.strip():
                continue
            record = None
            try:
                record = json.loads(decode(raw, max_bytes))
                document = _jsonl_document(record, where, default_acl, seen)
            except json.JSONDecodeError as exc:
                skipped.append(Skipped(where, f"not valid JSON: {exc.msg} at column {exc.colno}"))
            except BadDocument as exc:
                skipped.append(Skipped(where, str(exc), _readable_id(record)))
            else:
                documents.append(document)
                seen.add(document.doc_id)
    return documents, skipped


def _readable_id(record: object) -> str | None:
    """The line's `_id` when there is one, so a skipped line still keeps its document from a prune."""
    raw_id = record.get("_id") if isinstance(record, dict) else None
    return str(raw_id) if isinstance(raw_id, (str, int)) and str(raw_id).strip() else None


def load_source(path: Path, default_acl: Iterable[str], max_bytes: int) -> tuple[list[SourceDocument], list[Skipped]]:
    """A folder, one Markdown / text / PDF / DOCX / HTML / email file, or a `.jsonl` corpus."""
    acl = parse_acl(list(default_acl))
    if path.is_dir():
        return load_folder(path, acl, max_bytes)
    if not path.exists():
        raise FileNotFoundError(f"{printable(str(path))} does not exist")
    if path.suffix.lower() == ".jsonl":
        return load_jsonl(path, acl, max_bytes)
    loaded = load_file(path, path.name, acl, max_bytes)
    return ([], [loaded]) if isinstance(loaded, Skipped) else ([loaded], [])
