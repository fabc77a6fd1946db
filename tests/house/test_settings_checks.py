"""Settings checks fire with the right id on a bad value and stay quiet on the defaults."""

from __future__ import annotations

import os
import stat

import pytest
from django.core.checks import run_checks
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from merritt_queue.project import checks
from merritt_queue.project.env import (
    DEV_SECRET_KEY,
    env_bool,
    env_float,
    env_host_ports,
    env_int,
    env_str,
)


def ids(messages) -> list[str]:
    return [m.id for m in messages]


@pytest.fixture(autouse=True)
def writable_work_dir(tmp_path, settings):
    settings.MQ_WORK_DIR = str(tmp_path / "work")


def test_defaults_pass_every_check():
    # The development defaults (DEBUG on, as `make demo` runs) pass; DEBUG off needs a SECRET_KEY.
    with override_settings(DEBUG=True):
        assert [m for c in checks.ALL_CHECKS for m in c()] == []


def test_checks_are_registered_with_django():
    with override_settings(ZK_CHROOT="nope"):
        assert "mq.E002" in ids(run_checks(tags=[checks.TAG]))


@pytest.mark.parametrize(
    "hosts",
    ["zk1", "zk1:", ":2181", "zk1:abc", "zk1:2181,zk2", "zk1:2181/merritt", "zk1:70000", ""],
)
def test_malformed_zk_hosts_is_e001(hosts):
    with override_settings(ZK_HOSTS=hosts):
        assert ids(checks.check_zk_hosts()) == ["mq.E001"]


@pytest.mark.parametrize("hosts", ["127.0.0.1:2181", "zk1:2181,zk2:2182,zk3:2183", "[::1]:2181"])
def test_well_formed_zk_hosts_pass(hosts):
    with override_settings(ZK_HOSTS=hosts):
        assert checks.check_zk_hosts() == []


@pytest.mark.parametrize("chroot", ["merritt", "/merritt/", "/", ""])
def test_bad_zk_chroot_is_e002(chroot):
    with override_settings(ZK_CHROOT=chroot):
        assert ids(checks.check_zk_chroot()) == ["mq.E002"]


@pytest.mark.parametrize("timeout", [0, -1, -0.5])
def test_non_positive_zk_timeout_is_e003(timeout):
    with override_settings(ZK_TIMEOUT=timeout):
        assert ids(checks.check_zk_timeout()) == ["mq.E003"]


@pytest.mark.parametrize("url", ["http://127.0.0.1:6379/0", "127.0.0.1:6379", ""])
def test_redis_url_with_wrong_scheme_is_e004(url):
    with override_settings(REDIS_URL=url):
        assert ids(checks.check_redis_url()) == ["mq.E004"]


@pytest.mark.parametrize("url", ["rediss://r:6380/1", "unix:///run/redis.sock"])
def test_redis_url_schemes_accepted(url):
    with override_settings(REDIS_URL=url):
        assert checks.check_redis_url() == []


SENTINELS = [("s1", 26379), ("s2", 26379)]


@pytest.mark.parametrize(
    "overrides, problem",
    [
        ({"REDIS_SENTINELS": SENTINELS}, "REDIS_SENTINEL_MASTER is empty"),
        ({"REDIS_SENTINEL_MASTER": "mq"}, "REDIS_SENTINELS is empty"),
        (
            {"REDIS_SENTINELS": SENTINELS, "REDIS_SENTINEL_MASTER": "mq", "REDIS_URL_IS_SET": True},
            "both REDIS_URL and REDIS_SENTINELS",
        ),
        (
            {"REDIS_SENTINELS": SENTINELS, "REDIS_SENTINEL_MASTER": "mq", "REDIS_SENTINEL_DB": -1},
            "REDIS_SENTINEL_DB=-1",
        ),
    ],
)
def test_contradictory_redis_settings_are_e010(overrides, problem):
    base = {"REDIS_SENTINELS": [], "REDIS_SENTINEL_MASTER": "", "REDIS_URL_IS_SET": False}
    with override_settings(**(base | overrides)):
        messages = checks.check_redis_sentinel()
    assert ids(messages) == ["mq.E010"] and problem in messages[0].msg


def test_a_sentinel_setup_without_redis_url_passes():
    with override_settings(
        REDIS_SENTINELS=SENTINELS, REDIS_SENTINEL_MASTER="mq", REDIS_URL_IS_SET=False
    ):
        assert checks.check_redis_sentinel() == []


def test_sentinel_addresses_are_parsed(monkeypatch):
    monkeypatch.setenv("MQ_T", " s1:26379, [::1]:26380 ,")
    assert env_host_ports("MQ_T") == [("s1", 26379), ("::1", 26380)]
    monkeypatch.setenv("MQ_T", "")
    assert env_host_ports("MQ_T") == []


@pytest.mark.parametrize("raw", ["s1", "s1:", ":26379", "s1:abc", "s1:0", "s1:26379,s2"])
def test_malformed_sentinel_addresses_stop_startup(monkeypatch, raw):
    monkeypatch.setenv("MQ_T", raw)
    with pytest.raises(ImproperlyConfigured, match="MQ_T="):
        env_host_ports("MQ_T")


def test_sentinel_settings_make_every_rq_queue_use_the_sentinel(monkeypatch):
    """settings.py read fresh with Sentinel variables: RQ_QUEUES as django-rq wants them."""
    import importlib.util

    from merritt_queue.project import settings as real

    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.setenv("REDIS_SENTINELS", "s1:26379,s2:26380")
    monkeypatch.setenv("REDIS_SENTINEL_MASTER", "mq")
    monkeypatch.setenv("REDIS_SENTINEL_DB", "2")
    monkeypatch.setenv("REDIS_PASSWORD", "pw")
    spec = importlib.util.spec_from_file_location("fresh_settings", real.__file__)
    fresh = importlib.util.module_from_spec(spec)
    fresh.__package__ = "merritt_queue.project"
    spec.loader.exec_module(fresh)
    assert fresh.REDIS_URL_IS_SET is False
    for config in fresh.RQ_QUEUES.values():
        assert "URL" not in config
        assert config["SENTINELS"] == [("s1", 26379), ("s2", 26380)]
        assert (config["MASTER_NAME"], config["DB"], config["PASSWORD"]) == ("mq", 2, "pw")


@pytest.mark.parametrize("threshold", [0, 100, -5])
def test_disk_threshold_outside_range_is_e005(threshold):
    with override_settings(MQ_DISK_THRESHOLD=threshold):
        assert ids(checks.check_disk_threshold()) == ["mq.E005"]


def test_work_dir_under_a_file_is_e006(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with override_settings(MQ_WORK_DIR=str(blocker / "work")):
        assert ids(checks.check_work_dir()) == ["mq.E006"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes everywhere")
def test_read_only_work_dir_is_e006(tmp_path):
    tmp_path.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        with override_settings(MQ_WORK_DIR=str(tmp_path)):
            assert ids(checks.check_work_dir()) == ["mq.E006"]
    finally:
        tmp_path.chmod(stat.S_IRWXU)


def test_work_dir_is_created(tmp_path):
    target = tmp_path / "new" / "work"
    with override_settings(MQ_WORK_DIR=str(target)):
        assert checks.check_work_dir() == []
    assert target.is_dir()


def test_non_positive_lock_stale_seconds_is_e007():
    with override_settings(MQ_LOCK_STALE_SECONDS=0):
        assert ids(checks.check_lock_stale_seconds()) == ["mq.E007"]


def test_default_secret_key_without_debug_is_e030():
    with override_settings(DEBUG=False, SECRET_KEY=DEV_SECRET_KEY):
        assert ids(checks.check_secret_key()) == ["mq.E030"]


def test_default_secret_key_with_debug_passes():
    with override_settings(DEBUG=True, SECRET_KEY=DEV_SECRET_KEY):
        assert checks.check_secret_key() == []


def test_own_secret_key_without_debug_passes():
    with override_settings(DEBUG=False, SECRET_KEY="x" * 50):
        assert checks.check_secret_key() == []


def test_invalid_zk_timeout_env_names_the_variable(monkeypatch):
    monkeypatch.setenv("ZK_TIMEOUT", "abc")
    with pytest.raises(ImproperlyConfigured, match="ZK_TIMEOUT"):
        env_float("ZK_TIMEOUT", 10.0)


@pytest.mark.parametrize(
    ("helper", "value"), [(env_int, "ten"), (env_float, "1,5"), (env_bool, "maybe")]
)
def test_invalid_env_values_name_the_variable(monkeypatch, helper, value):
    monkeypatch.setenv("MQ_SOMETHING", value)
    with pytest.raises(ImproperlyConfigured, match="MQ_SOMETHING"):
        helper("MQ_SOMETHING", 1)


def test_env_helpers_parse_and_default(monkeypatch):
    monkeypatch.setenv("MQ_A", "42")
    monkeypatch.setenv("MQ_B", "2.5")
    monkeypatch.setenv("MQ_C", "Off")
    monkeypatch.delenv("MQ_MISSING", raising=False)
    assert (env_int("MQ_A", 0), env_float("MQ_B", 0), env_bool("MQ_C", True)) == (42, 2.5, False)
    assert env_str("MQ_MISSING", "fallback") == "fallback"


def test_healthz_answers_ok(client, zk_config, settings):
    from merritt_queue.project import runtime

    settings.ZK_HOSTS, settings.ZK_CHROOT = zk_config.hosts, zk_config.chroot
    runtime.close()
    try:
        response = client.get("/healthz")
    finally:
        runtime.close()
    assert response.status_code == 200 and response.json()["ok"] is True


def test_merritt_storage_without_its_urls_is_refused(settings):
    from merritt_queue.project.servicechecks import check_services

    settings.MQ_STORAGE = "merritt"
    settings.MERRITT_STORAGE_URL = "https://storage.example.org"
    settings.MERRITT_STORAGE_NODE = "9501"
    settings.MERRITT_STORAGE_FILE_URL = ""
    (error,) = check_services()
    assert error.id == "mq.E009" and "MERRITT_STORAGE_FILE_URL" in error.msg
    settings.MQ_STORAGE, settings.MQ_MINTER = "cloud", "ezid"
    ids = [e.msg.split("=")[0] for e in check_services()]
    assert ids == ["MQ_STORAGE", "EZID_USER/EZID_PASSWORD"]


def test_the_default_services_pass(settings):
    from merritt_queue.project.servicechecks import check_services

    assert check_services() == []


@pytest.mark.parametrize(
    "overrides",
    [
        {"MQ_NOTIFY_ATTEMPTS": 0},
        {"MQ_NOTIFY_TIMEOUT": 0},
        {"MQ_NOTIFY_BACKOFF": -1},
        {"MQ_NOTIFY_BACKOFF": 7200, "MQ_NOTIFY_BACKOFF_MAX": 3600},
        {"MQ_NOTIFY_MAIL_GATHER": -1},
    ],
)
def test_notification_settings_out_of_range_are_e023(overrides):
    with override_settings(**overrides):
        assert ids(checks.check_notify()) == ["mq.E023"]


@pytest.mark.parametrize("seconds", [0, 61, -5])
def test_a_window_check_period_out_of_range_is_e012(seconds):
    with override_settings(MQ_WINDOW_CHECK_SECONDS=seconds):
        assert ids(checks.check_window_check_seconds()) == ["mq.E012"]


def test_every_check_has_an_id_of_its_own():
    """Two parts of the project once both took mq.E070: a hint in the docs then named the
    wrong setting."""
    import ast
    from pathlib import Path

    found: dict[str, list[str]] = {}
    root = Path(__file__).resolve().parents[2]
    for path in root.glob("*/**/*.py"):
        if ".venv" in path.parts or "tests" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.keyword) and node.arg == "id":
                value = node.value
                if isinstance(value, ast.Constant) and str(value.value).startswith("mq."):
                    found.setdefault(value.value, []).append(str(path.relative_to(root)))
    assert found, "no check ids found"
    assert {i: where for i, where in found.items() if len(where) > 1} == {}


@pytest.mark.parametrize("limit", [0, -1, 1024])
def test_a_request_limit_below_djangos_form_limit_is_e080(limit):
    with override_settings(MQ_MAX_REQUEST_BYTES=limit):
        assert ids(checks.check_request_limit()) == ["mq.E080"]
    with override_settings(MQ_MAX_REQUEST_BYTES=4 * 1024**2):
        assert checks.check_request_limit() == []


@pytest.mark.parametrize("name", ["X_Forwarded_Proto", "X-Forwarded-Proto: https", "-x", "a b"])
def test_a_proxy_ssl_header_that_is_no_header_name_is_e081(name):
    with override_settings(SECURE_PROXY_SSL_HEADER_NAME=name):
        assert ids(checks.check_proxy_ssl_header()) == ["mq.E081"]


@pytest.mark.parametrize("name", ["", "X-Forwarded-Proto", "X-Scheme"])
def test_a_proxy_ssl_header_name_passes(name):
    with override_settings(SECURE_PROXY_SSL_HEADER_NAME=name):
        assert checks.check_proxy_ssl_header() == []


@pytest.mark.parametrize("wait", [0, -1, 61])
def test_a_web_zookeeper_wait_out_of_bounds_is_e082(wait):
    with override_settings(MQ_WEB_ZK_WAIT=wait):
        assert ids(checks.check_web_zk_wait()) == ["mq.E082"]


@pytest.mark.parametrize("seconds", [-1, float("nan"), float("inf")])
def test_a_step_cut_off_bound_that_is_not_a_duration_is_e084(seconds):
    with override_settings(MQ_STEP_CUT_OFF_SECONDS=seconds):
        assert ids(checks.check_step_cut_off()) == ["mq.E084"]


@pytest.mark.parametrize("seconds", [0, 10, 120.5])
def test_a_step_cut_off_bound_of_seconds_passes(seconds):
    with override_settings(MQ_STEP_CUT_OFF_SECONDS=seconds):
        assert checks.check_step_cut_off() == []


def test_merritt_api_needs_merritt_storage_and_inventory_settings_whatever_mq_storage_says(
    settings,
):
    from merritt_queue.project.servicechecks import check_services

    settings.MQ_STORE_RECORD, settings.MQ_STORAGE = "merritt-api", "local"
    settings.MERRITT_STORAGE_URL = "https://storage.example.org/store"
    settings.MERRITT_STORAGE_NODE = "9501"
    settings.MERRITT_STORAGE_FILE_URL = "https://ingest.example.org/work/"
    settings.MERRITT_INVENTORY_URL = ""
    (error,) = check_services()
    assert error.id == "mq.E009"
    assert error.msg.startswith("MERRITT_INVENTORY_URL='' is not usable")
    assert "MQ_STORE_RECORD=merritt-api" in error.msg
    settings.MERRITT_INVENTORY_URL = "https://inventory.example.org/inventory"
    assert check_services() == []
    settings.MQ_STORAGE, settings.MERRITT_STORAGE_URL = "merritt", ""
    (error,) = check_services()  # named once, though both modes need it
    assert error.msg.startswith("MERRITT_STORAGE_URL='' is not usable")
    # Storage fetches the files from the signed content URLs, or the unsigned folder.
    settings.MQ_STORAGE = "local"
    settings.MERRITT_STORAGE_URL = "https://storage.example.org/store"
    settings.MERRITT_STORAGE_FILE_URL = ""
    (error,) = check_services()
    assert error.msg.startswith("MQ_CONTENT_BASE_URL='' is not usable")
    settings.MQ_CONTENT_BASE_URL = "https://queue.example.org"
    assert check_services() == []


@pytest.mark.django_db
def test_a_profile_in_merritt_api_mode_needs_the_settings_too(settings):
    from batches.models import Profile
    from merritt_queue.project.servicechecks import check_merritt_api_profiles

    settings.MERRITT_INVENTORY_URL = ""
    Profile.objects.create(name="api", collection="api", minter_shoulder="ark:/99999/fk4")
    assert check_merritt_api_profiles(databases=["default"]) == []
    Profile.objects.filter(name="api").update(store_record="merritt-api")
    ids = [e.msg.split("=")[0] for e in check_merritt_api_profiles(databases=["default"])]
    assert "MERRITT_INVENTORY_URL" in ids
    assert (
        "profile 'api' uses merritt-api" in check_merritt_api_profiles(databases=["default"])[0].msg
    )
    assert check_merritt_api_profiles() == []  # not without a database named


@pytest.mark.parametrize(
    "name,value", [("MQ_BREAKER_THRESHOLD", -1), ("MQ_BREAKER_COOL_OFF_SECONDS", 0)]
)
def test_a_breaker_setting_that_cannot_work_is_named(settings, name, value):
    from merritt_queue.project.servicechecks import check_services

    setattr(settings, name, value)
    (error,) = check_services()
    assert error.id == "mq.E009" and error.msg.startswith(f"{name}={value!r} is not usable")
