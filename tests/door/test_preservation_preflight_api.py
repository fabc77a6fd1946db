"""The pre-flight in the check's API (issue 36, part 1): ``POST /api/v1/manifests/check?profile=P``
answers the check and, under ``preflight``, the summary of submitting with P; a profile outside
the token's scope is refused, its objects never shown."""

from __future__ import annotations

from batches.models import ApiToken
from tests.pages import test_preservation_preflight_pages as pages

_site, person, DATA = pages._site, pages.person, pages.DATA  # the same fixtures and manifest

URL = "/api/v1/manifests/check"


def api(client, person, data, query=""):
    key = ApiToken.issue(person, "tests")[1]
    return client.post(
        URL + query, data, content_type="text/plain", HTTP_AUTHORIZATION=f"Bearer {key}"
    )


def test_the_api_returns_the_preflight_for_a_profile(client, person, settings):
    settings.MQ_PREFLIGHT_HEAD_SAMPLE = 0
    answer = api(client, person, DATA, "?profile=demo")
    body = answer.json()
    assert answer.status_code == 200 and body["valid"] is True
    flight = body["preflight"]
    assert flight["version"] == 1 and flight["rows"] == 1 and flight["declared_bytes"] == 4
    assert flight["updates"] == [
        {"line": 4, "local_id": "L-1", "ark": "ark:/99999/fk4mine", "title": "Mine"}
    ]


def test_the_api_without_a_profile_answers_as_before(client, person):
    assert "preflight" not in api(client, person, DATA).json()


def test_the_api_refuses_a_profile_outside_ones_scope_or_unknown(client, person):
    answer = api(client, person, DATA, "?profile=other")
    assert answer.status_code == 403 and "Theirs" not in answer.content.decode()
    assert "may not submit to collection 'other'" in answer.json()["errors"][0]
    unknown = api(client, person, DATA, "?profile=nope")
    assert unknown.status_code == 400 and "no profile 'nope'" in unknown.json()["errors"][0]
