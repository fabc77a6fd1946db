"""An edited job's new values checked at the door, exactly as a submission's fields are, each
problem kept with the field it is about so that the form shows it there; and the digest
algorithm offered as a choice of those the project supports.

Used by the edit of one job (``steering.actions.editing``) and of a selection
(``steering.actions.bulkedit``): a URL an operator types, or one a prefix replacement makes,
meets the same checks.
"""

from __future__ import annotations

from django import forms
from django.conf import settings

from merritt_queue.core import jobparams
from merritt_queue.core.records import JobRecord
from merritt_queue.deposit.digest import SUPPORTED, check_digest_format, normalise_algorithm
from merritt_queue.deposit.fields import field_problems, url_problems
from merritt_queue.services.errors import FetchError
from merritt_queue.services.netpolicy import check_url

# field -> what is wrong with the value given for it
Problems = dict[str, list[str]]


class AlgorithmField(forms.ChoiceField):
    """The digest algorithms the project supports, as a choice; any spelling a submission
    accepts (``SHA-256``) is taken as its name (``sha256``)."""

    def to_python(self, value):
        value = super().to_python(value).strip()
        try:
            return normalise_algorithm(value) if value else ""
        except ValueError:
            return value  # refused as "not one of the choices"


def algorithm_choices(current: str) -> list[tuple[str, str]]:
    """None, each supported algorithm, and what the job carries when it is none of them (so
    that leaving it as shown changes nothing)."""
    choices = [("", "(none)"), *((name, name) for name in SUPPORTED)]
    try:
        normalise_algorithm(current)
    except ValueError:
        if current:
            choices.append((current, f"{current} (as the job has it; not supported)"))
    return choices


def same_algorithm(before: str, after: str) -> bool:
    """Whether two spellings name one algorithm (``SHA-256`` as a Merritt job carries it, and
    ``sha256`` as the form offers it): choosing it again is no change."""
    try:
        return normalise_algorithm(before) == normalise_algorithm(after)
    except ValueError:
        return before == after


def door_problems(job: JobRecord, after: dict) -> Problems:
    """Why the changed values of ``after`` may not be written, by field: the submission's
    checks (lengths, control characters, URL scheme and credentials, digest format per
    algorithm) and the network policy the workers fetch under, asked now. Normalises
    ``after["digest_type"]`` as a submission's; a digest algorithm only respelled is kept
    as the job has it."""
    before = jobparams.current(job.configuration, job.identifiers, job.metadata)
    if after.get("digest_type") and same_algorithm(before["digest_type"], after["digest_type"]):
        after["digest_type"] = before["digest_type"]
    changed = jobparams.changes_of(before, after)
    problems: Problems = {}
    # A corrected row's file name and size were judged by the manifest's own checks.
    for name in (n for n in changed if n in jobparams.FIELDS):
        if found := field_problems({name: after[name]}):
            problems[name] = found
    if "payload_url" in changed and "payload_url" not in problems:
        if bad := url_problem(after["payload_url"]):
            problems["payload_url"] = [bad]
    if {"digest_type", "digest_value"} & changed.keys():
        payload_type = (job.configuration or {}).get("payload_type")
        for name, problem in digest_problems(after, payload_type).items():
            problems.setdefault(name, []).append(problem)
    return problems


def url_problem(url: str) -> str | None:
    """Why ``url`` may not be a job's payload URL: empty, not one a depositor may give, or
    one the workers would refuse to fetch (a file: URL, a private or loopback address)."""
    if not url:
        return "the payload URL cannot be emptied"
    if found := url_problems(url):
        return found[0]
    try:
        check_url(
            url, allow_loopback=settings.MQ_ALLOW_LOOPBACK, allow_private=settings.MQ_ALLOW_PRIVATE
        )
    except FetchError as e:
        return str(e)
    return None


def digest_problems(after: dict, payload_type: str | None) -> dict[str, str]:
    """The digest's problems by field: both halves or neither, for a single file or container
    only, a supported algorithm, a value in its format. Normalises ``after["digest_type"]``."""
    alg, value = after.get("digest_type", ""), after.get("digest_value", "")
    if not alg and not value:
        return {}
    if not alg:
        return {"digest_type": "choose the algorithm of this digest value"}
    if not value:
        return {"digest_value": f"give the {alg} value, or clear the algorithm too"}
    if payload_type not in ("file", "container"):
        return {"digest_type": "a digest applies to a single file or container job only"}
    try:
        after["digest_type"] = alg = normalise_algorithm(alg)
    except ValueError as e:
        return {"digest_type": str(e)}
    problem = check_digest_format(alg, value)
    return {"digest_value": problem} if problem else {}
