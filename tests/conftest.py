"""Fixtures: each test gets its own ZooKeeper chroot, removed afterwards.

The ZooKeeper comes from ``make test`` (a throw-away server on a free port,
``ZK_HOSTS``); a developer's own tree is never touched because every path a
test writes lives under ``/mq-test-<uuid>``.
"""

from __future__ import annotations

import os
import uuid

import pytest
from kazoo.client import KazooClient

from merritt_queue import runtime
from merritt_queue.store import QueueStore
from merritt_queue.zk import ZkConfig, connect
from tests.redisdb import claimed

# Plugins the tests also import from: rewritten before any test module imports them.
pytest.register_assert_rewrite("tests.cluster", "tests.httpserver", "tests.mirrorlive")


def _zk_hosts() -> str:
    hosts = os.environ.get("ZK_HOSTS")
    if not hosts:
        pytest.fail("ZK_HOSTS is not set: run the suite with `make test`, which starts ZooKeeper")
    return hosts


@pytest.fixture
def zk_config() -> ZkConfig:
    hosts = _zk_hosts()
    config = ZkConfig(hosts=hosts, chroot=f"/mq-test-{uuid.uuid4().hex}", timeout=10)
    yield config
    root = KazooClient(hosts=hosts)
    root.start(timeout=10)
    try:
        root.delete(config.chroot_path, recursive=True)
    except Exception:  # a test that never connected left nothing to remove
        pass
    finally:
        root.stop()
        root.close()


@pytest.fixture
def make_client(zk_config):
    """Factory of extra clients on the test's chroot (other workers, other sessions)."""
    clients: list[KazooClient] = []

    def make(**overrides) -> KazooClient:
        config = ZkConfig(**{**zk_config.__dict__, **overrides})
        client = connect(config)
        clients.append(client)
        return client

    yield make
    for client in clients:
        try:
            client.stop()
            client.close()
        except Exception:  # already closed by the test on purpose
            pass


@pytest.fixture
def zk(make_client) -> KazooClient:
    return make_client()


@pytest.fixture
def store(zk) -> QueueStore:
    s = QueueStore(zk)
    s.init()
    return s


@pytest.fixture
def process_store(zk_config, settings, tmp_path, db) -> QueueStore:
    """The process's own store (``runtime.get_store``, as views and services get it) on the
    test's chroot, with the working directory under the test's tmp_path."""
    settings.ZK_HOSTS, settings.ZK_CHROOT = zk_config.hosts, zk_config.chroot
    settings.MQ_WORK_DIR = str(tmp_path / "work")
    runtime.close()
    yield runtime.get_store()
    runtime.close()


@pytest.fixture
def make_store(make_client):
    def make(**overrides) -> QueueStore:
        return QueueStore(make_client(**overrides))

    return make


@pytest.fixture
def redis():
    """The throw-away Redis of ``make test``, emptied before and after each test; any other
    ``REDIS_URL`` that holds keys is refused (``tests.redisdb``)."""
    url = os.environ.get("REDIS_URL")
    if not url:
        pytest.fail("REDIS_URL is not set: run the suite with `make test`, which starts Redis")
    with claimed(url) as conn:
        yield conn
