"""Reading source documents: a folder of Markdown / text files, or a JSONL corpus (`_id`, `title`, `text`).

Bad input never stops a batch: each unreadable file or line becomes a `Skipped` entry naming where
it is and why, and every other document still loads.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import yaml

from vector.language import detect_language

TEXT_SUFFIXES = (".md", ".markdown", ".txt")
LANGUAGES = ("russian", "english", "simple")
_LANG_ALIASES = {"ru": "russian", "en": "english", "russian": "russian", "english": "english", "simple": "simple"}


@dataclass(frozen=True)
class SourceDocument:
    doc_id: str
    title: str
    text: str
    acl: tuple[str, ...]
    lang: str
    source: str


@dataclass(frozen=True)
class Skipped:
    where: str
    reason: str
    doc_id: str | None = None  # known when the id could be read: such a document is never pruned


class BadDocument(ValueError):
    """Raised inside this module for one document; turned into `Skipped` by the loaders."""


def parse_acl(value: object, where: str = "acl") -> tuple[str, ...]:
    """Groups from a list or a comma-separated string: stripped, non-empty, unique, sorted."""
    if isinstance(value, str):
        items = value.split(",")
    elif isinstance(value, (list, tuple)):
        items = value
    else:
        raise BadDocument(f"{where} must be a list of group names or a comma-separated string, got {type(value).__name__}")
    groups = []
    for item in items:
        if not isinstance(item, (str, int)):
            raise BadDocument(f"{where} contains {item!r}, which is not a group name")
        name = str(item).strip()
        if name:
            groups.append(name)
    return tuple(sorted(set(groups)))


def decode(data: bytes, max_bytes: int) -> str:
    """Bytes -> text, or `BadDocument` saying why not (size, empty, binary, not UTF-8)."""
    if len(data) > max_bytes:
        raise BadDocument(
            f"file is {len(data) / 1e6:.1f} MB, over the {max_bytes / 1e6:.1f} MB limit "
            "(raise CROSSROADS_MAX_DOCUMENT_BYTES or split the file)"
        )
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


def split_front_matter(text: str) -> tuple[dict, str]:
    """YAML front matter between `---` lines at the very start -> (metadata, body)."""
    if not text.startswith("---"):
        return {}, text
    lines = text.split("\n")
    if lines[0].strip() != "---":
        return {}, text
    for end in range(1, len(lines)):
        if lines[end].strip() in ("---", "..."):
            break
    else:
        raise BadDocument("front matter opened with '---' but never closed")
    try:
        meta = yaml.safe_load("\n".join(lines[1:end])) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at front matter line {mark.line + 1}" if mark else ""
        raise BadDocument(f"front matter is not valid YAML{where}: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(meta, dict):
        raise BadDocument("front matter must be a YAML mapping (key: value lines)")
    return meta, "\n".join(lines[end + 1 :])


def _first_heading(body: str) -> str | None:
    for line in body.splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return None


def build_document(
    doc_id: str, body: str, meta: dict, default_acl: tuple[str, ...], source: str, fallback_title: str
) -> SourceDocument:
    acl = parse_acl(meta["acl"], "front matter 'acl'") if "acl" in meta else default_acl
    if not acl:
        raise BadDocument("no access groups: add `acl: [group, ...]` to its front matter or pass --acl")
    title = meta.get("title")
    if title is not None and not isinstance(title, (str, int, float)):
        raise BadDocument("front matter 'title' must be text")
    title = str(title).strip() if title is not None else (_first_heading(body) or fallback_title)
    lang = meta.get("lang")
    if lang is not None:
        if str(lang).lower() not in _LANG_ALIASES:
            raise BadDocument(f"front matter 'lang' is {lang!r}; use one of ru, en, simple")
        lang = _LANG_ALIASES[str(lang).lower()]
    body = body.replace("\ufeff", "")  # stray byte-order marks inside text (concatenated files) are noise
    if not body.strip():
        raise BadDocument("no text after the front matter")
    return SourceDocument(doc_id, title, body, acl, lang or detect_language(title + "\n" + body), source)


def load_file(path: Path, doc_id: str, default_acl: tuple[str, ...], max_bytes: int) -> SourceDocument | Skipped:
    """One Markdown / text file, or the reason it cannot be indexed."""
    if path.suffix.lower() not in TEXT_SUFFIXES:
        reason = f"unsupported file type '{path.suffix or '(none)'}': expected {', '.join(TEXT_SUFFIXES)}"
        return Skipped(str(path), reason, doc_id)
    try:
        text = decode(path.read_bytes(), max_bytes)
        meta, body = split_front_matter(text) if path.suffix.lower() != ".txt" else ({}, text)
        return build_document(doc_id, body, meta, default_acl, str(path), path.stem)
    except BadDocument as exc:
        return Skipped(str(path), str(exc), doc_id)
    except OSError as exc:
        return Skipped(str(path), f"cannot read: {exc.strerror or exc}", doc_id)


def load_folder(root: Path, default_acl: tuple[str, ...], max_bytes: int) -> tuple[list[SourceDocument], list[Skipped]]:
    """Every Markdown / text file under `root` (hidden files skipped); doc_id = path relative to root."""
    documents, skipped = [], []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        relative = path.relative_to(root)
        if any(part.startswith(".") for part in relative.parts):
            continue
        loaded = load_file(path, relative.as_posix(), default_acl, max_bytes)
        (skipped if isinstance(loaded, Skipped) else documents).append(loaded)
    return documents, skipped


def load_jsonl(path: Path, default_acl: tuple[str, ...], max_bytes: int) -> tuple[list[SourceDocument], list[Skipped]]:
    """One document per line: `_id`, `title`, `text`, optional `acl` and `lang`."""
    documents, skipped, seen = [], [], set()
    with path.open("rb") as handle:
        for lineno, raw in enumerate(handle, start=1):
            where = f"{path}:{lineno}"
            doc_id = None
            if not raw.strip():
                continue
            try:
                record = json.loads(decode(raw, max_bytes))
                if not isinstance(record, dict):
                    raise BadDocument("line is not a JSON object")
                raw_id = record.get("_id")
                if not isinstance(raw_id, (str, int)) or str(raw_id).strip() == "":
                    raise BadDocument("missing '_id'")
                doc_id = str(raw_id)
                if doc_id in seen:
                    raise BadDocument(f"duplicate _id {doc_id!r} (the first occurrence was kept)")
                text = record.get("text")
                if not isinstance(text, str):
                    raise BadDocument(f"'text' of {doc_id!r} is missing or not a string")
                meta = {k: record[k] for k in ("title", "acl", "lang") if record.get(k) is not None}
                documents.append(build_document(doc_id, text, meta, default_acl, where, doc_id))
                seen.add(doc_id)
            except json.JSONDecodeError as exc:
                skipped.append(Skipped(where, f"not valid JSON: {exc.msg} at column {exc.colno}"))
            except BadDocument as exc:
                skipped.append(Skipped(where, str(exc), doc_id))
    return documents, skipped


def load_source(path: Path, default_acl: Iterable[str], max_bytes: int) -> tuple[list[SourceDocument], list[Skipped]]:
    """A folder, one Markdown / text file, or a `.jsonl` corpus."""
    acl = parse_acl(list(default_acl))
    if path.is_dir():
        return load_folder(path, acl, max_bytes)
    if path.suffix.lower() == ".jsonl":
        return load_jsonl(path, acl, max_bytes)
    if path.is_file():
        loaded = load_file(path, path.name, acl, max_bytes)
        return ([], [loaded]) if isinstance(loaded, Skipped) else ([loaded], [])
    raise FileNotFoundError(f"{path} does not exist")
