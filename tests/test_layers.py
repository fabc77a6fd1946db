"""The layers of docs/architecture.md, as folders: the core, what a depositor sends and the
services adapters import neither Django nor any app of the project."""

from __future__ import annotations

import ast
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
