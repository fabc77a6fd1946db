"""Every management command of the project explains each of its options in ``--help``."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from django.core.management import get_commands, load_command_class

ROOT = Path(__file__).resolve().parents[2]
COMMON = {
    "help",
    "version",
    "verbosity",
    "settings",
    "pythonpath",
    "traceback",
    "no_color",
    "force_color",
    "skip_checks",
}


def project_commands() -> list[tuple[str, str]]:
    """(app, name) of the commands that live in this repository, not in Django or RQ."""
    found = []
    for name, app in sorted(get_commands().items()):
        module = Path(__import__(app, fromlist=["x"]).__file__).resolve()
        if ROOT in module.parents and ".venv" not in module.parts:
            found.append((app, name))
    return found


def test_the_project_has_its_commands():
    names = {name for _, name in project_commands()}
    assert {"submit", "reconcile", "cleanup", "check_tree", "run_dispatcher"} <= names


@pytest.mark.parametrize(("app", "name"), project_commands())
def test_every_option_of_a_command_is_described(app, name):
    command = load_command_class(app, name)
    parser = command.create_parser("manage.py", name)
    assert command.help, f"{name} has no description"
    for action in parser._actions:
        if action.dest in COMMON or action.help == argparse.SUPPRESS:
            continue
        assert action.help, f"manage.py {name} {'/'.join(action.option_strings)} has no help"
        spelled = [s for s in action.option_strings if s.startswith("--")]
        assert all(s == s.lower() and "_" not in s for s in spelled), spelled


def test_submit_spells_every_option_with_dashes_and_keeps_the_old_spelling_hidden():
    parser = load_command_class("batches", "submit").create_parser("manage.py", "submit")
    text = parser.format_help()
    assert "--batch-id" in text and "--batchID" not in text
    assert parser.parse_args(["--batchID", "x"]).batchID == "x"
    assert parser.parse_args(["--batch-id", "x"]).batchID == "x"


def test_a_dry_run_judges_as_submitting_does(settings, db):
    """It checked fields and rights only: a read-only queue, or a trusted caller naming
    on_behalf_of, said 'would submit'."""
    import pytest
    from django.core.management import CommandError, call_command

    settings.READ_ONLY = True
    with pytest.raises(CommandError, match="read-only"):
        call_command(
            "submit",
            "--profile",
            "demo_profile",
            "--type",
            "file",
            "--payload-url",
            "https://example.org/a.txt",
            "--dry-run",
        )
