"""``pip install .`` gives a project that runs: the wheel, installed into a fresh virtualenv
and run from outside the checkout, passes Django's checks, has its migrations, and loads
every template and static file from the install. With MQ_VAR_DIR outside the install it
writes nothing into its site-packages; without it, its checks refuse to start.

The fresh virtualenv sees the project venv's packages (Django, kazoo ...) through a ``.pth``
line, so nothing is downloaded; a ``.pth`` line adds the folder alone, not the editable
install its own ``.pth`` files point at the checkout.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
# What the wheel ships: the project package, every app of INSTALLED_APPS, and the rooms the
# apps import that are no app (the pipeline's steps, the door's ways in).
PRODUCT = (
    "merritt_queue",
    "pipeline",
    "door",
    "batches",
    "jobs",
    "inventory",
    "dashboard",
    "steering",
    "mirror",
    "notifications",
    "ui",
    "metrics",
    "access",
    "accessui",
)

# Run inside the installed project: where each part comes from, each template compiled.
PROBE = """
import json, sys
import django
from django.contrib.staticfiles import finders
from django.template.loader import get_template

django.setup()
names = json.loads(sys.argv[1])
print(json.dumps({
    "modules": {app: __import__(app).__file__ for app in names["apps"]},
    "templates": {n: str(get_template(n).origin.name) for n in names["templates"]},
    "static": {n: finders.find(n) for n in names["static"]},
}))
"""


def tracked() -> list[str]:
    """The checkout's files as a clean clone has them, with this working tree's changes."""
    out = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [name for name in out if (REPO / name).is_file()]


def shipped(files: list[str]) -> set[str]:
    return {
        name
        for name in files
        if name.split("/")[0] in PRODUCT and "__pycache__" not in name and "/tests/" not in name
    }


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path, list[str], Path]:
    """A wheel built from a copy of the checkout, installed into a fresh virtualenv."""
    tmp = tmp_path_factory.mktemp("wheel")
    files = tracked()
    for name in files:
        (tmp / "src" / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, tmp / "src" / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "-w", tmp / "dist", tmp / "src"], check=True)
    (wheel,) = (tmp / "dist").glob("*.whl")

    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(purelib, "project-venv.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([*pip, "--python", python, "install", "--no-deps", wheel], check=True)
    return wheel, python, files, Path(purelib)


# Settings that name a path of their own, which the runs leave to MQ_VAR_DIR.
PATH_SETTINGS = (
    "DATABASE_URL",
    "MQ_WORK_DIR",
    "MQ_MINTER_DIR",
    "MQ_STORAGE_ROOT",
    "MQ_METRICS_DIR",
    "PROMETHEUS_MULTIPROC_DIR",
    "MQ_VAR_DIR",
)


def run(
    python: Path, *args: str, cwd: Path, var_dir: Path | None = None, unset: bool = False
) -> subprocess.CompletedProcess:
    """``python args`` as an installed site runs it: every path under MQ_VAR_DIR (by
    default the run's own ``var``; ``unset``: none), no path setting else."""
    drop = ("PYTHONPATH", "DJANGO_SETTINGS_MODULE", *PATH_SETTINGS)
    env = {k: v for k, v in os.environ.items() if k not in drop}
    # DEBUG accepts the development SECRET_KEY.
    env |= {"DEBUG": "true", "DJANGO_SETTINGS_MODULE": "merritt_queue.project.settings"}
    if not unset:
        env["MQ_VAR_DIR"] = str(var_dir or cwd / "var")
    return subprocess.run([python, *args], cwd=cwd, env=env, capture_output=True, text=True)


def files_under(root: Path) -> dict[str, int]:
    """Every file under ``root`` and its modification time, but Python's own byte-code
    caches, which an import may write wherever a module lies."""
    return {
        str(p.relative_to(root)): p.stat().st_mtime_ns
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def test_the_wheel_holds_every_app_module_template_static_file_and_migration(installed):
    wheel, _, files, _ = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = sorted(shipped(files) - names)
    assert missing == []
    assert {n.split("/")[0] for n in names if "dist-info" not in n} == set(PRODUCT)


def test_the_installed_project_passes_its_checks_from_outside_the_checkout(installed, tmp_path):
    _, python, _, _ = installed
    checked = run(python, "-m", "django", "check", cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert "no issues" in checked.stdout
    # Every app's migrations came along: none is missing for its models.
    migrations = run(python, "-m", "django", "makemigrations", "--check", "--dry-run", cwd=tmp_path)
    assert migrations.returncode == 0, migrations.stdout + migrations.stderr


def test_the_installed_project_loads_its_templates_and_static_files(installed, tmp_path):
    _, python, files, _ = installed
    names: dict[str, list[str]] = {"templates": [], "static": []}
    for name in shipped(files):
        for kind in ("templates", "static"):
            if f"/{kind}/" in name:
                names[kind].append(name.split(f"/{kind}/", 1)[1])
    names["apps"] = list(PRODUCT)
    probed = run(python, "-c", PROBE, json.dumps(names), cwd=tmp_path)
    assert probed.returncode == 0, probed.stderr
    found = json.loads(probed.stdout)
    venv = str(python.parent.parent)
    where = [*found["modules"].values(), *found["templates"].values(), *found["static"].values()]
    assert len(found["templates"]) > 50 and len(found["static"]) >= 3
    assert [w for w in where if not (w or "").startswith(venv)] == []


def test_the_installed_project_writes_under_mq_var_dir_and_nothing_into_site_packages(
    installed, tmp_path
):
    _, python, _, purelib = installed
    before = files_under(purelib)
    var = tmp_path / "state"
    for command in (["migrate", "--noinput"], ["collectstatic", "--noinput"]):
        done = run(python, "-m", "django", *command, cwd=tmp_path, var_dir=var)
        assert done.returncode == 0, done.stdout + done.stderr
    assert (var / "db.sqlite3").is_file()
    assert (var / "static" / "admin").is_dir() and any((var / "static").rglob("*.css"))
    assert files_under(purelib) == before
    assert not (purelib / "var").exists()


def test_the_installed_project_without_mq_var_dir_refuses_to_start(installed, tmp_path):
    """Its default, ``var`` beside the code, would lie inside site-packages."""
    _, python, _, purelib = installed
    before = files_under(purelib)
    checked = run(python, "-m", "django", "check", cwd=tmp_path, unset=True)
    assert checked.returncode != 0
    assert "mq.E100" in checked.stderr and "MQ_VAR_DIR" in checked.stderr
    assert files_under(purelib) == before
    assert not (purelib / "var").exists()
