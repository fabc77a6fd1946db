"""The layers of docs/architecture.md, as folders: the core, what a depositor sends and the
services adapters import neither Django nor any app of the project; the apps import one
another without a cycle."""

from __future__ import annotations

import ast
from itertools import pairwise
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
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
)
# The data layer: any app may import these modules of another app.
DATA = ("models", "filters")
# Imports that join two apps outside the rule, each with why it stays.
ALLOWED = {
    ("jobs/identify.py", "batches.objects"): "a handler asks who may change an object; the "
    "handlers are not pages, and move as a whole or not at all",
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
