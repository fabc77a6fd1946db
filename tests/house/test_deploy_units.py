"""The example systemd units under deploy/systemd/ stay true to the code and to systemd."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from django.core.management import get_commands

from merritt_queue.core.lanes import is_reserved
from merritt_queue.core.queues import all_queue_names, reserved_queue_names

REPO = Path(__file__).resolve().parents[2]
UNITS = REPO / "deploy" / "systemd"
INSTALL_DIR = "/opt/merritt-queue"


def unit_files() -> list[Path]:
    return sorted(p for p in UNITS.iterdir() if p.suffix in (".service", ".timer"))


def exec_lines(path: Path) -> list[str]:
    return re.findall(r"^Exec\w+=(.*)$", path.read_text(), re.MULTILINE)


def test_the_worker_template_serves_every_queue_by_default():
    text = (UNITS / "mq-worker@.service").read_text()
    match = re.search(r'^Environment="MQ_WORKER_QUEUES=([^"]*)"$', text, re.MULTILINE)
    assert match, "mq-worker@.service sets no default MQ_WORKER_QUEUES"
    assert match[1].split() == all_queue_names()


def test_the_reserved_worker_template_serves_the_reserved_queues():
    """A reserved worker never takes a large job's Downloading (``core.lanes``)."""
    text = (UNITS / "mq-worker-reserved@.service").read_text()
    match = re.search(r'^Environment="MQ_WORKER_QUEUES=([^"]*)"$', text, re.MULTILINE)
    assert match, "mq-worker-reserved@.service sets no MQ_WORKER_QUEUES"
    assert match[1].split() == reserved_queue_names()
    assert is_reserved(match[1].split())


def test_every_unit_runs_a_command_that_exists():
    commands = get_commands()
    seen = set()
    for path in unit_files():
        for line in exec_lines(path):
            if "manage.py" in line:
                name = line.split("manage.py", 1)[1].split()[0]
                assert name in commands, f"{path.name}: manage.py {name} does not exist"
                seen.add(name)
            elif "gunicorn" in line:
                assert line.split()[-1] == "merritt_queue.project.wsgi"
                seen.add("gunicorn")
    assert seen == {"gunicorn", "run_dispatcher", "reconcile", "rqworker", "cleanup", "check_tree"}


def test_every_service_reads_the_environment_file_and_each_timer_has_its_service():
    for path in unit_files():
        if path.suffix == ".service":
            assert "EnvironmentFile=/etc/merritt-queue/env\n" in path.read_text(), path.name
        else:
            assert (UNITS / f"{path.stem}.service").exists(), f"{path.name} has no service"


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze here")
def test_systemd_analyze_verify_finds_nothing(tmp_path):
    """The units, with the install paths pointed at this checkout, verified by systemd itself."""
    env_file = tmp_path / "env"
    env_file.write_text("")
    paths = []
    for path in unit_files():
        text = path.read_text().replace(INSTALL_DIR, str(REPO))
        text = text.replace("/etc/merritt-queue/", f"{tmp_path}/etc-")
        name = path.name.replace("@.", "@1.")  # a template is verified as one instance
        (tmp_path / name).write_text(text)
        paths.append(str(tmp_path / name))
    done = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", *paths],
        capture_output=True,
        text=True,
        timeout=120,
    )
    # Unknown keys and bad values are only warnings: any output at all is a finding.
    assert (done.returncode, done.stdout + done.stderr) == (0, "")


# --- the example alert rules name metrics that exist ---------------------------------------

RULES = REPO / "deploy" / "prometheus"
# Where a metric's name is written: the page every metric is listed on, and the code that
# makes the figures read at a scrape.
METRIC_SOURCES = (
    REPO / "docs" / "metrics.md",
    REPO / "metrics" / "collector.py",
    REPO / "metrics" / "foresight.py",
    REPO / "merritt_queue" / "core" / "metrics.py",
)


def rule_metric_names(text: str) -> set[str]:
    """The mq_* names in the rules' expressions (not in their words), a counter's or a
    histogram's suffix taken off."""
    exprs = re.findall(r"^\s+expr: *(.+)$", text, re.MULTILINE)
    names = set().union(*(re.findall(r"\b(mq_[a-z_]+)\b", e) for e in exprs))
    return {re.sub(r"_(total|bucket|sum|count)$", "", n) for n in names}


def test_every_alert_rule_names_a_metric_the_docs_or_the_collector_know():
    known = "\n".join(p.read_text() for p in METRIC_SOURCES)
    files = sorted(RULES.glob("*alerts*.yml"))
    assert files
    for path in files:
        names = rule_metric_names(path.read_text())
        assert names, path
        missing = {n for n in names if f"`{n}`" not in known and f'"{n}' not in known}
        assert not missing, f"{path.name} names metrics nobody exposes: {sorted(missing)}"


def test_the_stalled_jobs_rule_is_among_the_examples():
    text = (RULES / "merritt-queue-alerts.yml").read_text()
    assert "- alert: MqJobsStalled" in text
    assert "mq_jobs_stalled" in rule_metric_names(text)
