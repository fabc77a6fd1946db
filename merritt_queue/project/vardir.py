"""Where the queue keeps the files of its own (``MQ_VAR_DIR``), and the rule that none of
them lies inside an installed package: an upgrade or a reinstall replaces site-packages
whole, and would take the mirror database and the work directory with it.

A checkout keeps them in its own ``var/`` as before; an installed wheel has no such place,
so its default lands inside site-packages, where the settings create nothing and check
``mq.E100`` stops every command until MQ_VAR_DIR names a directory outside.
"""

from __future__ import annotations

import site
import sysconfig
from pathlib import Path

from django.conf import settings
from django.core import checks


def _install_dirs() -> list[Path]:
    """The directories this interpreter installs packages into."""
    paths = sysconfig.get_paths()
    found = [paths["purelib"], paths["platlib"], *site.getsitepackages()]
    if site.ENABLE_USER_SITE:
        found.append(site.getusersitepackages())
    return [Path(p).resolve() for p in dict.fromkeys(found)]


def inside_install(path: Path | str) -> Path | None:
    """The installed packages' directory that holds ``path``, if any."""
    where = Path(path).resolve()
    for root in _install_dirs():
        if where == root or root in where.parents:
            return root
    return None


def makedirs(path: Path | str) -> bool:
    """Create ``path`` with its parents, unless it lies inside an install (check mq.E100
    says so) or the file system refuses; whether it now exists."""
    if inside_install(path):
        return False
    try:
        Path(path).mkdir(parents=True, exist_ok=True)
    except OSError:  # a read-only file system: the checks of each path say so
        return False
    return True


def _own_paths() -> dict[str, str]:
    """The settings naming a file or directory the queue writes, by the variable that sets
    each (all under MQ_VAR_DIR unless set apart)."""
    out = {
        "MQ_VAR_DIR": str(settings.VAR_DIR),
        "MQ_WORK_DIR": str(settings.MQ_WORK_DIR),
        "MQ_MINTER_DIR": str(settings.MQ_MINTER_DIR),
        "MQ_STORAGE_ROOT": str(settings.MQ_STORAGE_ROOT),
        "MQ_METRICS_DIR": str(settings.MQ_METRICS_DIR),
    }
    database = settings.DATABASES["default"]
    if database["ENGINE"].endswith("sqlite3") and database["NAME"]:
        out["DATABASE_URL"] = str(database["NAME"])
    return {name: path for name, path in out.items() if path}


def _problems() -> list[tuple[str, str]]:
    """What is wrong with where the queue would write, as (message, hint)."""
    if not Path(settings.VAR_DIR).is_absolute():
        return [
            (
                f"MQ_VAR_DIR={str(settings.VAR_DIR)!r} is not an absolute path.",
                "Set MQ_VAR_DIR to an absolute path, e.g. /var/lib/merritt-queue: a relative "
                "one would move with the directory each process starts in.",
            )
        ]
    inside = {
        name: (path, root)
        for name, path in _own_paths().items()
        if (root := inside_install(path)) is not None
    }
    if "MQ_VAR_DIR" in inside:  # one error for what follows it, not one for each
        var = Path(settings.VAR_DIR).resolve()
        inside = {
            name: found
            for name, found in inside.items()
            if name == "MQ_VAR_DIR" or var not in Path(found[0]).resolve().parents
        }
    return [
        (
            f"{name}={path!r} lies inside the installed packages ({root}): an upgrade or "
            "reinstall of the queue would remove what it holds.",
            "Set MQ_VAR_DIR to a directory outside the install, e.g. /var/lib/merritt-queue "
            "(an installed wheel has no var/ of its own)"
            + ("." if name == "MQ_VAR_DIR" else f", and {name} there or unset."),
        )
        for name, (path, root) in inside.items()
    ]


def check_var_dir(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    return [checks.Error(message, hint=hint, id="mq.E100") for message, hint in _problems()]
