"""The pre-flight summary of a submission: what its batch would do, computed before anything
is queued (issue 36). ``summarise`` is the one entry point; the check-a-manifest page, its
API, ``manage.py preflight`` and a batch's arrival all call it. The dictionary it answers is
described key by key in docs/usage.md ("Pre-flight summary")."""

from .summary import summarise

__all__ = ["summarise"]
