"""The documentation's relative links, and the documents the code cites, exist.

A moved or renamed page leaves links and code comments pointing nowhere, and nothing else
notices: readers land on a 404 and maintainers lose the design text a docstring relies on.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

# Files a link may name before they are committed: the dashboard screenshot is added by a
# separate change. Each is checked like any other link as soon as it exists.
PENDING = {ROOT / "docs" / "img" / "dashboard.png"}

# [text](target) and ![alt](target); the target ends at whitespace or ")".
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
# A document named in code: "docs/x.md", or a bare "zk-tree.md" as the docstrings write it.
CITED = re.compile(r"(?<![\w/.-])((?:docs/)?[\w-]+\.md)\b")
CODE_SUFFIXES = {".py", ".sh", ".html", ".toml", ".service", ".timer", ".cfg", ".txt"}
SKIP_DIRS = {".git", ".venv", "var", "node_modules", "__pycache__", "docs"}


def relative_links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return [
        target
        for target in LINK.findall(text)
        if not re.match(r"^[a-z][a-z0-9+.-]*:", target) and not target.startswith("#")
    ]


def code_files() -> list[Path]:
    files = [ROOT / "Makefile"]
    for path in ROOT.rglob("*"):
        if SKIP_DIRS.intersection(path.relative_to(ROOT).parts[:-1]):
            continue
        if path.suffix in CODE_SUFFIXES and path.is_file() and path != Path(__file__).resolve():
            files.append(path)
    return files


def test_every_relative_link_resolves():
    broken = []
    for page in PAGES:
        for target in relative_links(page):
            path = (page.parent / target.split("#", 1)[0]).resolve()
            if not path.exists() and path not in PENDING:
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, "links to nothing:\n" + "\n".join(broken)


def test_every_document_cited_in_code_exists():
    missing = []
    for path in code_files():
        for name in set(CITED.findall(path.read_text(errors="replace"))):
            candidates = [ROOT / name]
            if not name.startswith("docs/"):
                candidates.append(ROOT / "docs" / name)
            if not any(c.exists() for c in candidates):
                missing.append(f"{path.relative_to(ROOT)}: {name}")
    assert not missing, "documents cited but absent:\n" + "\n".join(missing)


def test_the_checks_see_the_pages():
    assert any(p.name == "zk-tree.md" for p in PAGES)
    assert relative_links(ROOT / "README.md")
