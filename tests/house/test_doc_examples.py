"""The ``manage.py`` examples of README.md and docs/usage.md run as written.

Each is shown as the command a reader pastes on the demo's host, ``make manage ARGS="..."``
(``make manage`` runs ``manage.py`` with the demo's settings; a bare ``python manage.py``
has neither Django nor them). Each example is read from the text (inline code and shell
blocks alike), its placeholders (URL, PATH, FILE) filled in, and given to the command's own
parser; the submit examples then run with ``--dry-run`` against the test database, so an
example the command would refuse ("submitter is required") fails here, not for a reader.
tests/house/test_doc_commands.py pastes them into a shell.
"""

from __future__ import annotations

import io
import re
import shlex
import shutil
from pathlib import Path

import pytest
from django.core.management import (
    CommandError,
    call_command,
    get_commands,
    load_command_class,
)

from batches.models import Profile
from door import manifest_door

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = ("README.md", "docs/usage.md")
PLACEHOLDERS = {"URL": "http://127.0.0.1:8001/4blocks.checkm", "NAME": "someone"}
# What the demo's content server (127.0.0.1:8001) serves: Merritt's sample files.
SAMPLES = ROOT / "tests" / "fixtures" / "merritt-sample-files"


MANAGE = re.compile(r'make manage ARGS="([^"]*)"')


def commands(text: str) -> list[str]:
    """Every ``make manage ARGS="..."`` as shown: inline code, and shell lines joined at ``\\``
    as the shell joins them."""
    found = []
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #")[0].strip()
            if MANAGE.match(line):
                found.append(line)
    found += [span.strip() for span in re.findall(r"`(make manage ARGS=[^`\n]*)`", text)]
    return found


def examples(text: str) -> list[str]:
    """What each shown command gives ``manage.py``."""
    return [" ".join(MANAGE.match(c).group(1).split()) for c in commands(text)]


def all_examples() -> list[tuple[str, str]]:
    return [(doc, e) for doc in DOCUMENTS for e in examples((ROOT / doc).read_text())]


def argv(example: str, tmp_path: Path) -> list[str]:
    payload = tmp_path / "payload.txt"
    payload.write_text("hello\n")
    words = shlex.split(re.sub(r"\[([^\]]*)\]", r"\1", example))  # [--repair]: the option
    return [str(payload) if w in ("PATH", "FILE") else PLACEHOLDERS.get(w, w) for w in words]


def test_no_document_shows_a_bare_manage_py_command():
    """``python manage.py ...`` pasted on the demo's host finds no Django, and the venv's
    python stops on mq.E030 without the demo's DEBUG (issue 32)."""
    for doc in DOCUMENTS:
        text = (ROOT / doc).read_text()
        bare = re.findall(r"(?m)^\s*(?:\S*python3? )?manage\.py \S+", text)
        bare += re.findall(r"`((?:\S*python3? )manage\.py [^`]*)`", text)
        assert not bare, f'{doc} shows {bare}: show make manage ARGS="..."'


def test_the_documents_hold_examples():
    names = {e.split()[0] for _, e in all_examples()}
    assert {"submit", "check_tree", "reconcile", "cleanup"} <= names


@pytest.mark.parametrize(("doc", "example"), all_examples())
def test_an_example_is_a_command_with_options_it_accepts(doc, example, tmp_path):
    name, *args = argv(example, tmp_path)
    assert name in get_commands(), f"{doc}: no command {name}"
    parser = load_command_class(get_commands()[name], name).create_parser("manage.py", name)
    if "--help" in args:
        assert parser.format_help()
        return
    try:
        parser.parse_args(args)
    except (SystemExit, CommandError):
        pytest.fail(f"{doc}: manage.py {example} is refused by the command's own options")


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("doc", "example"),
    [(d, e) for d, e in all_examples() if e.startswith("submit ") and "--help" not in e],
)
def test_a_submit_example_would_be_accepted(doc, example, tmp_path, monkeypatch):
    monkeypatch.setattr(manifest_door, "door_fetcher", lambda seconds: DemoContent())
    Profile.objects.create(name="demo", collection="demo", minter_shoulder="ark:/99999/fk4")
    name, *args = argv(example, tmp_path)
    out = io.StringIO()
    call_command(name, *args, "--dry-run", stdout=out)
    assert "would submit" in out.getvalue()


def test_the_sample_answer_ids_are_those_of_a_fresh_demo():
    """usage.md's first submission (``my-1``) after ``make demo`` gets the next batch id
    after the demo's batches, and its one job the next job id after the demo's jobs."""
    from batches.management.commands import load_demo
    from merritt_queue.deposit.manifest import parse_manifest

    demo = load_demo.DEMO_BATCHES + load_demo.DEMO_UPDATES
    per_row = {"single-file-batch-manifest", "batch-manifest", "container-batch-manifest"}
    jobs = sum(
        len(parse_manifest((load_demo.SAMPLES / name).read_bytes()).rows) if kind in per_row else 1
        for _, kind, name, _, _ in demo
    )
    # Batch ids count from 0, job ids from 1 (a fresh demo's first job is jid0000000001).
    bid, jid = f"bid{len(demo):010d}", f"jid{jobs + 1:010d}"
    usage = (ROOT / "docs" / "usage.md").read_text()
    assert f'{{"batch_id": "{bid}", "batchID": "my-1"' in usage
    shown = set(re.findall(r"\b(?:bid|jid)\d{10}\b", usage))
    assert shown == {bid, jid}, f"usage.md shows {sorted(shown)}; a fresh demo gives {bid}, {jid}"


class DemoContent:
    """The demo's content server, at the door's fetch seam: a submit example's manifest link
    is read at the door (door.manifest_door), and the demo serves the sample files."""

    def download(self, url: str, dest: Path, **_) -> None:
        assert url.startswith("http://127.0.0.1:8001/"), url
        shutil.copyfile(SAMPLES / url.rsplit("/", 1)[-1], dest)
