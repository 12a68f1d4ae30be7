"""The house's shape, checked: imports point one way between packages, and no module imports itself
back through others (imports inside functions included: a deferred import is still a dependency)."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("core", "vector", "graph", "answers", "router", "evaluation", "api")
# who may import whom: api -> (evaluation) -> router -> answers -> (graph | vector) -> core; graph and
# vector never meet. evaluation sits above the serving path: only the CLI and bench/ use it.
ALLOWED = {
    "core": {"core"},
    "vector": {"vector", "core"},
    "graph": {"graph", "core"},
    "answers": {"answers", "graph", "vector", "core"},
    "router": {"router", "answers", "graph", "vector", "core"},
    "evaluation": {"evaluation", "router", "answers", "graph", "vector", "core"},
    "api": {"api", "evaluation", "router", "answers", "graph", "vector", "core"},
}
# What answering a question never needs: ingest, the graph build, model switches and evaluation.
OFF_THE_SERVING_PATH = ("vector.ingest", "vector.model_switch", "graph.indexing", "evaluation")
SERVING = ("router", "answers", "graph.query", "vector.search")

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


def _under(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def test_answering_a_question_imports_no_ingest_build_or_evaluation():
    """Statically, deferred imports included: the router, the answer writers and the query sides of the
    graph and the hybrid index never reach ingest, the graph build or evaluation."""
    graph = _graph()
    reach, todo = set(), [m for m in graph if _under(m, SERVING)]
    while todo:
        module = todo.pop()
        for nxt in graph.get(module, ()):
            if nxt not in reach:
                reach.add(nxt)
                todo.append(nxt)
    wrong = sorted(m for m in reach if _under(m, OFF_THE_SERVING_PATH))
    assert not wrong, "the serving path reaches: " + ", ".join(wrong)


def test_the_http_app_never_imports_evaluation():
    wrong = sorted(f"{a} -> {b}" for a, targets in _graph().items() if _under(a, ("api.http",))
                   for b in targets if _under(b, ("evaluation", "api.cli")))
    assert not wrong, "\n".join(wrong)


def test_starting_the_http_app_loads_no_ingest_build_or_evaluation_module():
    """At run time: the HTTP app built and a question's route modules loaded, in a fresh interpreter;
    the upload and build endpoints import ingest and the build only when called."""
    code = ("import sys; from api.http.app import create_app; create_app(); import router.service; "
            f"print('\\n'.join(m for m in sys.modules if m.split('.')[0] in {PACKAGES!r}))")
    loaded = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                            timeout=120).stdout.split()
    assert "router.service" in loaded and "api.http.app" in loaded
    wrong = sorted(m for m in loaded if _under(m, OFF_THE_SERVING_PATH))
    assert not wrong, "importing the HTTP app loaded: " + ", ".join(wrong)


# data files under the packages that an installed copy does not need: training data the bench reads
NOT_SHIPPED = ("router/training/*",)


def test_every_data_file_the_packages_hold_is_in_the_wheel():
    """A data file missing from pyproject's package-data is missing from a pip-installed copy, which
    then fails where the checkout works (the offline reranker's weights once did)."""
    import fnmatch
    import tomllib

    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the tracked files are unknown")
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["package-data"]
    shipped = [f"{package.replace('.', '/')}/{pattern}" for package, patterns in globs.items() for pattern in patterns]
    tracked = subprocess.run(["git", "ls-files", *PACKAGES], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    data = [f for f in tracked if not f.endswith(".py")]
    missing = [f for f in data if not any(fnmatch.fnmatch(f, g) for g in shipped + list(NOT_SHIPPED))]
    assert not missing, f"add these to [tool.setuptools.package-data] in pyproject.toml: {missing}"
