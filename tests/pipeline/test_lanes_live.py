"""Small deposits never wait behind long downloads (issue 34): real ``rqworker`` processes and
the dispatcher, every normal worker held inside a large, slow download, and a one-file deposit
still goes through, on the reserved worker (``merritt_queue.core.lanes``)."""

from __future__ import annotations

import hashlib
import threading

from merritt_queue.core import workerfacts
from merritt_queue.core.lanes import is_reserved
from merritt_queue.core.queues import reserved_queue_names
from tests.cluster import batch_jobs, wait_final, wait_for

pytest_plugins = ["tests.cluster", "tests.httpserver"]

SMALL_BYTES = 1_000_000  # MQ_SMALL_JOB_BYTES here: the big files are four times that
BIG = 4 << 20
LANES = {"MQ_SMALL_JOB_BYTES": str(SMALL_BYTES)}


class Held:
    """Large files whose downloads send half, then wait until released."""

    def __init__(self, http_server, n: int) -> None:
        self.released = threading.Event()
        self.stopping = http_server.stopping
        self.held = 0
        self.data = b"x" * BIG
        self.urls = [
            http_server.behave(f"/big{i}.bin", generate=(BIG, self._chunks)) for i in range(n)
        ]

    def _chunks(self):
        yield self.data[: BIG // 2]
        self.held += 1
        while not (self.released.is_set() or self.stopping.is_set()):
            self.released.wait(0.1)
        yield self.data[BIG // 2 :]

    def manifest(self, http_server) -> str:
        md5 = hashlib.md5(self.data, usedforsecurity=False).hexdigest()
        lines = [
            "#%checkm_0.7",
            "#%profile | http://uc3.cdlib.org/registry/ingest/manifest/"
            "mrt-single-file-batch-manifest",
            "#%prefix | mrt: | http://merritt.cdlib.org/terms#",
            "#%prefix | nfo: | http://www.semanticdesktop.org/ontologies/2007/03/22/nfo#",
            "#%fields | nfo:fileUrl | nfo:hashAlgorithm | nfo:hashValue | nfo:fileSize "
            "| nfo:fileLastModified | nfo:fileName | mrt:primaryIdentifier | mrt:localIdentifier "
            "| mrt:creator | mrt:title | mrt:date",
            *(
                f"{url} | md5 | {md5} | {BIG} |  | big{i}.bin |  |  | tester | big{i} | 2024"
                for i, url in enumerate(self.urls)
            ),
            "#%eof",
        ]
        (http_server.root / "big.checkm").write_text("\n".join(lines) + "\n")
        return http_server.url_for("/big.checkm")


def test_a_one_file_deposit_completes_while_every_normal_worker_is_inside_a_long_download(
    cluster, store, http_server, redis
):
    held = Held(http_server, 2)
    cluster.worker("worker1", **LANES)
    cluster.worker("worker2", **LANES)
    cluster.worker("reserved1", *reserved_queue_names(), **LANES)
    cluster.dispatcher(**LANES)
    try:
        big = cluster.submit(
            type="single-file-batch-manifest", payload_url=held.manifest(http_server)
        )

        def both_held() -> bool:
            jobs = [store.jobs.get_job(j) for j in batch_jobs(store, big)]
            downloading = [j for j in jobs if j.status == "Downloading" and j.locked]
            return held.held == 2 and len(downloading) == 2

        wait_for("both normal workers inside a big download", both_held, cluster, timeout=90)

        def holders() -> dict[str, bool]:
            """Each big job's worker: reserved or not, by the queues it serves."""
            records = workerfacts.read(redis).records.values()
            return {r.jid: is_reserved(r.queues) for r in records if r.step == "Downloading"}

        big_jobs = set(batch_jobs(store, big))
        wait_for("the workers' records", lambda: set(holders()) == big_jobs, cluster, timeout=60)
        # The reserved worker took none of them, not even by chaining on from Provisioning.
        assert not any(holders().values()), holders()

        url = http_server.behave("/small.txt", body=b"a one-file deposit\n")
        small = cluster.submit(type="file", payload_url=url)
        done = wait_final(cluster, store, small, timeout=90)
        assert done.status == "Completed", cluster.logs()
        # Neither big download let go of its worker meanwhile.
        assert held.held == 2 and both_held(), cluster.logs()
    finally:
        held.released.set()
    assert wait_final(cluster, store, big, timeout=120).status == "Completed", cluster.logs()
