"""The few SQL statements the mirror writes by hand, for speed: executemany INSERTs and
UPDATEs of many rows, and the timeline rows' insert-or-replace-inexact."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.db import connection, models
from django.db.models.constants import OnConflict

# Rows per bulk UPDATE and per DELETE ... IN (...); rows per executemany of an INSERT.
DB_BATCH = 500
DB_CHUNK = 5000


def adapter(field: models.Field) -> Callable[[Any], Any] | None:
    """How a value of ``field`` becomes a database parameter; None when it already is one.

    The backend's adapters directly: the values are already the right type, and
    ``get_db_prep_save`` re-validates each one at several times the cost.
    """
    if isinstance(field, models.JSONField):
        return lambda value: connection.ops.adapt_json_value(value, field.encoder)
    if isinstance(field, models.DateTimeField):
        return connection.ops.adapt_datetimefield_value
    return None


def _params(fields, rows: list[dict]) -> list[tuple]:
    """Each row's values in ``fields``' order, as database parameters (defaults for the
    fields a row leaves out)."""
    adapters = [(f.attname, f, adapter(f)) for f in fields]
    return [
        tuple(
            (prep(v) if prep and v is not None else v)
            for name, f, prep in adapters
            for v in [row[name] if name in row else f.get_default()]
        )
        for row in rows
    ]


def insert(model: type[models.Model], rows: list[dict], *, ignore_conflicts: bool = False):
    """INSERT ``rows`` (field name -> value; defaults fill the rest) with executemany.

    What ``bulk_create`` does, several times faster for many rows: SQLite's
    999-parameter limit makes Django compile one INSERT per 40 job rows.
    """
    if not rows:
        return
    fields = [f for f in model._meta.concrete_fields if not f.primary_key]
    params = _params(fields, rows)
    on_conflict = OnConflict.IGNORE if ignore_conflicts else None
    ops, quote = connection.ops, connection.ops.quote_name
    columns = ", ".join(quote(f.column) for f in fields)
    sql = (
        f"{ops.insert_statement(on_conflict=on_conflict)} {quote(model._meta.db_table)} "
        f"({columns}) VALUES ({', '.join(['%s'] * len(fields))})"
        f" {ops.on_conflict_suffix_sql(fields, on_conflict, None, None)}"
    )
    with connection.cursor() as cursor:
        for start in range(0, len(params), DB_CHUNK):
            cursor.executemany(sql, params[start : start + DB_CHUNK])


def update(model: type[models.Model], rows: list[dict], fields: list[str]) -> None:
    """UPDATE ``fields`` of rows by ``id`` with executemany (``bulk_update`` builds one CASE
    expression per field and row, and costs more than the write it makes)."""
    if not rows:
        return
    meta, quote = model._meta, connection.ops.quote_name
    targets = [meta.get_field(f) for f in fields]
    adapters = [(f.attname, adapter(f)) for f in targets]
    params = [
        (
            *((prep(row[n]) if prep and row[n] is not None else row[n]) for n, prep in adapters),
            row["id"],
        )
        for row in rows
    ]
    assignments = ", ".join(f"{quote(f.column)} = %s" for f in targets)
    sql = f"UPDATE {quote(meta.db_table)} SET {assignments} WHERE {quote(meta.pk.column)} = %s"
    with connection.cursor() as cursor:
        for start in range(0, len(params), DB_CHUNK):
            cursor.executemany(sql, params[start : start + DB_CHUNK])


@functools.cache
def _keep_exact_sql(model: type[models.Model], key: str) -> tuple[str, tuple]:
    meta, quote = model._meta, connection.ops.quote_name
    fields = tuple(f for f in meta.concrete_fields if not f.primary_key)
    table, exact = quote(meta.db_table), quote(meta.get_field("exact").column)
    updates = ", ".join(
        f"{quote(f.column)} = EXCLUDED.{quote(f.column)}"
        for f in fields
        if f.name not in (key, "status_version")
    )
    sql = (
        f"INSERT INTO {table} ({', '.join(quote(f.column) for f in fields)}) "
        f"VALUES ({', '.join(['%s'] * len(fields))}) "
        f"ON CONFLICT ({quote(key)}, {quote('status_version')}) DO UPDATE SET {updates} "
        f"WHERE NOT {table}.{exact} AND EXCLUDED.{exact}"
    )
    return sql, fields


def insert_keeping_exact(model: type[models.Model], key: str, rows: list[dict]) -> None:
    """INSERT timeline rows, unique by (``key``, status_version): a row already there stays,
    unless it is inexact and the new one exact. One statement (SQLite >= 3.24, PostgreSQL),
    so the write-through makes no more than a plain insert."""
    if not rows:
        return
    sql, fields = _keep_exact_sql(model, key)
    with connection.cursor() as cursor:
        for start in range(0, len(rows), DB_CHUNK):
            cursor.executemany(sql, _params(fields, rows[start : start + DB_CHUNK]))
