"""A manifest as read: its profile, its kind and its rows. The door reads and checks it
(``deposit.manifest``); the core plans a batch's jobs from it (``planning``), which is why it
lives here, under both.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ManifestRow:
    line: int
    url: str
    hash_algorithm: str | None
    hash_value: str | None
    file_size: int | None
    last_modified: str | None
    file_name: str
    mime_type: str | None
    primary_id: str | None
    local_id: str | None
    creator: str | None
    title: str | None
    date: str | None


@dataclass(frozen=True)
class Manifest:
    profile: str
    kind: str
    fields: tuple[str, ...]
    rows: tuple[ManifestRow, ...]
