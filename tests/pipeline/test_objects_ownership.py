"""Issue 12, who may change an object: an object belongs to the collection it was created
in, and a depositor-supplied ARK the inventory lacks is refused unless the profile accepts
identifiers minted elsewhere under its shoulders. Refused at the door (API, form, CLI) when
the submission names the ARK, at Processing when a manifest row does; nothing is stored.
"""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from batches.models import ApiToken, Profile
from inventory.models import InventoryObject, InventoryVersion, LocalIdentifier
from merritt_queue.core import tree as t
from pipeline.objects import change_refusal
from steering.models import CollectionScope
from tests.objectfixtures import files_manifest, minted, other_profile, versions

pytest_plugins = ["tests.httpserver", "tests.pipelinerun"]

THEIRS = "ark:/99999/fk4theirs"
NEVER = "ark:/99999/fk4nevermintedhere"
URL = "/api/v1/batches"
GOOD = {"profile": "other", "type": "file", "payload_url": "https://example.org/a.txt"}


@pytest.fixture
def queue(process_store):
    """Two collections; demo owns one object, THEIRS."""
    Profile.objects.create(name="demo", collection="demo", minter_shoulder="ark:/99999/fk4")
    other_profile()
    InventoryObject.objects.create(ark=THEIRS, collection="demo", title="demo's object")
    return process_store


@pytest.fixture
def outsider(django_user_model, db):
    """A depositor with submit rights on collection other only."""
    user = django_user_model.objects.create_user("outsider", password="pw")
    user.groups.add(Group.objects.get_or_create(name="depositor")[0])
    CollectionScope.objects.create(user=user, collections=["other"])
    return user


def post(client, user, body):
    key = ApiToken.issue(user, "tests")[1]
    return client.post(
        URL, json.dumps(body), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {key}"
    )


def problems(response) -> str:
    return " ".join(response.json()["errors"])


# --- the rule --------------------------------------------------------------------------


def test_the_rule_accepts_the_collections_own_objects_and_arks_minted_for_it(queue):
    other = Profile.objects.get(name="other")
    demo = Profile.objects.get(name="demo")
    assert change_refusal("demo", THEIRS, demo) is None
    LocalIdentifier.objects.create(collection="other", local_id="x", ark="ark:/99999/fk4mine")
    assert change_refusal("other", "ark:/99999/fk4mine", other) is None
    # Bound for another collection: not an ARK this collection may name.
    assert change_refusal("demo", "ark:/99999/fk4mine", demo) is not None


def test_the_rule_refuses_another_collections_object_naming_both(queue):
    refusal = change_refusal("other", THEIRS, Profile.objects.get(name="other"))
    assert refusal.other_collection
    assert f"{THEIRS} belongs to another collection" in refusal
    assert "submission to collection other may not add a version" in refusal


def test_an_object_recorded_without_a_collection_is_no_collections_to_change(queue):
    InventoryObject.objects.create(ark="ark:/99999/fk4orphan", collection="")
    refusal = change_refusal("other", "ark:/99999/fk4orphan", Profile.objects.get(name="other"))
    assert refusal.other_collection and "belongs to no collection" in refusal


# --- at the door: API, form, CLI --------------------------------------------------------


def test_the_api_refuses_another_collections_ark_with_403_and_writes_nothing(
    client, queue, outsider
):
    response = post(client, outsider, GOOD | {"primary_id": THEIRS, "submission_mode": "update"})
    assert response.status_code == 403
    assert f"{THEIRS} belongs to another collection" in problems(response)
    assert queue.batches.list_batch_ids() == []


def test_the_api_refuses_a_never_minted_ark_with_400_naming_it(client, queue, outsider):
    response = post(client, outsider, GOOD | {"primary_id": NEVER})
    assert response.status_code == 400
    text = problems(response)
    assert NEVER in text and "does not accept identifiers minted elsewhere" in text, text
    assert queue.batches.list_batch_ids() == []


def test_the_api_refuses_a_primary_id_that_is_not_an_ark(client, queue, outsider):
    response = post(client, outsider, GOOD | {"primary_id": "my-object-7"})
    assert response.status_code == 400
    assert "'my-object-7' is not an ARK" in problems(response)
    assert queue.batches.list_batch_ids() == []


def test_the_api_refuses_a_primary_id_on_a_batch_manifest(client, queue, outsider):
    body = GOOD | {"type": "single-file-batch-manifest", "primary_id": THEIRS}
    response = post(client, outsider, body)
    assert response.status_code == 400
    assert "a batch manifest gives each row's own" in problems(response)
    assert queue.batches.list_batch_ids() == []


def test_the_api_accepts_the_collections_own_ark(client, queue, outsider):
    InventoryObject.objects.create(ark="ark:/99999/fk4ours", collection="other")
    response = post(client, outsider, GOOD | {"primary_id": "ark:/99999/fk4ours"})
    assert response.status_code in (200, 201, 202), response.content
    assert len(queue.batches.list_batch_ids()) == 1


def test_the_form_refuses_another_collections_ark_and_writes_nothing(client, queue, outsider):
    client.force_login(outsider)
    body = GOOD | {"primary_id": THEIRS, "submission_mode": "update"}
    page = client.post("/submit/", body).content.decode()
    assert f"{THEIRS} belongs to another collection" in page
    assert queue.batches.list_batch_ids() == []


@pytest.mark.parametrize(
    "ark, mode, refusal",
    [(THEIRS, "update", f"{THEIRS} belongs to another collection"), (NEVER, "add", NEVER)],
    ids=["another-collections-ark", "never-minted-ark"],
)
def test_the_submit_command_refuses(queue, ark, mode, refusal):
    with pytest.raises(CommandError) as refused:
        call_command(
            "submit",
            "--profile=other",
            "--submitter=me",
            "--type=file",
            "--payload-url=https://example.org/a.txt",
            f"--primary-id={ark}",
            f"--submission-mode={mode}",
        )
    assert refusal in str(refused.value)
    assert queue.batches.list_batch_ids() == []


# --- identifiers minted elsewhere -------------------------------------------------------


def allow_external(name: str, shoulders: str) -> Profile:
    profile = Profile.objects.get(name=name)
    profile.allow_external_ids, profile.external_shoulders = True, shoulders
    profile.full_clean()
    profile.save()
    return profile


def test_a_profile_that_allows_external_ids_accepts_them_under_its_shoulders(
    client, queue, outsider
):
    allow_external("other", "ark:/13030/m5\nark:/28722/k2\n")
    response = post(client, outsider, GOOD | {"primary_id": "ark:/13030/m5abc"})
    assert response.status_code in (200, 201, 202), response.content
    refused = post(client, outsider, GOOD | {"primary_id": "ark:/13030/qt9abc"})
    assert refused.status_code == 400
    text = problems(refused)
    assert "ark:/13030/qt9abc" in text and "only under ark:/13030/m5, ark:/28722/k2" in text
    # Another collection's object stays refused whatever the profile allows.
    allow_external("other", "ark:/99999/fk4")
    assert post(client, outsider, GOOD | {"primary_id": THEIRS}).status_code == 403
    assert len(queue.batches.list_batch_ids()) == 1


def test_external_shoulders_are_checked_like_the_minter_shoulder(queue):
    profile = Profile.objects.get(name="other")
    profile.external_shoulders = "ark:/13030/m5\nnot a shoulder\n"
    with pytest.raises(ValidationError) as bad:
        profile.full_clean()
    assert "'not a shoulder'" in str(bad.value) and "ark:/99999/fk4" in str(bad.value)
    profile.external_shoulders, profile.allow_external_ids = "", True
    with pytest.raises(ValidationError) as empty:
        profile.full_clean()
    assert "Name at least one shoulder" in str(empty.value)


def test_allowed_shoulders_count_only_when_the_profile_allows_external_ids(queue):
    profile = Profile.objects.get(name="other")
    profile.external_shoulders = "ark:/13030/m5"
    assert change_refusal("other", "ark:/13030/m5abc", profile) is not None
    profile.allow_external_ids = True
    assert change_refusal("other", "ark:/13030/m5abc", profile) is None


# --- at Processing: manifest rows ------------------------------------------------------


def test_a_manifest_row_naming_another_collections_object_fails_and_stores_nothing(
    pipeline, content
):
    other_profile()
    owned = pipeline.run(
        pipeline.submit(type="file", payload_url=f"{content.url}/call911.jpg", local_id="mine")
    )
    assert owned.status == "Completed"
    (first,) = pipeline.jobs(owned.bid)
    ark = first.identifiers["primary_id"]
    url = files_manifest(
        content, "hijack.checkm", [("call911.txt", ark, ""), ("4blocks.txt", "", "")]
    )
    bid = pipeline.submit(
        type="single-file-batch-manifest",
        payload_url=url,
        profile="other",
        submission_mode="update",
    )
    pipeline.run(bid)
    jobs = {j.configuration["filename"]: j for j in pipeline.jobs(bid)}
    refused, fine = jobs["call911.txt"], jobs["4blocks.txt"]
    assert refused.status == "Failed" and refused.last_successful_status == "Downloading"
    assert f"{ark} belongs to another collection" in refused.message, refused.message
    assert fine.status == "Completed"
    assert versions(pipeline, ark) == [1]
    obj = InventoryObject.objects.get(ark=ark)
    assert obj.collection == "demo" and InventoryVersion.objects.filter(obj=obj).count() == 1
    assert minted(pipeline) == 2  # demo's object and the other row's, nothing for the refusal


def test_a_manifest_row_with_a_never_minted_ark_fails_and_binds_nothing(pipeline, content):
    url = files_manifest(content, "invented.checkm", [("call911.txt", NEVER, "row-1")])
    bid = pipeline.submit(type="single-file-batch-manifest", payload_url=url)
    pipeline.run(bid)
    (job,) = pipeline.jobs(bid)
    assert job.status == "Failed" and job.last_successful_status == "Downloading"
    assert NEVER in job.message and "does not accept identifiers minted elsewhere" in job.message
    assert versions(pipeline, NEVER) == []
    assert minted(pipeline) == 0 and not LocalIdentifier.objects.exists()


def test_a_manifest_row_under_an_allowed_external_shoulder_is_stored(pipeline, content):
    pipeline.profile.allow_external_ids = True
    pipeline.profile.external_shoulders = "ark:/13030/m5"
    pipeline.profile.save()
    url = files_manifest(content, "external.checkm", [("call911.txt", "ark:/13030/m5abc", "")])
    bid = pipeline.submit(type="single-file-batch-manifest", payload_url=url)
    assert pipeline.run(bid).status == "Completed"
    assert versions(pipeline, "ark:/13030/m5abc") == [1] and minted(pipeline) == 0


def test_a_job_planned_without_the_key_still_refuses_another_collections_ark(pipeline, content):
    """A job written by Merritt or an older version has no ``primary_id`` in its
    configuration: its identifiers' ARK may be one minted here, so only the other-collection
    rule applies, and it does."""
    other_profile()
    InventoryObject.objects.create(ark=THEIRS, collection="demo")
    url = files_manifest(content, "legacy.checkm", [("call911.txt", THEIRS, "")])
    bid = pipeline.submit(type="single-file-batch-manifest", payload_url=url, profile="other")
    pipeline.run(bid, until=lambda b: bool(pipeline.jobs(bid)))
    (job,) = pipeline.jobs(bid)
    config = {k: v for k, v in job.configuration.items() if k != "primary_id"}
    # Written as Merritt would: the configuration node alone, in place.
    pipeline.store.client.set(t.job_node(job.jid, "configuration"), t.encode_json(config))
    pipeline.run(bid)
    (job,) = pipeline.jobs(bid)
    assert "primary_id" not in job.configuration
    assert job.status == "Failed" and f"{THEIRS} belongs to another collection" in job.message
    assert versions(pipeline, THEIRS) == []


@pytest.mark.parametrize("bad", ["ark:/99999/fk4abc\n", "ark:/99999/fk4abc\r\n", "ark:/99999/"])
def test_the_rule_refuses_an_ark_with_a_line_end_or_no_name(queue, bad):
    refusal = change_refusal("demo", bad, Profile.objects.get(name="demo"))
    assert refusal is not None and "is not an ARK" in refusal
