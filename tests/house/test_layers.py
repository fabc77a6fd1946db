"""The layers of docs/architecture.md, as folders: the core, what a depositor sends and the
services adapters import neither Django nor any app of the project, and import each other one
way (services -> deposit -> core); the apps import one another without a cycle; and no module
of the project imports itself back through others."""

from __future__ import annotations

import ast
from itertools import pairwise
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FRAMEWORK_FREE = ("merritt_queue/core", "merritt_queue/deposit", "merritt_queue/services")
FORBIDDEN = (
    "django",
    "django_rq",
    "django_tables2",
    "django_filters",
    "batches",
    "jobs",
    "steering",
    "dashboard",
    "inventory",
    "mirror",
    "notifications",
    "metrics",
    "merritt_queue.project",
)


def imported(path: Path) -> set[str]:
    """Every module ``path`` imports, relative imports made absolute."""
    package = list(path.relative_to(REPO).parent.parts)
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            names.add(".".join(base + ([node.module] if node.module else [])))
    return names


def test_the_framework_free_layers_import_no_django_and_no_app():
    offences = []
    for folder in FRAMEWORK_FREE:
        for path in sorted((REPO / folder).rglob("*.py")):
            for name in imported(path):
                if any(name == f or name.startswith(f + ".") for f in FORBIDDEN):
                    offences.append(f"{path.relative_to(REPO)} imports {name}")
    assert offences == []


def test_every_framework_free_module_is_found():
    # The scan above would pass vacuously if the folders moved.
    assert len([p for f in FRAMEWORK_FREE for p in (REPO / f).rglob("*.py")]) > 40


# --- the apps: docs/architecture.md, "Layers and who may import whom" -----------------------

APPS = (
    "batches",
    "jobs",
    "steering",
    "dashboard",
    "inventory",
    "mirror",
    "notifications",
    "metrics",
    "ui",
    # Not apps but rooms the apps import (docs/architecture.md): the steps of the work, and
    # the door, what comes in.
    "pipeline",
    "door",
)
# The data layer: any app may import these modules of another app.
DATA = ("models", "filters")
# Imports that join two apps outside the rule, each with why it stays.
ALLOWED = {
    ("door/middleware.py", "batches.forms"): "a browser's submission refused before its view "
    "runs is answered with the submit page, which shows the page's form; imported in the "
    "function, once the apps are loaded",
    ("door/manifest_check_api.py", "batches.preflight"): "the check's API answers with the "
    "pre-flight summary the page shows, the batch app's (issue 36); imported in the function",
    ("door/arrival.py", "batches.preflight"): "a batch arriving for approval carries its "
    "pre-flight summary, which the batches app makes; imported in the function, once the apps "
    "are loaded; a summary that fails keeps the batch, saying why",
}


def app_modules(app: str) -> list[Path]:
    return [p for p in sorted((REPO / app).rglob("*.py")) if "migrations" not in p.parts]


def app_imports(path: Path) -> set[str]:
    """What ``path`` imports of the apps, ``from jobs import history_export`` as a module."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module in APPS and not node.level:
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return (names | imported(path)) - set(APPS)


def crossings() -> dict[tuple[str, str], list[str]]:
    """Each app's imports of another app's modules beyond the data layer, by the two apps."""
    edges: dict[tuple[str, str], list[str]] = {}
    for app in APPS:
        for path in app_modules(app):
            where = str(path.relative_to(REPO))
            for name in app_imports(path):
                parts = name.split(".")
                if parts[0] not in APPS or parts[0] == app or (where, name) in ALLOWED:
                    continue
                if len(parts) > 1 and parts[1] in DATA:
                    continue
                edges.setdefault((app, parts[0]), []).append(f"{where} imports {name}")
    return edges


def test_the_apps_import_each_other_without_a_cycle():
    edges = crossings()
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)

    def cycle_from(start: str, path: list[str]) -> list[str] | None:
        for nxt in sorted(graph.get(path[-1], ())):
            if nxt == start:
                return [*path, nxt]
            if nxt not in path and (found := cycle_from(start, [*path, nxt])):
                return found
        return None

    for app in APPS:
        cycle = cycle_from(app, [app])
        if cycle:
            why = [line for a, b in pairwise(cycle) for line in edges[(a, b)]]
            raise AssertionError(f"{' -> '.join(cycle)}: {why}")


def test_ui_imports_only_the_apps_models():
    # Pages of every app import ui: anything more of an app there would join them in a cycle.
    offences = [
        f"{path.relative_to(REPO)} imports {name}"
        for path in app_modules("ui")
        for name in app_imports(path)
        if name.split(".")[0] in set(APPS) - {"ui"} and name.split(".")[1:2] != ["models"]
    ]
    assert offences == []


def test_the_allowed_crossings_still_exist():
    # An allowance nobody needs any more would hide the next crossing of the same kind.
    for where, name in ALLOWED:
        assert name in app_imports(REPO / where), (where, name)


# --- no import cycle between the project's modules, nor between its framework-free packages -

# Every folder of the project's own Python: the product, the benchmarks and their harness.
PROJECT = ("merritt_queue", *APPS, "bench", "harness")
# Which framework-free package may import which: what a depositor sends is read on the
# core's terms (its errors, ZooKeeper's node names, the manifest record the core plans
# from), and the services carry a deposit (its digests, ARKs, file names) out.
PACKAGE_ARROWS = {
    ("merritt_queue.deposit", "merritt_queue.core"),
    ("merritt_queue.services", "merritt_queue.core"),
    ("merritt_queue.services", "merritt_queue.deposit"),
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    return {module_name(p): p for folder in PROJECT for p in sorted((REPO / folder).rglob("*.py"))}


def module_imports(path: Path, modules: dict[str, Path]) -> dict[str, int]:
    """The project's modules ``path`` imports, anywhere in it (in a function, under
    TYPE_CHECKING), each with its first line: ``from a import b`` names module ``a.b`` when
    there is one, else ``a``."""
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    out: dict[str, int] = {}
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            names = [f"{module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            while parts and ".".join(parts) not in modules:
                parts.pop()
            if parts:
                out.setdefault(".".join(parts), node.lineno)
    return out


def import_graph() -> dict[str, dict[str, int]]:
    modules = project_modules()
    graph = {name: module_imports(path, modules) for name, path in modules.items()}
    for name, targets in graph.items():
        targets.pop(name, None)
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph.get(target, ())))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        found.append(sorted(group))
    return found


def describe(group: list[str], graph: dict[str, dict[str, int]]) -> str:
    arrows = [
        f"  {a} -> {b} (line {graph[a][b]})" for a in group for b in sorted(graph[a]) if b in group
    ]
    return "\n".join([" <-> ".join(group), *arrows])


def test_no_import_cycle_between_the_projects_modules():
    graph = import_graph()
    found = cycles(graph)
    assert not found, "import cycles:\n" + "\n".join(describe(g, graph) for g in found)


def test_the_cycle_finder_finds_a_cycle_through_any_import():
    graph = {"a": {"b": 1}, "b": {"c": 2}, "c": {"a": 3}, "d": {"a": 4}, "e": {}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b": 1}, "b": {}}) == []


def test_the_import_graph_reads_every_kind_of_import():
    graph = import_graph()
    treecheck = "merritt_queue.core.treecheck"
    # ``from . import lockchecks`` names the module; a function-level import counts.
    assert "merritt_queue.core.treecheck.lockchecks" in graph[f"{treecheck}.consistency"]
    assert "mirror.facade" in graph["merritt_queue.project.runtime"]
    # Under TYPE_CHECKING too: a reader and mypy follow those arrows.
    assert "steering.actions.kinds" in graph["steering.permissions"]
    assert len(graph) > 300


def test_the_framework_free_packages_import_each_other_one_way():
    graph = import_graph()
    packages = {"merritt_queue.core", "merritt_queue.deposit", "merritt_queue.services"}

    def package(name: str) -> str:
        return ".".join(name.split(".")[:2])

    offences = sorted(
        f"{a} imports {b}"
        for a, targets in graph.items()
        for b in targets
        if package(a) in packages
        and package(b) in packages
        and package(a) != package(b)
        and (package(a), package(b)) not in PACKAGE_ARROWS
    )
    assert offences == []
