"""What every check of the door takes and gives: the upload it judges and its refusal.

Its own module, so that the checks ``submission`` runs (``capacity``, ``manifest_door``)
subclass and take them without importing ``submission`` back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO


class SubmissionError(ValueError):
    """Nothing was written; ``status`` is the HTTP status the API answers with, and
    ``retry_after`` the seconds a refusal for asking too often lasts."""

    def __init__(self, problems: list[str], status: int = 400, retry_after: int | None = None):
        super().__init__("; ".join(problems))
        self.problems = problems
        self.status = status
        self.retry_after = retry_after


@dataclass(frozen=True)
class Upload:
    """An uploaded payload: a name and an open binary file."""

    name: str
    file: IO[bytes]
    size: int
