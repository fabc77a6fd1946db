"""Fixtures that run the real pipeline: ZooKeeper, Redis, RQ workers, a content server.

Workers are RQ ``SimpleWorker``s in burst mode in the test process, so the
test's settings and database are theirs; the dispatcher sweeps between bursts.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from rq import Queue, SimpleWorker

from batches.models import Profile
from door.submission import submit
from merritt_queue.core.dispatcher import Dispatcher, DispatcherConfig
from merritt_queue.core.queues import all_queue_names
from merritt_queue.core.states import BatchStatus
from merritt_queue.project import runtime
from merritt_queue.project.tasks import TASKS
from pipeline import services

SAMPLE_PREFIX = "https://raw.githubusercontent.com/CDLUC3/mrt-doc/main/sampleFiles/"
FIXTURES = Path(__file__).parent / "fixtures" / "merritt-sample-files"
FINAL = {BatchStatus.COMPLETED, BatchStatus.FAILED, BatchStatus.DELETED}


# The demo profile's owner ARK: its local-id locks are named after it, as Merritt's are.
OWNER_ARK = "ark:/99999/fk4owner"


@pytest.fixture
def content(http_server):
    """Merritt's sample files served locally, manifests rewritten to point at the server."""
    for f in FIXTURES.iterdir():
        data = f.read_bytes()
        if f.suffix == ".checkm":
            data = data.replace(SAMPLE_PREFIX.encode(), f"{http_server.url}/".encode())
        (http_server.root / f.name).write_bytes(data)
    return http_server


@dataclass
class Pipeline:
    store: object
    redis: object
    profile: Profile
    root: Path

    def submit(self, **data) -> str:
        data.setdefault("profile", self.profile.name)
        data.setdefault("submitter", "tester")
        return submit(data).bid

    def step(self) -> int:
        """One dispatcher sweep and one burst of the workers; the RQ jobs run."""
        Dispatcher(self.store, self.redis, TASKS, DispatcherConfig(ahead=50)).sweep()
        queues = [Queue(n, connection=self.redis) for n in all_queue_names()]
        before = sum(q.count for q in queues)
        SimpleWorker(queues, connection=self.redis).work(burst=True, logging_level="WARNING")
        return before

    def run(self, bid: str, timeout: float = 60, until=None):
        """Run until the batch is final (or ``until(batch)``); the batch record."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            batch = self.store.batches.get_batch(bid)
            if (until or (lambda b: b.status in FINAL))(batch):
                return batch
            if not self.step():
                time.sleep(0.05)
        raise AssertionError(f"batch {bid} did not finish: {self.store.batches.get_batch(bid)}")

    def jobs(self, bid: str):
        groups = self.store.batches.batch_jobs(bid)
        return [self.store.jobs.get_job(j) for g in groups.values() for j in g]


@pytest.fixture
def pipeline(zk_config, redis, settings, tmp_path, transactional_db):
    root = tmp_path / "queue"
    settings.ZK_HOSTS, settings.ZK_CHROOT = zk_config.hosts, zk_config.chroot
    settings.MQ_WORK_DIR = str(root / "work")
    settings.MQ_STORAGE_ROOT = str(root / "storage")
    settings.MQ_MINTER_DIR = str(root / "minter")
    settings.MQ_ALLOW_LOOPBACK = True
    settings.MQ_FETCH_RETRIES = 2
    settings.MQ_CALLBACK_RETRIES = 2
    settings.MQ_PROVISION_RETRY_SECONDS = 0.2
    # At most what a download of undeclared size reserves: a test reserves little of the
    # machine's disk.
    settings.MQ_MAX_DOWNLOAD_BYTES = 1 << 30
    # The workers share the test's in-memory SQLite database, in which a second thread's
    # write fails at once instead of waiting: a chain's writes reach the mirror at the end
    # of its RQ job, from the worker's own thread (tests/core/test_changebuffer.py covers the
    # delayed flush from another thread).
    settings.MQ_MIRROR_DELAY = 3600
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    runtime.close()
    services.reset()
    store = runtime.get_store()
    store.init()
    profile = Profile.objects.create(
        name="demo",
        collection="demo",
        minter_shoulder="ark:/99999/fk4",
        owner_ark=OWNER_ARK,
        notification_emails="depositor@example.org",
    )
    yield Pipeline(store, redis, profile, root)
    runtime.close()
    services.reset()
