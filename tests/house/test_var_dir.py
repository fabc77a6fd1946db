"""MQ_VAR_DIR: every file the queue writes of its own (the SQLite mirror, static files, the
work directory, the local minter and storage, the metrics' counts, mail) lies under one
directory, settable, so that an installed wheel writes nothing into its site-packages."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from django.conf import settings
from django.test import override_settings

from merritt_queue.project import checks, vardir

REPO = Path(__file__).resolve().parents[2]

# Printed by a fresh interpreter: settings are read once, at import.
PATHS = """
import json
from merritt_queue.project import settings as s
print(json.dumps({
    "VAR_DIR": str(s.VAR_DIR),
    "STATIC_ROOT": str(s.STATIC_ROOT),
    "database": str(s.DATABASES["default"]["NAME"]),
    "MQ_WORK_DIR": s.MQ_WORK_DIR,
    "MQ_MINTER_DIR": s.MQ_MINTER_DIR,
    "MQ_STORAGE_ROOT": s.MQ_STORAGE_ROOT,
    "MQ_METRICS_DIR": s.MQ_METRICS_DIR,
    "EMAIL_FILE_PATH": str(s.EMAIL_FILE_PATH),
}))
"""
# Settings that would move a path away from the var directory, and so must not be set here.
MOVERS = (
    "DATABASE_URL",
    "MQ_WORK_DIR",
    "MQ_MINTER_DIR",
    "MQ_STORAGE_ROOT",
    "MQ_METRICS_DIR",
    "PROMETHEUS_MULTIPROC_DIR",
    "MQ_VAR_DIR",
    "DJANGO_SETTINGS_MODULE",
)


def settings_paths(**env: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if k not in MOVERS} | env
    out = subprocess.run(
        [sys.executable, "-c", PATHS], cwd=REPO, env=clean, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def site_packages() -> Path:
    return Path(sysconfig.get_paths()["purelib"])


def test_every_path_of_the_queue_lies_under_mq_var_dir(tmp_path):
    paths = settings_paths(MQ_VAR_DIR=str(tmp_path / "state"))
    assert paths.pop("VAR_DIR") == str(tmp_path / "state")
    assert {k: v for k, v in paths.items() if not v.startswith(f"{tmp_path}/state/")} == {}
    assert (tmp_path / "state" / "static").is_dir()


def test_without_mq_var_dir_a_checkout_keeps_its_own_var():
    assert settings_paths()["VAR_DIR"] == str(REPO / "var")


def test_the_checkouts_var_passes():
    assert vardir.check_var_dir() == []


def test_a_var_dir_inside_site_packages_is_e100():
    with override_settings(VAR_DIR=site_packages() / "var"):
        (error,) = vardir.check_var_dir()
    assert error.id == "mq.E100"
    assert "MQ_VAR_DIR" in error.msg and "site-packages" in error.msg.replace("\\", "/")
    assert "MQ_VAR_DIR" in error.hint


def test_a_path_of_its_own_inside_site_packages_is_e100_too(tmp_path):
    with override_settings(MQ_WORK_DIR=str(site_packages() / "work")):
        (error,) = vardir.check_var_dir()
    assert error.id == "mq.E100" and "MQ_WORK_DIR" in error.msg


@pytest.mark.parametrize("path", ["var", "", "./state"])
def test_a_relative_var_dir_is_e100(path):
    with override_settings(VAR_DIR=Path(path)):
        (error,) = vardir.check_var_dir()
    assert error.id == "mq.E100" and "absolute" in error.msg


def test_the_var_dir_check_is_registered():
    from django.core.checks import run_checks

    with override_settings(VAR_DIR=site_packages() / "var"):
        assert "mq.E100" in [m.id for m in run_checks(tags=[checks.TAG])]


def test_makedirs_creates_nothing_inside_an_install(tmp_path):
    inside = site_packages() / "mq-var-dir-probe" / "static"
    assert vardir.makedirs(inside) is False
    assert not inside.parent.exists()
    assert vardir.makedirs(tmp_path / "a" / "b") is True
    assert (tmp_path / "a" / "b").is_dir()


def test_settings_name_the_var_dir():
    assert settings.VAR_DIR.is_absolute()
