"""Downloading's own account of what it fetched: every file under ``producer/``, counted once
and measured once, nested folders included."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from jobs.download import _download
from jobs.payload import PayloadFile
from jobs.services import Services
from merritt_queue.services.fetch import Fetcher
from tests.httpserver import direct_session

pytest_plugins = ["tests.httpserver"]

pytestmark = pytest.mark.usefixtures("loopback_only")


def test_the_outcome_counts_and_sizes_every_file_downloaded(http_server, tmp_path):
    bodies = {"a.txt": b"a" * 10, "deep/er/b.bin": b"b" * 300, "deep/c": b""}
    for name, body in bodies.items():
        http_server.behave(f"/{name}", body=body)
    services = Services(
        store=None,  # type: ignore[arg-type]  # Downloading of plain files reads no queue
        fetcher=Fetcher(allow_loopback=True, session_factory=direct_session),
        minter=None,
        storage=None,
        inventory=None,  # type: ignore[arg-type]
        notifier=None,  # type: ignore[arg-type]
        work_root=tmp_path,
    )
    job = SimpleNamespace(jid="jid0000000001", configuration={"payload_type": "manifest"})
    files = [PayloadFile(http_server.url_for(f"/{n}"), n, len(b)) for n, b in bodies.items()]
    outcome = _download(services, job, files)  # type: ignore[arg-type]
    assert outcome.message == "downloaded 3 file(s), 310 bytes"
    assert outcome.data == {"space_needed": 310}
    producer = tmp_path / "jobs" / "jid0000000001" / "producer"
    assert sorted(str(p.relative_to(producer)) for p in producer.rglob("*") if p.is_file()) == [
        "a.txt",
        "deep/c",
        "deep/er/b.bin",
    ]
