"""What a manifest check found: errors refuse the manifest, warnings only inform.

A finding keeps its line, checkm field and value apart from its sentence, so a report can
show them in columns while the refusal of a submission stays one sentence per problem.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_PROBLEMS = 200


@dataclass(frozen=True)
class Finding:
    message: str
    line: int | None = None
    field: str | None = None
    value: str | None = None

    @property
    def text(self) -> str:
        return self.message if self.line is None else f"line {self.line}: {self.message}"


def in_order(findings: list[Finding]) -> list[Finding]:
    """Numbered lines first, in order; whole-document findings after them."""
    return sorted(findings, key=lambda f: float("inf") if f.line is None else f.line)


def capped(findings: list[Finding]) -> list[Finding]:
    """``in_order``, at most MAX_PROBLEMS of them, then one saying how many more."""
    ordered = in_order(findings)
    if len(ordered) <= MAX_PROBLEMS:
        return ordered
    return [*ordered[:MAX_PROBLEMS], Finding(f"... and {len(ordered) - MAX_PROBLEMS} more")]


class Findings:
    def __init__(self) -> None:
        self.errors: list[Finding] = []
        self.warnings: list[Finding] = []

    def __len__(self) -> int:
        return len(self.errors)

    def add(self, text: str, line: int | None = None, field: str | None = None, value=None):
        self.errors.append(Finding(text, line, field, value))

    def warn(self, text: str, line: int | None = None, field: str | None = None, value=None):
        self.warnings.append(Finding(text, line, field, value))

    def error_texts(self) -> list[str]:
        return [f.text for f in capped(self.errors)]
