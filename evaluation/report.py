"""The "Retrieval quality" table of docs/benchmarks.md: pure string functions, so `make eval` output is reviewable
and re-running it rewrites the section in place instead of appending a second copy."""
from __future__ import annotations

import re
from typing import Mapping

# The order configs are read in: single legs first, then what is built from them.
CONFIG_ORDER = ("dense", "bm25", "hybrid", "hybrid+rerank", "graph", "hybrid+graph", "agentic")
_HEADING = re.compile(r"^(#{1,2})\s")  # a level-1 or level-2 heading ends the section
_FENCE = re.compile(r"^\s*(```|~~~)")


def _config_key(name: str) -> tuple[int, str]:
    return (CONFIG_ORDER.index(name), "") if name in CONFIG_ORDER else (len(CONFIG_ORDER), name)


def _num(value: float | None, digits: int) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _cell(text: object) -> str:
    return str(text).replace("|", r"\|")


def markdown_table(results: Mapping[str, Mapping[str, Mapping]], k: int) -> str:
    """One row per (dataset, config): datasets by name, configs in CONFIG_ORDER then by name.

    Each summary is `metrics.summarise`'s dict; a missing value prints as "—" (e.g. evidence
    recall on a dataset without multi-gold questions)."""
    lines = [
        f"| dataset | config | n | recall@{k} | precision@{k} | MRR | nDCG@{k} | evidence recall@{k} | p50 ms | p95 ms |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for dataset in sorted(results):
        for config in sorted(results[dataset], key=_config_key):
            s = results[dataset][config]
            lines.append(
                "| "
                + " | ".join([
                    _cell(dataset),
                    _cell(config),
                    str(s.get("n", 0)),
                    _num(s.get("recall"), 3),
                    _num(s.get("precision"), 3),
                    _num(s.get("mrr"), 3),
                    _num(s.get("ndcg"), 3),
                    _num(s.get("evidence_recall"), 3),
                    _num(s.get("p50_ms"), 1),
                    _num(s.get("p95_ms"), 1),
                ])
                + " |"
            )
    return "\n".join(lines) + "\n"


def _heading_lines(lines: list[str]) -> list[int]:
    """Indices of level-1/2 headings outside fenced code (a `## ` comment in a shell block is not one)."""
    found, fenced = [], False
    for i, line in enumerate(lines):
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced and _HEADING.match(line):
            found.append(i)
    return found


def replace_readme_section(readme_text: str, body: str, heading: str = "Retrieval quality") -> str:
    """Put `body` under `## {heading}`, replacing what was there up to the next level-1/2 heading;
    append the section at the end when there is none. Idempotent."""
    body = body.strip("\n")
    if _heading_lines(body.split("\n")):
        raise ValueError("the section body must not contain a level-1 or level-2 heading")
    section = [f"## {heading}", "", *body.split("\n"), ""] if body else [f"## {heading}", ""]
    lines = readme_text.split("\n")
    headings = _heading_lines(lines)
    start = next((i for i in headings if lines[i].rstrip() == f"## {heading}"), None)
    if start is None:
        kept = readme_text.rstrip("\n")
        return (kept + "\n\n" if kept else "") + "\n".join(section)
    end = next((i for i in headings if i > start), len(lines))
    tail = lines[end:]
    if not tail:  # the section was the last one: end the file with one newline
        return "\n".join(lines[:start] + section)
    return "\n".join(lines[:start] + section + tail)
