"""A new, empty PostgreSQL database for a test module, dropped afterwards.

On the server the run's ``DATABASE_URL`` names when it is a PostgreSQL URL, else on a
throw-away cluster (``scripts/services.sh pg-start``) stopped and removed at the end.
``make test`` installs Debian's PostgreSQL first; elsewhere, without its binaries, the
test is skipped rather than failed.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql

from harness.procs import REPO
from harness.services import free_port

SERVICES = REPO / "scripts" / "services.sh"


def _services(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(SERVICES), *args], capture_output=True, text=True, timeout=180
    )


def _start_cluster(directory: Path) -> int:
    """A throw-away PostgreSQL cluster in ``directory``; its port."""
    errors = []
    for _ in range(3):  # another program may take the free port before the server does
        port = free_port()
        done = _services("pg-start", str(directory), str(port))
        if done.returncode == 0:
            return port
        errors.append(done.stdout + done.stderr)
    raise AssertionError("could not start PostgreSQL:\n" + "\n".join(errors))


@contextmanager
def new_database(prefix: str) -> Iterator[str]:
    """The URL of a new database named ``<prefix>_<random>``."""
    given = os.environ.get("DATABASE_URL", "")
    cluster = None
    if given.startswith(("postgres://", "postgresql://")):
        server = given
    elif not glob.glob("/usr/lib/postgresql/*/bin/initdb"):
        pytest.skip("no PostgreSQL binaries (/usr/lib/postgresql/*/bin)")
    else:
        base = os.environ.get("MQ_TEST_TMP") or tempfile.gettempdir()
        cluster = Path(tempfile.mkdtemp(prefix="postgres-", dir=base))
        server = f"postgresql://postgres@127.0.0.1:{_start_cluster(cluster)}/postgres"
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    try:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        try:
            yield urlunsplit(urlsplit(server)._replace(path=f"/{name}"))
        finally:
            with psycopg.connect(server, autocommit=True) as conn:
                conn.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
                )
    finally:
        if cluster is not None:
            stopped = _services("pg-stop", str(cluster))
            shutil.rmtree(cluster, ignore_errors=True)
            assert stopped.returncode == 0, stopped.stdout + stopped.stderr
