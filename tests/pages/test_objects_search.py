"""The object list's search finds identifiers as people type them: a resolver link, with or
without ``ark:/``, any case, a bare ARK name, the start of an ARK or a local id; by indexed
prefixes of normalised columns, never a read of every object."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test.utils import CaptureQueriesContext

from inventory.filters import ObjectFilter
from inventory.idsearch import ark_keys, normalised
from inventory.models import InventoryObject, LocalIdentifier
from tests.pages.test_objects_pages import ARK, OTHER, browser, inventory, listed  # noqa: F401

BOTH = [OTHER, ARK]  # newest stored first


@pytest.mark.parametrize(
    "typed, key",
    [
        ("ark:/99999/fk4brain", "99999/fk4brain"),
        ("https://n2t.net/ark:/99999/fk4brain", "99999/fk4brain"),
        ("http://arks.org/ark:/99999/FK4Brain/", "99999/fk4brain"),
        ("https://merritt.cdlib.org/m/ark:%2F99999%2Ffk4brain", "99999/fk4brain"),
        ("ARK:99999/fk4brain", "99999/fk4brain"),
        ("  fk4brain ", "fk4brain"),
        ("99999/fk4", "99999/fk4"),
    ],
)
def test_an_identifier_is_normalised_as_typed(typed, key):
    assert normalised(typed) == key


def test_an_ark_keeps_its_key_and_its_name():
    assert ark_keys("ark:/13030/m5Abc") == ("13030/m5abc", "m5abc")


@pytest.mark.parametrize(
    "query, expected",
    [
        ("q=https://n2t.net/ark:/99999/fk4brain", [ARK]),
        ("q=https%3A%2F%2Fn2t.net%2Fark%3A%2F99999%2Ffk4husky", [OTHER]),
        ("q=fk4brain", [ARK]),  # a bare name
        ("q=FK4HUS", [OTHER]),  # the start of a name, in another case
        ("q=fk4", BOTH),
        ("q=99999/fk4b", [ARK]),
        ("q=ark:99999/fk4brain", [ARK]),
        ("q=BRA", [ARK]),  # the start of a local id, in another case
        ("q=Husk", [OTHER]),
        ("q=fk4&collection=demo", [ARK]),
        ("q=rain", [ARK]),  # no identifier starts so: the titles are read
    ],
)
def test_the_search_finds_identifiers_as_people_type_them(browser, inventory, query, expected):  # noqa: F811
    response = browser.get(f"/objects/?{query}")
    assert response.status_code == 200
    assert listed(response) == expected


def test_the_search_reads_identifiers_by_their_indexes(inventory):  # noqa: F811
    queries = []
    for typed in ("https://n2t.net/ark:/99999/fk4brain", "fk4", "BRA"):
        with CaptureQueriesContext(connection) as ctx:
            qs = ObjectFilter({"q": typed}, queryset=InventoryObject.objects.all()).qs
            list(qs.values_list("ark", flat=True))
        queries += [q["sql"] for q in ctx.captured_queries]
    assert queries
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            for sql in queries:
                cursor.execute(f"EXPLAIN QUERY PLAN {sql}")
                plan = " | ".join(str(row[-1]) for row in cursor.fetchall())
                assert "SCAN inventory_" not in plan, (sql, plan)
        else:  # few rows: forbid the sequential scan the planner would choose for them
            cursor.execute("SET enable_seqscan = off")
            for sql in queries:
                cursor.execute(f"EXPLAIN {sql}")
                plan = " | ".join(row[0] for row in cursor.fetchall())
                assert "Seq Scan" not in plan, (sql, plan)
            cursor.execute("RESET enable_seqscan")


@pytest.mark.django_db(transaction=True)
def test_the_migration_gives_objects_recorded_before_their_keys():
    executor = MigrationExecutor(connection)
    executor.migrate([("inventory", "0002_versions_record_changes")])
    old = executor.loader.project_state([("inventory", "0002_versions_record_changes")]).apps
    old.get_model("inventory", "InventoryObject").objects.create(ark="ark:/99999/FK4Old")
    old.get_model("inventory", "LocalIdentifier").objects.create(
        collection="demo", local_id="Old-One", ark="ark:/99999/FK4Old"
    )
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
    obj = InventoryObject.objects.get()
    assert (obj.ark_key, obj.ark_name) == ("99999/fk4old", "fk4old")
    assert LocalIdentifier.objects.get().local_key == "old-one"
