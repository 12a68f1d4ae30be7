"""The house's shape, checked: imports point one way between packages, and no module imports itself
back through others (imports inside functions included: a deferred import is still a dependency)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("core", "vector", "graph", "router", "api")
# who may import whom: api -> router -> (graph | vector) -> core; graph and vector never meet
ALLOWED = {
    "core": {"core"},
    "vector": {"vector", "core"},
    "graph": {"graph", "core"},
    "router": {"router", "graph", "vector", "core"},
    "api": {"api", "router", "graph", "vector", "core"},
}

pytestmark = pytest.mark.unit


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules `name` imports, anywhere in its body."""
    is_package = path.name == "__init__.py"
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for target in targets:
            while target and target not in modules:  # `from pkg import name`: name may be an attribute
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def test_imports_point_one_way_between_packages():
    wrong = sorted(f"{a} -> {b}" for a, targets in _graph().items() for b in targets
                   if b.split(".")[0] not in ALLOWED[a.split(".")[0]])
    assert not wrong, "imports against the layering (api -> router -> graph | vector -> core):\n" + "\n".join(wrong)


def test_no_module_imports_itself_back():
    graph = _graph()
    index, low, stack, on_stack, cycles, counter = {}, {}, [], set(), [], [0]

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            # a package's __init__ is loaded by its submodules anyway: importing it is not a cycle
            if node.startswith(nxt + "."):
                continue
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    assert not cycles, "modules importing each other: " + "; ".join(" <-> ".join(c) for c in cycles)
