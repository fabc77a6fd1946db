"""The few SQL statements written by hand, for speed: executemany INSERTs and UPDATEs of
many rows, a one-row INSERT that answers its id (the inventory's records), the timeline
rows' insert-or-replace-inexact, and the SELECT of rows by key that every write-through
makes (the ORM's own SQL, compiled once)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, cast

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


def _insert_sql(model: type[models.Model], on_conflict: OnConflict | None) -> tuple[str, list]:
    fields = [f for f in model._meta.concrete_fields if not f.primary_key]
    ops, quote = connection.ops, connection.ops.quote_name
    columns = ", ".join(quote(f.column) for f in fields)
    sql = (
        f"{ops.insert_statement(on_conflict=on_conflict)} {quote(model._meta.db_table)} "
        f"({columns}) VALUES ({', '.join(['%s'] * len(fields))})"
        f" {ops.on_conflict_suffix_sql(fields, on_conflict, None, None)}"
    )
    return sql, fields


def insert(model: type[models.Model], rows: list[dict], *, ignore_conflicts: bool = False):
    """INSERT ``rows`` (field name -> value; defaults fill the rest) with executemany.

    What ``bulk_create`` does, several times faster for many rows: SQLite's
    999-parameter limit makes Django compile one INSERT per 40 job rows.
    """
    if not rows:
        return
    sql, fields = _insert_sql(model, OnConflict.IGNORE if ignore_conflicts else None)
    params = _params(fields, rows)
    with connection.cursor() as cursor:
        for start in range(0, len(params), DB_CHUNK):
            cursor.executemany(sql, params[start : start + DB_CHUNK])


def insert_one(model: type[models.Model], row: dict) -> int:
    """INSERT one row (field name -> value; defaults fill the rest, ``auto_now`` fields
    included: give them) and answer its primary key: ``Model.objects.create``'s write,
    without building a model instance or running the ORM's compiler (the statement is a
    join of the model's column names). A conflict raises ``IntegrityError`` as the ORM's
    does."""
    sql, fields = _insert_sql(model, None)
    (params,) = _params(fields, [row])
    pk = model._meta.pk
    with connection.cursor() as cursor:
        if not connection.features.can_return_columns_from_insert:  # SQLite before 3.35
            cursor.execute(sql, params)
            return connection.ops.last_insert_id(cursor, model._meta.db_table, pk.column)
        returning, returning_params = connection.ops.return_insert_columns([pk])
        cursor.execute(f"{sql} {returning}", (*params, *returning_params))
        (value,) = connection.ops.fetch_returned_insert_columns(cursor, returning_params)
        return value


def update(model: type[models.Model], rows: list[dict], fields: list[str]) -> None:
    """UPDATE ``fields`` of rows by ``id`` with executemany (``bulk_update`` builds one CASE
    expression per field and row, and costs more than the write it makes)."""
    if not rows:
        return
    meta, quote = model._meta, connection.ops.quote_name
    targets = [cast(models.Field, meta.get_field(f)) for f in fields]
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
    table, exact = quote(meta.db_table), quote(cast(models.Field, meta.get_field("exact")).column)
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


# The statements ``select_in`` has compiled, by model, key, columns, key count and database.
_SELECTS: dict[tuple, tuple[str, list[str], dict] | None] = {}


def select_in(
    model: type[models.Model], key: str, ids: list[str], fields: tuple[str, ...]
) -> list[dict]:
    """``model.objects.filter(<key>__in=ids).values(*fields)``, as a list.

    The write-through asks this of a few rows at each write; the ORM builds and compiles
    the query anew each time, at many times the cost of running it. Here the ORM's own
    SQL and value converters are made once per number of keys and reused.
    """
    ids = list(dict.fromkeys(ids))
    if not ids:
        return []
    compiled = _compiled(model, key, fields, len(ids), connection.alias)
    if compiled is None:  # a statement this cannot reuse: the ORM, as it was
        return list(model._default_manager.filter(**{f"{key}__in": ids}).values(*fields))
    sql, names, converters = compiled
    with connection.cursor() as cursor:
        cursor.execute(sql, ids)
        rows = cursor.fetchall()
    out = []
    for row in rows:
        values = list(row)
        for i, (functions, expression) in converters.items():
            for convert in functions:
                values[i] = convert(values[i], expression, connection)
        out.append(dict(zip(names, values, strict=True)))
    return out


def _compiled(model, key: str, fields: tuple[str, ...], n: int, alias: str):
    found = _SELECTS.get((model, key, fields, n, alias), False)
    if found is not False:
        return found
    # Distinct stand-ins, so that the ORM keeps every one (it drops repeated keys).
    marks = [f"\x00select_in {i}" for i in range(n)]
    query = model.objects.filter(**{f"{key}__in": marks}).values(*fields).query
    compiler = query.get_compiler(using=alias)
    sql, params = compiler.as_sql()
    names = [*query.extra_select, *query.values_select, *query.annotation_select]
    compiled = None
    # Only a statement whose parameters are the keys, in order, and whose columns are the
    # fields asked for, can be run again with other keys.
    if list(params) == marks and names == list(fields) and len(compiler.select) == len(fields):
        expressions = [column for column, _sql, _alias in compiler.select]
        compiled = (sql, names, compiler.get_converters(expressions))
    if len(_SELECTS) > 1000:  # a rebuild's chunks come in few sizes; never grow without end
        _SELECTS.clear()
    _SELECTS[(model, key, fields, n, alias)] = compiled
    return compiled
