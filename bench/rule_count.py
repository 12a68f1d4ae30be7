"""How much hand-written rule code the question readers and answer writers hold, at any commit (issue 39:
"net lines of rule code must go down").

Counted over the Python files and word files of `router/`, `answers/`, `core/text/` and `graph/query/`
as they stand at the commit (git show, nothing checked out):
- regexes: each `re.compile(...)` call;
- word lists: each literal collection of three or more strings (a set, frozenset, tuple or list of
  string constants, or a string literal split into words), and each list of a TOML word file;
- entries: the words in those lists;
- rule lines: the lines those regexes and lists span in Python (a word file's words are entries).
Models (JSON weights), prompts and training data are not rules and are not read.

    python -m bench.rule_count                 # the working tree's HEAD
    python -m bench.rule_count --at f9e4c88^   # before the answers package was made
"""
from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
import tomllib
from dataclasses import asdict, dataclass

# the question readers and answer writers, wherever they lived: the global themes were graph/query/ before
# they moved into answers/themes/
FOLDERS = ("router/", "answers/", "core/text/", "graph/query/")
NOT_READERS = ("core/text/markdown.py",)  # ingest's Markdown parser, moved in from vector/ingest/


@dataclass
class RuleCount:
    regexes: int = 0
    word_lists: int = 0
    entries: int = 0
    rule_lines: int = 0


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout


def _string_items(node: ast.AST) -> list[str] | None:
    """The strings of a literal word collection, or None when `node` is not one."""
    if isinstance(node, (ast.Set, ast.Tuple, ast.List)):
        items = node.elts
        if len(items) >= 3 and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in items):
            return [e.value for e in items]
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "split"
            and isinstance(node.func.value, ast.Constant) and isinstance(node.func.value.value, str)):
        words = node.func.value.value.split()
        return words if len(words) >= 3 else None
    return None


def _span(node: ast.expr) -> int:
    return (node.end_lineno or node.lineno) - node.lineno + 1


def count_python(source: str) -> RuleCount:
    count = RuleCount()
    tree = ast.parse(source)
    inside: set[int] = set()  # ids of nodes already counted as part of an outer list
    for node in ast.walk(tree):
        if id(node) in inside:
            continue
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "compile"
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "re"):
            count.regexes += 1
            count.rule_lines += _span(node)
        elif (items := _string_items(node)) is not None:
            count.word_lists += 1
            count.entries += len(items)
            count.rule_lines += _span(node)
            inside.update(id(n) for n in ast.walk(node))
    return count


def count_toml(text: str) -> RuleCount:
    count = RuleCount()

    def walk(value) -> None:
        if isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            count.word_lists += 1
            count.entries += len(value)

    walk(tomllib.loads(text))
    return count


def count_at(commit: str) -> dict[str, RuleCount]:
    files = [f for f in _git("ls-tree", "-r", "--name-only", commit).splitlines()
             if f.startswith(FOLDERS) and f.endswith((".py", ".toml")) and f not in NOT_READERS]
    out: dict[str, RuleCount] = {}
    for name in files:
        text = _git("show", f"{commit}:{name}")
        out[name] = count_python(text) if name.endswith(".py") else count_toml(text)
    return out


def total(counts: dict[str, RuleCount]) -> RuleCount:
    t = RuleCount()
    for c in counts.values():
        for field in asdict(t):
            setattr(t, field, getattr(t, field) + getattr(c, field))
    return t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--at", default="HEAD", help="the commit to count (default HEAD)")
    ap.add_argument("--files", action="store_true", help="each file's count too")
    args = ap.parse_args(argv)
    try:
        counts = count_at(args.at)
    except subprocess.CalledProcessError as exc:
        print(f"git cannot read {args.at!r} here ({exc.stderr.strip() or exc}); give a commit of this "
              "repository and run from its root", file=sys.stderr)
        return 2
    except SyntaxError as exc:
        print(f"a Python file at {args.at} does not parse: {exc}", file=sys.stderr)
        return 2
    report = {"commit": _git("rev-parse", "--short", args.at).strip(), "total": asdict(total(counts))}
    for folder in FOLDERS:
        report[folder] = asdict(total({k: v for k, v in counts.items() if k.startswith(folder)}))
    if args.files:
        report["files"] = {k: asdict(v) for k, v in sorted(counts.items()) if any(asdict(v).values())}
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
