"""YAML front matter of a Markdown or text file: found, parsed within limits, and checked for keys
that decide who may read the document.

Strict where access is concerned: front matter that looks like front matter but cannot be read, or a
key that looks like a misspelt `acl`, makes the document fail (`BadDocument`); a guess would publish
it under the default groups. Other unknown keys are warnings.
"""
from __future__ import annotations

import re
from typing import Iterable

import yaml

from core.errors import BadDocument
from core.text_safety import printable

FRONT_MATTER_KEYS = ("title", "acl", "lang")
# Real front matter is a few lines; the cap bounds what YAML parsing of a hostile file can cost.
FRONT_MATTER_MAX_BYTES = 64 * 1024
FRONT_MATTER_MAX_DEPTH = 16
# Keys a writer may have meant as the access list (compared lower-case, letters only). A document
# carrying one is skipped: guessing that it meant nothing would publish it under the default groups.
_ACL_LOOKALIKES = {"acl", "acls", "group", "groups", "access", "accesslist", "allowedgroups", "permissions",
                   "readers", "roles", "visibility"}


def yaml_scalar_hint(value: object) -> str:
    if isinstance(value, (bool, int, float)):
        return (" (YAML reads bare yes/no/true/false/on/off as booleans and bare digits as numbers: "
                "quote them, e.g. ['0', 'yes'])")
    return ""


class _FrontMatterLoader(yaml.SafeLoader):
    """YAML without anchors and aliases, nested at most FRONT_MATTER_MAX_DEPTH deep. Front matter
    needs neither: a few lines of nested aliases (a "billion laughs") expand into billions of nodes
    for whoever walks the result, and deep nesting exhausts the composer's recursion."""

    depth = 0

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise BadDocument("front matter uses YAML anchors or aliases (&name, *name), which are not allowed: "
                              "write the values out")
        if self.depth >= FRONT_MATTER_MAX_DEPTH:
            raise BadDocument(f"front matter nests deeper than {FRONT_MATTER_MAX_DEPTH} levels: "
                              "it should be flat key: value lines")
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def _parse_front_matter(block: str) -> dict:
    size = len(block.encode("utf-8"))
    if size > FRONT_MATTER_MAX_BYTES:
        raise BadDocument(f"front matter is {size / 1024:.0f} KB, over the {FRONT_MATTER_MAX_BYTES // 1024} KB limit: "
                          "if the first '---' line is not front matter, start the file with something else")
    try:
        meta = yaml.load(block, Loader=_FrontMatterLoader) or {}
    except BadDocument:
        raise
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at front matter line {mark.line + 1}" if mark else ""
        raise BadDocument(f"front matter is not valid YAML{where}: {getattr(exc, 'problem', exc)}") from None
    except (ValueError, OverflowError) as exc:  # a number or date YAML accepts but Python cannot hold
        detail = str(exc).split(";")[0]  # Python's own advice after the ';' is not the writer's fix
        raise BadDocument(f"front matter has a number or date that cannot be read ({detail}): quote it") from None
    if not isinstance(meta, dict):
        raise BadDocument("front matter must be a YAML mapping (key: value lines): "
                          "if the first '---' line is not front matter, start the file with something else")
    return meta


def _first_text_line(lines: list[str]) -> int | None:
    """Index of the first line with something besides whitespace and byte-order marks."""
    for number, line in enumerate(lines):
        if line.replace("\ufeff", "").strip():
            return number
    return None


def split_front_matter(text: str) -> tuple[dict, str]:
    """YAML front matter between `---` lines at the start -> (metadata, body).

    Blank lines or byte-order marks before the opening `---` still count as front matter: a writer
    who put them there meant front matter, and ignoring it would drop the document's `acl`."""
    lines = text.split("\n")
    start = _first_text_line(lines)
    if start is None or lines[start].replace("\ufeff", "").strip() != "---":
        return {}, text
    for end in range(start + 1, len(lines)):
        if lines[end].strip() in ("---", "..."):
            break
    else:
        raise BadDocument("front matter opened with '---' but never closed")
    meta = _parse_front_matter("\n".join(lines[start + 1 : end]))
    return meta, "\n".join(lines[end + 1 :])


def _looks_like_acl(key: object) -> bool:
    letters = re.sub(r"[^a-z]", "", str(key).lower())
    return key != "acl" and (letters in _ACL_LOOKALIKES or letters.startswith("acl"))


def refuse_acl_lookalikes(keys: Iterable[object], what: str) -> None:
    """`BadDocument` for a key that may have been meant as `acl` (ACL, acls, groups, access, ...)."""
    for key in keys:
        if _looks_like_acl(key):
            raise BadDocument(
                f"{what} '{printable(str(key))}' looks like a misspelt 'acl': the document is skipped rather than "
                "given the default groups; name it exactly 'acl' (lower case) or remove it"
            )


def front_matter_warnings(meta: dict) -> tuple[str, ...]:
    """One warning per key Crossroads does not read; `BadDocument` for one that may have been meant as `acl`."""
    refuse_acl_lookalikes(meta, "front matter key")
    return tuple(
        f"front matter key '{printable(str(key))}' is not used (Crossroads reads {', '.join(FRONT_MATTER_KEYS)})"
        for key in meta if key not in FRONT_MATTER_KEYS
    )
