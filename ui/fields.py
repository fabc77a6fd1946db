"""A JSON document (a job's metadata, a batch's submission) as rows of a definition list."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


def as_text(value: Any) -> str:
    """A JSON value as text for a template (which escapes it); long structures indented."""
    if isinstance(value, str):
        return value
    compact = json.dumps(value, ensure_ascii=False, sort_keys=True)
    if len(compact) <= 80:
        return compact
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


@dataclass(frozen=True)
class Field:
    name: str
    text: str
    block: bool  # an object or list, shown preformatted
    empty: bool  # null or ""


def fields_of(data: Any) -> list[Field]:
    """The entries of a JSON object for a definition list (any other JSON as one entry)."""
    if data is None:
        return []
    if not isinstance(data, dict):
        return [Field("(value)", as_text(data), True, False)]
    return [
        Field(str(k), as_text(v), isinstance(v, dict | list), v is None or v == "")
        for k, v in data.items()
    ]
