"""axe-core's accessibility check of the page a browser test has open.

axe-core comes from npm (package.json, package-lock.json), installed into node_modules/ by
``scripts/services.sh ensure-axe``, which ``make test`` runs. It is evaluated in the page
rather than added as a script tag, so a page's Content-Security-Policy cannot refuse it.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

AXE = Path(__file__).resolve().parents[1] / "node_modules" / "axe-core" / "axe.min.js"
# What the issue asks of every page; "moderate" and "minor" findings are reported, not refused.
REFUSED = ("critical", "serious")


@cache
def _source() -> str:
    if not AXE.is_file():
        pytest.fail(f"{AXE} is missing: run scripts/services.sh ensure-axe (make test does)")
    return AXE.read_text()


def violations(page) -> list[dict]:
    """axe's violations on the page as it is now: rule, impact, help and the first targets."""
    if not page.evaluate("typeof window.axe === 'object'"):
        page.evaluate(_source())
    found = page.evaluate("async () => (await axe.run(document)).violations")
    return [
        {
            "rule": v["id"],
            "impact": v["impact"],
            "help": v["help"],
            "targets": [n["target"] for n in v["nodes"][:5]],
            "summary": v["nodes"][0].get("failureSummary", "") if v["nodes"] else "",
        }
        for v in found
    ]


def refused(page) -> list[dict]:
    """The critical and serious violations only."""
    return [v for v in violations(page) if v["impact"] in REFUSED]
