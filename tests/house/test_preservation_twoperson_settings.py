"""``MQ_TWO_PERSON_DELETION`` names only the kinds it knows (batch, jobs, purge): a typo would
leave deletions to one person while the site believes otherwise."""

from __future__ import annotations

from django.test import override_settings

from merritt_queue.project import checks


def test_unknown_kinds_and_a_non_positive_expiry_are_e140():
    with override_settings(MQ_TWO_PERSON_DELETION=["batch", "job"]):
        found = checks.check_two_person()
    assert [m.id for m in found] == ["mq.E140"] and "'job'" in found[0].msg
    with override_settings(MQ_TWO_PERSON_DELETION=["purge"], MQ_TWO_PERSON_EXPIRY_HOURS=0):
        assert [m.id for m in checks.check_two_person()] == ["mq.E140"]
    with override_settings(MQ_TWO_PERSON_DELETION=["batch", "jobs", "purge"]):
        assert checks.check_two_person() == []
