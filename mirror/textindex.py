"""The text index the list searches read: any part of a job's, batch's or object's text in
any case, found by an index instead of reading every row.

SQLite: an FTS5 table with the trigram tokenizer beside each searched table, holding only
the index (``content=`` the table itself). Triggers on the table keep it in step, so every
writer (the mirror's executemany, the ORM, raw SQL, the recorder) does without knowing of it;
``rebuild`` makes one again from its table when they differ (``reconcile --full``).

PostgreSQL: one GIN index of ``pg_trgm`` trigrams over the upper-cased columns, which serves
``UPPER(col::text) LIKE UPPER('%x%')`` (Django's ``icontains``) and which PostgreSQL itself
keeps in step.

Both look a text up by its trigrams, so a text must have ``SHORTEST`` characters: a shorter
one finds nothing here (the filters then match exact identifiers only). The created tables,
triggers and indexes are made by the apps' migrations through ``create``.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connection
from django.db.models import BigIntegerField, F, Func, Q, TextField
from django.db.models.expressions import RawSQL
from django.db.models.functions import Cast
from django.db.models.lookups import IContains, In

SHORTEST = 3
# Matches past which a list finds its page sooner by walking its own order and asking the
# index of each row than by sorting every match (``plenty``).
MANY = 2000


@dataclass(frozen=True)
class Indexed:
    table: str
    columns: tuple[str, ...]

    @property
    def name(self) -> str:
        return f"{self.table}_search"


JOBS = Indexed("jobs_job", ("message", "title", "local_id", "ark", "bid"))
BATCHES = Indexed("batches_batch", ("bid", "uuid", "title", "message"))
OBJECTS = Indexed("inventory_inventoryobject", ("title",))
ALL = (JOBS, BATCHES, OBJECTS)


def searchable(text: str) -> bool:
    return len(text.strip()) >= SHORTEST


def phrase(text: str) -> str:
    """``text`` as one FTS5 phrase: whatever it holds (quotes, ``*``, ``-``, ``:``, NEAR,
    AND) is then text to find, never query syntax."""
    return '"' + text.replace('"', '""') + '"'


def matching(index: Indexed, text: str, columns: tuple[str, ...] = (), *, walk: bool = False) -> Q:
    """The rows of ``index.table`` whose ``columns`` (all by default) hold ``text``, in any
    case; nothing when ``text`` is too short for the index.

    ``walk`` (when ``plenty`` said so): on SQLite, the rows are read in the list's order and
    each asked of the matches, instead of each match read and all of them sorted; a page of
    a text nearly every row holds then costs a page's worth of rows, not the whole table.
    """
    columns = columns or index.columns
    if not searchable(text):
        return Q(pk__in=[])
    if connection.vendor == "sqlite":
        found = RawSQL(*_fts(index, text, columns))
        if walk:  # SQLite reads no index for "+id": the list's order then leads
            return Q(
                In(
                    Func(F("pk"), template="+%(expressions)s", output_field=BigIntegerField()),
                    found,
                )
            )
        return Q(pk__in=found)
    match = Q()
    for column in columns:
        # As text: a foreign key (the job's bid) has no icontains of its own.
        match |= Q(IContains(Cast(F(_field(index, column)), TextField()), text))
    return match


def plenty(index: Indexed, text: str, columns: tuple[str, ...] = ()) -> bool:
    """Whether ``MANY`` rows or more hold ``text`` (SQLite; counted no further than that).
    PostgreSQL's planner weighs that itself from the trigrams' statistics."""
    if connection.vendor != "sqlite" or not searchable(text):
        return False
    sql, params = _fts(index, text, columns or index.columns)
    with connection.cursor() as cursor:
        cursor.execute(f"{sql} LIMIT 1 OFFSET {MANY - 1}", params)
        return cursor.fetchone() is not None


def _fts(index: Indexed, text: str, columns: tuple[str, ...]) -> tuple[str, list[str]]:
    query = phrase(text)
    if columns != index.columns:
        query = "{" + " ".join(columns) + "} : " + query
    return f"SELECT rowid FROM {index.name} WHERE {index.name} MATCH %s", [query]  # noqa: S608


def _field(index: Indexed, column: str) -> str:
    return "batch_id" if index is JOBS and column == "bid" else column


def rebuild() -> None:
    """Make again each SQLite index that has not one entry per row of its table: one a
    copy of the database was made or restored without, or that something emptied.

    Counting both is a read of two indexes; making it again reads every row, with the
    write lock held, and ``reconcile --watch`` runs a full rebuild every
    MQ_RECONCILE_SECONDS. PostgreSQL's own indexes cannot drift.
    """
    if connection.vendor != "sqlite":
        return
    with connection.cursor() as cursor:
        for index in ALL:
            cursor.execute(f"SELECT count(*) FROM {index.name}_docsize")
            (entries,) = cursor.fetchone()
            cursor.execute(f"SELECT count(*) FROM {index.table}")
            if cursor.fetchone()[0] != entries:
                cursor.execute(f"INSERT INTO {index.name}({index.name}) VALUES ('rebuild')")


def create(schema_editor, index: Indexed) -> None:
    """The index of ``index.table`` and what keeps it in step, filled from the table."""
    for statement in _create_sql(schema_editor.connection.vendor, index):
        schema_editor.execute(statement)


def drop(schema_editor, index: Indexed) -> None:
    if schema_editor.connection.vendor == "sqlite":
        for event in ("insert", "delete", "update"):
            schema_editor.execute(f"DROP TRIGGER IF EXISTS {index.name}_{event}")
        schema_editor.execute(f"DROP TABLE IF EXISTS {index.name}")
    elif schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP INDEX IF EXISTS {index.name}")


def _create_sql(vendor: str, index: Indexed) -> list[str]:
    table, name, columns = index.table, index.name, ", ".join(index.columns)
    if vendor == "postgresql":
        trigrams = ", ".join(f"(UPPER({c}::text)) gin_trgm_ops" for c in index.columns)
        return [
            "CREATE EXTENSION IF NOT EXISTS pg_trgm",
            f"CREATE INDEX IF NOT EXISTS {name} ON {table} USING gin ({trigrams})",
        ]
    if vendor != "sqlite":
        return []
    new = ", ".join(f"new.{c}" for c in index.columns)
    old = ", ".join(f"old.{c}" for c in index.columns)
    add = f"INSERT INTO {name}(rowid, {columns}) VALUES (new.id, {new});"
    remove = f"INSERT INTO {name}({name}, rowid, {columns}) VALUES ('delete', old.id, {old});"
    # Most writes change a status, not the text: those leave the index alone.
    changed = " OR ".join(f"old.{c} IS NOT new.{c}" for c in ("id", *index.columns))
    return [
        f"CREATE VIRTUAL TABLE {name} USING fts5({columns}, content='{table}', "
        "content_rowid='id', tokenize='trigram')",
        f"CREATE TRIGGER {name}_insert AFTER INSERT ON {table} BEGIN {add} END",
        f"CREATE TRIGGER {name}_delete AFTER DELETE ON {table} BEGIN {remove} END",
        f"CREATE TRIGGER {name}_update AFTER UPDATE ON {table} WHEN {changed} "
        f"BEGIN {remove} {add} END",
        f"INSERT INTO {name}({name}) VALUES ('rebuild')",
    ]
