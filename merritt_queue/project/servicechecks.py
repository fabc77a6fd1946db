"""System checks of the outside services a job reaches (EZID, storage, Merritt's storage and
inventory) and of who stores and records (``stepowners``): the settings each mode needs, and
the profiles that name a mode or lack an owner's ARK. Those that read the profiles run only
where Django names a database (``migrate``, ``check --database``)."""

from __future__ import annotations

from django.conf import settings
from django.core import checks
from django.db import DatabaseError

from ..core import stepowners
from ..services.ezid import target_pattern_problem


def check_services(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    problems: list[tuple[str, object, str]] = []
    if settings.MQ_MINTER not in ("local", "ezid"):
        problems.append(("MQ_MINTER", settings.MQ_MINTER, "local or ezid"))
    if settings.MQ_STORAGE not in ("local", "merritt"):
        problems.append(("MQ_STORAGE", settings.MQ_STORAGE, "local or merritt"))
    if settings.MQ_STORE_RECORD not in stepowners.MODES:
        problems.append(
            ("MQ_STORE_RECORD", settings.MQ_STORE_RECORD, " or ".join(stepowners.MODES))
        )
    if settings.MQ_STORAGE == "merritt":
        needed = ["MERRITT_STORAGE_URL", "MERRITT_STORAGE_NODE"]
        if not settings.MQ_CONTENT_BASE_URL:  # the signed content URLs replace it
            needed.append("MERRITT_STORAGE_FILE_URL")
        for name in needed:
            if not getattr(settings, name):
                problems.append((name, "", "set when MQ_STORAGE=merritt"))
    if settings.MQ_MINTER == "ezid" and not (settings.EZID_USER and settings.EZID_PASSWORD):
        problems.append(("EZID_USER/EZID_PASSWORD", "", "set when MQ_MINTER=ezid"))
    for name in (
        "MERRITT_INVENTORY_TIMEOUT",
        "MERRITT_INVENTORY_RETRY_SECONDS",
        "MERRITT_STORAGE_RETRY_SECONDS",
        "MQ_BREAKER_COOL_OFF_SECONDS",
    ):
        if not getattr(settings, name) > 0:
            problems.append((name, getattr(settings, name), "a positive number of seconds"))
    if settings.MQ_BREAKER_THRESHOLD < 0:
        problems.append(
            ("MQ_BREAKER_THRESHOLD", settings.MQ_BREAKER_THRESHOLD, "0 (off) or more failures")
        )
    if settings.MQ_STORE_RECORD == stepowners.MERRITT_API:
        problems += merritt_api_problems("MQ_STORE_RECORD=merritt-api")
    return _service_errors(problems)


MERRITT_API_SETTINGS = ("MERRITT_STORAGE_URL", "MERRITT_INVENTORY_URL")


def merritt_api_problems(why: str) -> list[tuple[str, object, str]]:
    """What a merritt-api job would miss: Merritt storage's URL (it stores there whatever
    MQ_STORAGE says, which keeps deciding for local jobs, on the profile's own numeric
    node), Merritt inventory's URL, and where storage fetches the files: the signed
    ``MQ_CONTENT_BASE_URL``, else the unsigned ``MERRITT_STORAGE_FILE_URL``."""
    problems: list[tuple[str, object, str]] = [
        (name, "", f"set when {why}")
        for name in MERRITT_API_SETTINGS
        if not getattr(settings, name)
    ]
    signed = stepowners.content_base_problem(settings.MQ_CONTENT_BASE_URL) is None
    if not signed and not settings.MERRITT_STORAGE_FILE_URL:
        problems.append(("MQ_CONTENT_BASE_URL", "", f"set when {why}"))
    return problems


def check_merritt_api_profiles(app_configs=None, databases=None, **kwargs):
    """A profile in merritt-api mode needs the same settings as the site's mode. It reads the
    database, so Django runs it only where one is named (``migrate``, ``check --database``)."""
    if not databases:
        return []
    from django.db import DatabaseError

    from batches.models import Profile

    try:
        names = list(
            Profile.objects.filter(store_record=stepowners.MERRITT_API).values_list(
                "name", flat=True
            )
        )
    except DatabaseError:  # before the first migrate: no profiles yet
        return []
    if not names:
        return []
    return _service_errors(merritt_api_problems(f"profile {names[0]!r} uses merritt-api"))


def _service_errors(problems: list[tuple[str, object, str]]) -> list[checks.CheckMessage]:
    """One error a setting, for the first reason found."""
    problems = list(
        {name: (name, value, need) for name, value, need in reversed(problems)}.values()
    )
    problems.reverse()
    return [
        checks.Error(
            f"{name}={value!r} is not usable: it must be {need}.",
            hint="A job would fail at that step; see the README's configuration table.",
            id="mq.E009",
        )
        for name, value, need in problems
    ]


def _merritt_modes_in_use(databases) -> list[str]:
    """Who uses a Merritt mode: the site's default, and (when the check may read the
    database) each profile that names one."""
    used = []
    if settings.MQ_STORE_RECORD in stepowners.MERRITT_MODES:
        used.append(f"MQ_STORE_RECORD={settings.MQ_STORE_RECORD}")
    if databases:
        from batches.models import Profile

        try:
            names = Profile.objects.filter(store_record__in=stepowners.MERRITT_MODES)
            used += [f"profile {p.name} ({p.store_record})" for p in names]
        except DatabaseError:
            pass  # not migrated yet: the site's setting is what is known
    return used


def check_content_base_url(app_configs=None, databases=None, **kwargs) -> list:
    used = _merritt_modes_in_use(databases)
    problem = stepowners.content_base_problem(settings.MQ_CONTENT_BASE_URL)
    if not used or problem is None:
        return []
    return [
        checks.Error(
            f"{problem}, and Merritt's storage stores for {', '.join(used)}.",
            hint="Set MQ_CONTENT_BASE_URL to this project's web address as Merritt storage "
            "reaches it, e.g. https://queue.example.org (docs/merritt.md).",
            id="mq.E083",
        )
    ]


def check_local_id_service(app_configs=None, databases=None, **kwargs) -> list:
    """A Merritt mode without Merritt's local-id service (inventory's, MERRITT_INVENTORY_URL):
    our local ids stay in our tables, unseen by Merritt's own ingest (``pipeline/identify.py``)."""
    used = _merritt_modes_in_use(databases)
    if not used or settings.MERRITT_INVENTORY_URL:
        return []
    return [
        checks.Warning(
            f"MERRITT_INVENTORY_URL is not set, and Merritt's services store for "
            f"{', '.join(used)}: local ids are neither looked up in nor told to Merritt's "
            "local-id service, so Merritt's ingest of the same local id makes another object.",
            hint="Set MERRITT_INVENTORY_URL to inventory's context root, the localIDURL of "
            "Merritt's ingest profiles (docs/merritt.md).",
            id="mq.W084",
        )
    ]


def check_ezid(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    pattern, wait = settings.MQ_EZID_TARGET_PATTERN, settings.MQ_EZID_RETRY_SECONDS
    problem = target_pattern_problem(pattern)
    if problem is None and wait > 0:
        return []
    why = problem or f"MQ_EZID_RETRY_SECONDS={wait!r} must be positive"
    return [
        checks.Error(
            f"MQ_EZID_TARGET_PATTERN={pattern!r} or MQ_EZID_RETRY_SECONDS is not usable: {why}.",
            hint="Set MQ_EZID_TARGET_PATTERN to the landing page of an ARK, e.g. "
            "https://merritt.cdlib.org/m/{ark} (empty: leave EZID's target alone), and "
            "MQ_EZID_RETRY_SECONDS to seconds, e.g. 60.",
            id="mq.E013",
        )
    ]


def check_profile_owner_arks(
    app_configs=None, databases=None, **kwargs
) -> list[checks.CheckMessage]:
    """Profiles without an owner's ARK: their local ids are refused (batches.models.Profile).
    It reads the database, so it runs only where one is named (``migrate``, ``check
    --database``), and is silent while the database cannot be read."""
    if not databases:
        return []
    from django.db import DatabaseError

    from batches.models import Profile

    try:
        names = list(Profile.objects.filter(owner_ark="").values_list("name", flat=True)[:21])
    except DatabaseError:
        return []
    if not names:
        return []
    shown = ", ".join(names[:20]) + (" ..." if len(names) > 20 else "")
    return [
        checks.Warning(
            f"profile(s) without an owner's ARK: {shown}",
            hint="Merritt's ingest names a local id's lock after the profile's owner ARK; "
            "until the profile has one (ark:/NAAN/name, as in Merritt's profile, set in the "
            "admin), submissions and jobs with local ids for it are refused.",
            id="mq.W080",
        )
    ]
