"""Downloading's own account of what it fetched: every file under ``producer/``, counted once
and measured once, nested folders included."""

from __future__ import annotations

import os
import time
from types import SimpleNamespace

import pytest

from merritt_queue.core.attempt import STAGING
from merritt_queue.services.fetch import Fetcher
from pipeline.download import _download
from pipeline.payload import PayloadFile
from pipeline.services import Services
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


def test_a_download_sweeps_day_old_staging_folders_and_leaves_other_attempts_alone(
    http_server, tmp_path
):
    http_server.behave("/a.txt", body=b"a" * 10)
    services = Services(
        store=None,  # type: ignore[arg-type]
        fetcher=Fetcher(allow_loopback=True, session_factory=direct_session),
        minter=None,
        storage=None,
        inventory=None,  # type: ignore[arg-type]
        notifier=None,  # type: ignore[arg-type]
        work_root=tmp_path,
    )
    job = SimpleNamespace(jid="jid0000000001", configuration={"payload_type": "manifest"})
    staging = tmp_path / "jobs" / job.jid / STAGING
    crashed, running = staging / "crashed-a-day-ago", staging / "another-attempt-at-work"
    for folder in (crashed, running):
        (folder / "producer").mkdir(parents=True)
        (folder / "producer" / "a.txt.part").write_bytes(b"half")
    day_ago = time.time() - 86400 - 60
    for path in (crashed, crashed / "producer", crashed / "producer" / "a.txt.part"):
        os.utime(path, (day_ago, day_ago))
    files = [PayloadFile(http_server.url_for("/a.txt"), "a.txt", 10)]
    _download(services, job, files)  # type: ignore[arg-type]
    assert sorted(p.name for p in staging.iterdir()) == ["another-attempt-at-work"]
    assert (running / "producer" / "a.txt.part").read_bytes() == b"half"
