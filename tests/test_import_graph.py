"""The package's import graph: no cycles (function-local imports included) and the layering of ARCHITECTURE.md.

Every module is parsed with :mod:`ast`, so imports inside functions, methods and ``TYPE_CHECKING``
blocks count as much as those at the top of a file. ``from a import b`` is an edge to the module
``a.b`` when that is a module, else to ``a``; relative imports are resolved against the importing
module's package. Importing ``a.b.c`` also runs the ``__init__`` of ``a`` and ``a.b``, so a module
outside those packages gets an edge to each of them too (a module inside ``a.b`` does not: its
parents are already being imported when it runs).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import medrewardbench

PACKAGE = "medrewardbench"
PACKAGE_DIR = Path(medrewardbench.__file__).parent


@dataclass(frozen=True)
class Edge:
    """One import: ``source`` imports ``target`` at ``line`` (``implicit`` for a parent package's ``__init__``)."""

    source: str
    target: str
    line: int
    implicit: bool = False


def module_files(package_dir: Path, package: str) -> dict[str, tuple[Path, bool]]:
    """Every module of a package: dotted name -> (file, is a package ``__init__``)."""
    modules: dict[str, tuple[Path, bool]] = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = [package, *path.relative_to(package_dir).with_suffix("").parts]
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        modules[".".join(parts)] = (path, is_package)
    return modules


def _ancestors(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def _existing(name: str, modules: Mapping[str, object]) -> str | None:
    """The module itself, or the nearest enclosing package that exists (``a.b.NAME`` -> ``a.b``)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_edges(package_dir: Path, package: str) -> tuple[dict[str, list[Edge]], dict[str, set[str]]]:
    """Edges between the package's modules, and the external top-level modules each one imports."""
    modules = module_files(package_dir, package)
    edges: dict[str, list[Edge]] = {name: [] for name in modules}
    external: dict[str, set[str]] = {name: set() for name in modules}
    for name, (path, is_package) in modules.items():
        own_package = name if is_package else name.rpartition(".")[0]
        found: list[tuple[str, int]] = []
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name == package or alias.name.startswith(package + "."):
                        found.append((alias.name, node.lineno))
                    else:
                        external[name].add(alias.name.split(".")[0])
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = own_package.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    module = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    module = node.module or ""
                if not (module == package or module.startswith(package + ".")):
                    external[name].add(module.split(".")[0])
                    continue
                for alias in node.names:
                    candidate = f"{module}.{alias.name}"
                    found.append((candidate if candidate in modules else module, node.lineno))
        for target_name, line in found:
            target = _existing(target_name, modules)
            if target is None or target == name:
                continue
            edges[name].append(Edge(name, target, line))
            mine = {*_ancestors(name), name}
            for parent in _ancestors(target):
                if parent != package and parent not in mine and parent in modules:
                    edges[name].append(Edge(name, parent, line, implicit=True))
    return edges, external


def find_cycles(edges: Mapping[str, Iterable[Edge]]) -> list[list[Edge]]:
    """One import cycle per strongly connected component of more than one module (Tarjan)."""
    targets = {name: sorted({e.target for e in out}) for name, out in edges.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = 0

    def visit(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for target in targets.get(node, []):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for node in sorted(targets):
            if node not in index:
                visit(node)
    finally:
        sys.setrecursionlimit(limit)
    return [_one_cycle(component, edges) for component in components]


def _one_cycle(component: list[str], edges: Mapping[str, Iterable[Edge]]) -> list[Edge]:
    """A shortest cycle through the first module of a strongly connected component."""
    members = set(component)
    start = component[0]
    paths: dict[str, list[Edge]] = {start: []}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for edge in sorted(edges[node], key=lambda e: (e.target, e.line)):
                if edge.target == start:
                    return [*paths[node], edge]
                if edge.target in members and edge.target not in paths:
                    paths[edge.target] = [*paths[node], edge]
                    following.append(edge.target)
        frontier = following
    raise AssertionError(f"no cycle found in component {component}")


def describe(cycle: list[Edge]) -> str:
    hops = " -> ".join(f"{e.source} (line {e.line}{', its package' if e.implicit else ''})" for e in cycle)
    return f"{hops} -> {cycle[0].source}"


EDGES, EXTERNAL = import_edges(PACKAGE_DIR, PACKAGE)


def _within(name: str, prefix: str) -> bool:
    full = f"{PACKAGE}.{prefix}"
    return name == full or name.startswith(full + ".")


def _violations(sources: Iterable[str], forbidden: Iterable[str]) -> list[str]:
    sources = tuple(sources)
    forbidden = tuple(forbidden)
    out = []
    for name, out_edges in sorted(EDGES.items()):
        if not any(_within(name, s) for s in sources):
            continue
        for edge in out_edges:
            if not edge.implicit and any(_within(edge.target, f) for f in forbidden):
                out.append(f"{name} (line {edge.line}) imports {edge.target}")
    return out


# --------------------------------------------------------------------------------------------- tests


def test_the_walker_sees_the_whole_package_and_its_function_local_imports() -> None:
    assert len(EDGES) > 80
    assert {f"{PACKAGE}.cli.main", f"{PACKAGE}.images.refs", f"{PACKAGE}.judges.api.client"} <= set(EDGES)
    assert {f"{PACKAGE}.models.api.chat", f"{PACKAGE}.models.local", f"{PACKAGE}.models.options"} <= set(EDGES)
    # data/sources.py imports the loaders inside collect_source: those edges are seen
    sources = {e.target for e in EDGES[f"{PACKAGE}.data.sources"]}
    assert {f"{PACKAGE}.data.hub", f"{PACKAGE}.data.reference", f"{PACKAGE}.data.demo"} <= sources


def test_the_cycle_finder_catches_function_local_relative_and_package_cycles(tmp_path: Path) -> None:
    package = tmp_path / "toy"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("def f():\n    from . import b\n")  # relative, inside a function
    (package / "b.py").write_text("from toy.sub import c\n")  # from-import of a submodule
    (package / "sub" / "__init__.py").write_text("from toy.sub.c import x\n")
    (package / "sub" / "c.py").write_text("import toy.a\nx = 1\n")
    (package / "d.py").write_text("import toy.sub.c\n")  # implicit edge to toy.sub's __init__ only
    edges, _ = import_edges(package, "toy")
    cycles = find_cycles(edges)
    assert [sorted(e.source for e in cycle) for cycle in cycles] == [["toy.a", "toy.b", "toy.sub.c"]]
    assert describe(cycles[0]) == "toy.a (line 2) -> toy.b (line 1) -> toy.sub.c (line 1) -> toy.a"
    assert any(e.target == "toy.sub" and e.implicit for e in edges["toy.d"])
    assert not any(e.target == "toy.sub" for e in edges["toy.sub.c"])  # its own package: no edge
    # a package __init__ importing back one of its importers is a cycle through the implicit edge
    (package / "sub" / "__init__.py").write_text("import toy.d\n")
    (package / "sub" / "c.py").write_text("x = 1\n")
    cycles = find_cycles(import_edges(package, "toy")[0])
    assert [sorted(e.source for e in cycle) for cycle in cycles] == [["toy.d", "toy.sub"]]


def test_the_package_has_no_import_cycle() -> None:
    cycles = find_cycles(EDGES)
    assert not cycles, "import cycles:\n" + "\n".join(describe(c) for c in cycles)


# which packages may not import which (ARCHITECTURE.md: the direction of imports follows the data)
_ABOVE_DATA = (
    "models",
    "judges",
    "prompts",
    "parsing",
    "evaluation",
    "metrics",
    "report",
    "train",
    "curation",
    "annotate",
    "sweep",
    "serve",
    "probes",
    "cli",
    "testing",
)
LAYERS: dict[str, tuple[str, ...]] = {
    # images sit below Case: only errors beneath them
    "images": ("cases", "data", *_ABOVE_DATA),
    "dimensions": ("cases", "images", "data", *_ABOVE_DATA),
    "errors": ("dimensions", "cases", "images", "data", *_ABOVE_DATA),
    "cases": ("data", *_ABOVE_DATA),
    # data knows nothing of judges: loaders only
    "data": _ABOVE_DATA,
    # models/ is every way to reach a model, shared by judges, generators, serve and train; it
    # knows none of them (issue 20: a judge is a prompt, a model and a parser; a generator a
    # prompt and a model)
    "models": (
        "data",
        "judges",
        "evaluation",
        "metrics",
        "report",
        "train",
        "serve",
        "curation",
        "sweep",
        "annotate",
        "cli",
    ),
    # judges know nothing of metrics, reports or the commands that run them
    "judges": ("evaluation", "metrics", "report", "train", "serve", "cli", "annotate", "curation"),
    "metrics": (
        "judges",
        "models",
        "evaluation.runner",
        "evaluation.job",
        "report",
        "train",
        "serve",
        "cli",
        "annotate",
        "curation",
    ),
    "report": (
        "judges",
        "models",
        "evaluation.runner",
        "evaluation.job",
        "train",
        "serve",
        "cli",
        "annotate",
        "curation",
    ),
    "serve": ("judges.api", "evaluation", "metrics", "report", "train", "cli"),
    # curation's (``build``'s) generators reach models through models/, never through the judges (its grader is a
    # generator with a grading prompt and parser, not a judge)
    "curation": ("judges",),
    # probes derive data sets and run them through the eval job; only the command line knows them
    "probes": ("train", "serve", "cli", "annotate", "curation", "sweep"),
    # the plumbing (SQLite files, batches, output folders, the key scrubber, the in-process server)
    # knows nothing of what it carries: errors only
    "utils": ("dimensions", "cases", "images", "data", *_ABOVE_DATA),
}


def test_the_layers_of_the_architecture_hold() -> None:
    problems = [line for layer, forbidden in LAYERS.items() for line in _violations([layer], forbidden)]
    assert not problems, "imports against the layering of ARCHITECTURE.md:\n" + "\n".join(problems)


def test_only_the_command_line_imports_curation_annotate_sweep_and_itself() -> None:
    for package, allowed in (("cli", ("cli",)), *((p, (p, "cli")) for p in ("curation", "annotate", "sweep"))):
        everyone_else = sorted({n.removeprefix(PACKAGE + ".").split(".")[0] for n in EDGES} - set(allowed))
        problems = _violations(everyone_else, [package])
        assert not problems, f"only {', '.join(allowed)} may import {package}:\n" + "\n".join(problems)


def test_nothing_in_the_package_imports_its_test_doubles() -> None:
    problems = _violations(
        sorted({n.removeprefix(PACKAGE + ".").split(".")[0] for n in EDGES} - {"testing"}), ["testing"]
    )
    assert not problems, "\n".join(problems)


def test_the_statistics_import_only_numpy_and_the_standard_library() -> None:
    # (was tests/test_stats.py's import whitelist; every import in the package is walked here)
    stats = [name for name in EXTERNAL if _within(name, "metrics.stats")]
    assert len(stats) >= 5
    used = set().union(*(EXTERNAL[name] for name in stats))
    assert used <= {"__future__", "math", "statistics", "warnings", "collections", "dataclasses", "typing", "numpy"}, (
        used
    )
