"""The cheaper paths of the write-through and the ZooKeeper client give what the slow ones did.

``mirror.sql.select_in`` runs the ORM's own SQL compiled once: the same rows and the same
Python values as ``.values()`` (dates, JSON, booleans), whatever keys are asked for.
``zk.PollingHandler`` waits with one poll(2) object and answers as kazoo's own handler does.
A job's profile read by its compiled statement is the ORM's ``first()``, field by field.
``mirror.sql.insert_one`` writes the row ``create`` writes and answers its id.
A history node built from its entries' kept encodings is byte for byte the JSON of the whole.
"""

from __future__ import annotations

import json
import socket
from datetime import UTC, datetime

import pytest
from kazoo.handlers.threading import SequentialThreadingHandler

from batches.models import Batch, Profile
from jobs.models import Job
from merritt_queue.core import history
from merritt_queue.core.zk import PollingHandler
from mirror.rows import BATCH_FIELDS, JOB_FIELDS
from mirror.sql import insert_one, select_in
from pipeline.services import _read_profile

AT = datetime(2026, 11, 24, 10, 0, 0, 123456, tzinfo=UTC)


def _rows(n: int) -> None:
    batch = Batch.objects.create(
        bid="bid0000000001", job_counts={"Pending": n}, job_total=n, read_at=AT, last_modified=AT
    )
    for i in range(n):
        Job.objects.create(
            jid=f"jid{i:010d}",
            batch=batch,
            status="Pending",
            last_modified=AT,
            read_at=AT,
            configuration={"files": [i], "title": "ünïcode"},
            identifiers={"primary_id": f"ark:/1/{i}"} if i % 2 else None,
            locked=bool(i % 2),
        )


@pytest.mark.django_db
@pytest.mark.parametrize(
    "ids",
    [
        ["jid0000000000"],
        ["jid0000000001", "jid0000000000", "jid0000000002"],
        ["jid0000000001", "jid0000000001"],  # repeated: each row once
        ["jid0000000009", "jid0000000002"],  # one missing
        ["jid0000000009"],  # none there
        [],
    ],
)
def test_select_in_gives_the_orms_rows_and_values(ids):
    _rows(3)
    fields = ("id", "jid", "read_at", *JOB_FIELDS)
    orm = list(Job.objects.filter(jid__in=ids).values(*fields))
    assert sorted(select_in(Job, "jid", ids, fields), key=lambda r: r["jid"]) == sorted(
        orm, key=lambda r: r["jid"]
    )


@pytest.mark.django_db
def test_select_in_converts_dates_json_and_booleans():
    _rows(2)
    (row,) = select_in(Job, "jid", ["jid0000000001"], ("jid", "read_at", *JOB_FIELDS))
    assert row["read_at"] == AT and row["last_modified"] == AT
    assert row["configuration"] == {"files": [1], "title": "ünïcode"}
    assert row["identifiers"] == {"primary_id": "ark:/1/1"} and row["locked"] is True
    (batch,) = select_in(Batch, "bid", ["bid0000000001"], ("id", "bid", *BATCH_FIELDS))
    assert batch == Batch.objects.filter(bid="bid0000000001").values("id", "bid", *BATCH_FIELDS)[0]
    counts = select_in(Batch, "bid", ["bid0000000001"], ("bid", "job_counts"))
    assert counts == [{"bid": "bid0000000001", "job_counts": {"Pending": 2}}]


@pytest.mark.django_db
def test_select_in_sees_rows_written_after_its_statement_was_compiled():
    _rows(1)
    fields = ("jid", "status")
    assert select_in(Job, "jid", ["jid0000000000"], fields) == [
        {"jid": "jid0000000000", "status": "Pending"}
    ]
    Job.objects.filter(jid="jid0000000000").update(status="Estimating")
    assert select_in(Job, "jid", ["jid0000000000"], fields) == [
        {"jid": "jid0000000000", "status": "Estimating"}
    ]


def test_the_polling_handler_answers_as_kazoos_own():
    ours, theirs = PollingHandler(), SequentialThreadingHandler()
    a, b = socket.socketpair()
    try:
        assert ours.select([a], [], [], 0.01) == theirs.select([a], [], [], 0.01) == ([], [], [])
        b.send(b"x")
        for rlist, wlist in (([a], []), ([], [a]), ([a], [a]), ([a, b], [b])):
            assert ours.select(rlist, wlist, [], 0.01) == theirs.select(rlist, wlist, [], 0.01)
        assert ours.select([a], [], [], 0.01) == ([a], [], [])
        # Descriptors as numbers, one asked twice, an xlist, no wait at all: the same.
        for rlist, wlist, xlist, timeout in (
            ([a.fileno()], [b.fileno()], [], 0),
            ([a, a], [a], [a], 0.0),
            ([b], [], [a, b], 0.001),
        ):
            assert ours.select(rlist, wlist, xlist, timeout) == theirs.select(
                rlist, wlist, xlist, timeout
            )
        for bad in (-1, "soon"):  # a wrong timeout: the same refusal
            with pytest.raises((ValueError, TypeError)) as mine:
                ours.select([a], [], [], bad)
            with pytest.raises((ValueError, TypeError)) as kazoos:
                theirs.select([a], [], [], bad)
            assert (mine.type, str(mine.value)) == (kazoos.type, str(kazoos.value))
        b.shutdown(socket.SHUT_WR)  # the peer hung up: readable for both
        assert ours.select([a], [a], [], 0.01) == theirs.select([a], [a], [], 0.01)
        a.close()  # a closed socket: the same refusal
        refusals = []
        for handler in (ours, theirs):
            with pytest.raises((ValueError, TypeError)) as refused:
                handler.select([a], [], [], 0.01)
            refusals.append((refused.type, str(refused.value)))
        assert refusals[0] == refusals[1]
    finally:
        b.close()


def _dumped(h: history.History) -> bytes:
    whole = {"format": 1, "dropped": h.dropped, "entries": [e.as_json() for e in h.entries]}
    return json.dumps(whole, separators=(",", ":"), ensure_ascii=False).encode()


def test_a_history_node_is_the_json_of_the_whole_whatever_its_entries_hold():
    h = history.History(exists=True)
    messages = ["", "plain", 'quote " and \\ back', "Zürich – ünïcode ☃", "x" * 600, "\n\t\u0001"]
    for version, message in enumerate(messages * 30):
        entry = history.Entry(
            version,
            "Pending",
            "Estimating",
            "2026-11-24 10:00:00 +0000",
            message=message,
            retry_count=version % 3,
            by="worker h:1",
        )
        h, data = history.append(h, entry)
        assert data == _dumped(h)
        assert history.encode(history.decode(data)) == data
        assert len(data) <= history.MAX_BYTES
    assert h.dropped > 0


@pytest.mark.django_db
def test_a_profile_read_by_its_compiled_statement_is_the_orms_first():
    Profile.objects.create(name="other", collection="c0", minter_shoulder="ark:/99999/fk4")
    made = Profile.objects.create(
        name="demo", collection="ünï", minter_shoulder="ark:/99999/fk4", default_priority=3
    )
    orm, read = Profile.objects.filter(name="demo").first(), _read_profile("demo")
    assert read is not None and read.pk == made.pk
    fields = [f.attname for f in Profile._meta.concrete_fields]
    assert [getattr(read, f) for f in fields] == [getattr(orm, f) for f in fields]
    assert not read._state.adding  # a row read, as the ORM's is: saving it updates
    assert _read_profile("gone") is None


@pytest.mark.django_db
def test_insert_one_writes_the_row_create_writes_and_answers_its_id():
    from django.db import IntegrityError, transaction

    from inventory.models import InventoryObject, InventoryVersion

    made = InventoryObject.objects.create(ark="ark:/1/a", collection="c", last_stored=AT)
    obj_id = insert_one(
        InventoryObject,
        {"ark": "ark:/1/b", "collection": "c", "last_stored": AT, "created": AT, "modified": AT},
    )
    assert obj_id != made.pk
    assert InventoryObject.objects.get(pk=obj_id).ark == "ark:/1/b"
    row = {"obj_id": obj_id, "number": 1, "job_id": "jid0000000001", "stored": AT}
    version_id = insert_one(InventoryVersion, row | {"deleted": ["ünï.txt"]})
    version = InventoryVersion.objects.get(pk=version_id)
    assert (version.obj_id, version.stored, version.deleted) == (obj_id, AT, ["ünï.txt"])
    assert (version.total_size, version.mode) == (0, "")  # the model's defaults
    with pytest.raises(IntegrityError), transaction.atomic():
        insert_one(InventoryObject, {"ark": "ark:/1/b", "created": AT, "modified": AT})


@pytest.mark.django_db
def test_insert_one_answers_the_id_where_an_insert_cannot_return_it(monkeypatch):
    """SQLite before 3.35 has no RETURNING: the id comes from the cursor instead."""
    from django.db import connection

    from inventory.models import InventoryObject

    if connection.vendor != "sqlite":
        pytest.skip("only SQLite before 3.35 lacks RETURNING among the supported databases")
    monkeypatch.setattr(connection.features, "can_return_columns_from_insert", False)
    first = insert_one(InventoryObject, {"ark": "ark:/1/a", "created": AT, "modified": AT})
    second = insert_one(InventoryObject, {"ark": "ark:/1/b", "created": AT, "modified": AT})
    assert InventoryObject.objects.get(pk=first).ark == "ark:/1/a"
    assert InventoryObject.objects.get(pk=second).ark == "ark:/1/b"
