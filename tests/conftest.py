"""Fixtures: each test gets its own ZooKeeper chroot, removed afterwards.

The ZooKeeper comes from ``make test`` (a throw-away server on a free port,
``ZK_HOSTS``); a developer's own tree is never touched because every path a
test writes lives under ``/mq-test-<uuid>``.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading

import pytest
from django.conf import settings as django_settings
from kazoo.client import KazooClient

from harness import zookeeper
from merritt_queue.core.store import QueueStore
from merritt_queue.core.zk import ZkConfig, connect
from merritt_queue.project import runtime
from tests.redisdb import claimed

# The step counts of a test run (merritt_queue.core.metrics) go to a directory of its own,
# not to the developer's var/metrics; processes the tests start inherit it. The settings have
# exported theirs already, but nothing has imported prometheus_client yet.
METRICS_DIR = tempfile.mkdtemp(prefix="mq-test-metrics-")
os.environ["PROMETHEUS_MULTIPROC_DIR"] = os.environ["MQ_METRICS_DIR"] = METRICS_DIR
atexit.register(shutil.rmtree, METRICS_DIR, ignore_errors=True)

# A reported batch's lock outlives its report only where Merritt's own ingest may report it
# too (``MQ_REPORT_LOCK_GRACE``): the tests that run beside it set the grace themselves.
# This process's settings are read already (the fixture below); processes it starts inherit.
os.environ["MQ_REPORT_LOCK_GRACE"] = "0"

# The tests' servers speak plain http on 127.0.0.1, where DEBUG off would mark the cookies
# Secure and redirect every page to https: off for this process's servers (live_server's
# handler reads them once, when it starts) and for every process the tests start.
HTTP_ONLY = {
    "SESSION_COOKIE_SECURE": False,
    "CSRF_COOKIE_SECURE": False,
    "SECURE_SSL_REDIRECT": False,
    "SECURE_HSTS_SECONDS": 0,
}
for _name, _value in HTTP_ONLY.items():
    os.environ[_name] = str(_value).lower()
    setattr(django_settings, _name, _value)


@pytest.fixture(autouse=True)
def _no_report_lock_grace(settings):
    settings.MQ_REPORT_LOCK_GRACE = 0


@pytest.fixture(autouse=True)
def _no_rate_counts_from_other_tests():
    """Rate limits count in Django's cache, which outlives a test (``door.ratelimit``)."""
    from django.core.cache import cache

    cache.clear()


# Plugins the tests also import from: rewritten before any test module imports them.
pytest.register_assert_rewrite(
    "tests.cluster", "tests.httpserver", "harness.merrittstore", "tests.mirrorlive"
)

# The fast tier (`make check`, marker `fast`): modules whose every test runs without ZooKeeper,
# Redis, PostgreSQL, a browser or a cluster of processes, in well under a minute together.
# A module joins only when all its tests qualify; `make check` runs them with the services
# pointed at closed ports and the fixtures below refusing, so a wrong entry fails, never waits.
FAST_MODULES = frozenset(
    {
        "test_containers",
        "test_preservation_bagit_check",
        "test_steptimes",
        "test_foresight",
        "test_lanes",
        "test_core_states",
        "test_waiting",
        "test_waiting_lists",
        "test_window_math",
        "test_periodic",
        "test_jobparams",
        "test_preservation_failed_rows_manifest",
        "test_layers",
        "test_command_help",
        "test_deploy_units",
        "test_doc_examples",
        "test_pages_words",
        "test_history_pages",
        "test_status_api",
        "test_metrics",
        "test_manifest",
        "test_manifest_check",
        "test_preservation_preflight",
        "test_preservation_preflight_pages",
        "test_preservation_preflight_api",
        "test_objectfiles",
        "test_objects_payload",
        "test_objects_storage",
        "test_services_fetch",
        "test_breakerstate",
        "test_security_rebinding",
        "test_services_transport",
        "test_services_minter",
        "test_services_notifier",
        "test_services_webhook",
        "test_services_storage",
        "test_cpu_paths",
        "test_var_dir",
        "test_deposit_fields",
        "test_download_step",
        "test_partition_proxy",
        "test_steprecord",
        "test_steplog_services",
        "test_preservation_moment",
        "test_preservation_moment_pages",
        "test_preservation_moment_api",
    }
)
FAST_TIER = os.environ.get("MQ_FAST_TIER") == "1"


def pytest_collection_modifyitems(items):
    for item in items:
        if item.path.stem in FAST_MODULES:
            item.add_marker(pytest.mark.fast)


def _refuse_in_fast_tier(service: str) -> None:
    if FAST_TIER:
        pytest.fail(f"no {service} in the fast tier: take this module out of FAST_MODULES")


def _zk_hosts() -> str:
    _refuse_in_fast_tier("ZooKeeper")
    hosts = os.environ.get("ZK_HOSTS")
    if not hosts:
        pytest.fail("ZK_HOSTS is not set: run the suite with `make test`, which starts ZooKeeper")
    return hosts


@pytest.fixture
def zk_config() -> ZkConfig:
    hosts = _zk_hosts()
    config = ZkConfig(hosts=hosts, chroot=zookeeper.fresh_chroot("mq-test"), timeout=10)
    yield config
    zookeeper.delete_chroot(hosts, config.chroot_path, "tests")


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
    _refuse_in_fast_tier("Redis")
    url = os.environ.get("REDIS_URL")
    if not url:
        pytest.fail("REDIS_URL is not set: run the suite with `make test`, which starts Redis")
    with claimed(url) as conn:
        yield conn


@pytest.fixture
def started_threads(monkeypatch) -> list[str]:
    """The names of the threads started from now on."""
    names: list[str] = []
    real_start = threading.Thread.start

    def start(thread):
        names.append(thread.name)
        real_start(thread)

    monkeypatch.setattr(threading.Thread, "start", start)
    return names
