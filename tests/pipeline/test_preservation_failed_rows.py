"""Failed rows, round trip, on a real pipeline run: a batch of five files of which two fail
(a 404 URL, a wrong digest); their rows downloaded as the batch's own manifest, corrected,
uploaded, previewed, confirmed; only those two jobs resume and complete."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Group
from django.core.files.uploadedfile import SimpleUploadedFile

from door.rights import grant_depositor
from merritt_queue.deposit.manifest import parse_manifest
from steering.models import AdminAction, CollectionScope
from tests.pipeline.test_pipeline_e2e import md5

pytest_plugins = ["tests.httpserver", "tests.pipelinerun"]

PAYLOAD = re.compile(r'name="payload" value="([^"]+)"')
GOOD = ("call911.jpg", "goldenDragon.jpg", "tumbleBug.jpg")
FIELDS = (
    "nfo:fileUrl | nfo:hashAlgorithm | nfo:hashValue | nfo:fileSize | nfo:fileLastModified | "
    "nfo:fileName | mrt:primaryIdentifier | mrt:localIdentifier | mrt:creator | mrt:title | "
    "mrt:date"
)


def batch_manifest(url: str) -> str:
    rows = [
        f"{url}/{name} | md5 | {md5(name)} |  |  | {name} |  | r{i} |  | Good {i} | "
        for i, name in enumerate(GOOD, 1)
    ]
    rows.append(
        f"{url}/gone.jpg | md5 | {md5('4blocks.jpg')} |  |  | gone.jpg |  | r4 |  | Gone | "
    )
    rows.append(f"{url}/bigHunt2.jpg | md5 | {'0' * 32} |  |  | bigHunt2.jpg |  | r5 |  | Hunt | ")
    return "\n".join(
        [
            "#%checkm_0.7",
            "#%profile | http://uc3.cdlib.org/registry/ingest/manifest/mrt-single-file-batch-manifest",
            "#%prefix | mrt: | http://merritt.cdlib.org/terms#",
            "#%prefix | nfo: | http://www.semanticdesktop.org/ontologies/2007/03/22/nfo#",
            f"#%fields | {FIELDS}",
            *rows,
            "#%eof",
            "",
        ]
    )


@pytest.fixture
def people(django_user_model):
    def make(name, *groups, scope=None):
        user = django_user_model.objects.create_user(name, password="pw")
        user.groups.set([Group.objects.get_or_create(name=g)[0] for g in groups])
        if scope is not None:
            CollectionScope.objects.create(user=user, collections=scope)
        return user

    depositor = make("dora")
    grant_depositor(depositor, ["demo"])
    stranger = make("stan")
    grant_depositor(stranger, ["other"])
    return {
        "operator": make("otto", "operator"),
        "elsewhere": make("olga", "operator", scope=["other"]),
        "depositor": depositor,
        "stranger": stranger,
    }


@pytest.fixture
def failing(pipeline, content):
    """A batch of five rows run to its end: r4 (404) and r5 (wrong digest) failed."""
    (content.root / "batch.checkm").write_text(batch_manifest(content.url))
    bid = pipeline.submit(
        type="single-file-batch-manifest", payload_url=f"{content.url}/batch.checkm"
    )
    pipeline.run(bid)
    jobs = {j.configuration["local_id"]: j for j in pipeline.jobs(bid)}
    assert {k for k, j in jobs.items() if j.status == "Failed"} == {"r4", "r5"}
    return bid, jobs


def download(client, bid) -> str:
    response = client.get(f"/batches/{bid}/failed-rows.checkm")
    assert response.status_code == 200, response.content
    assert "attachment" in response["Content-Disposition"]
    return response.content.decode()


def upload(client, bid, text: str):
    file = SimpleUploadedFile("fixed.checkm", text.encode(), content_type="text/plain")
    return client.post(f"/batches/{bid}/corrections/", {"manifest": file})


def test_failed_rows_round_trip_resumes_only_the_corrected_jobs(
    pipeline, content, failing, client, people
):
    bid, jobs = failing
    gone, hunt = jobs["r4"], jobs["r5"]
    client.force_login(people["operator"])
    text = download(client, bid)

    # The batch's own header, and only the failed rows, each after why it failed.
    manifest = parse_manifest(text)
    assert manifest.kind == "files" and manifest.fields == tuple(FIELDS.split(" | "))
    assert "#%prefix | mrt: | http://merritt.cdlib.org/terms#" in text
    assert [r.local_id for r in manifest.rows] == ["r4", "r5"]
    comments = [line for line in text.splitlines() if line.startswith("# jid")]
    assert comments[0].startswith(f"# {gone.jid} failed at Downloading: ") and "404" in comments[0]
    assert comments[1].startswith(f"# {hunt.jid} failed at Downloading: ")
    assert "md5 mismatch" in comments[1]
    assert all("|" not in c for c in comments)

    fixed = text.replace(f"{content.url}/gone.jpg", f"{content.url}/4blocks.jpg").replace(
        "0" * 32, md5("bigHunt2.jpg")
    )
    others = {k: j.status_version for k, j in jobs.items() if k not in ("r4", "r5")}
    preview = upload(client, bid, fixed)
    body = preview.content.decode()
    assert preview.status_code == 200, body
    assert body.count('class="applies"') == 2
    assert f'data-item="{gone.jid}"' in body and f'data-item="{hunt.jid}"' in body
    assert f"{content.url}/gone.jpg" in body and f"{content.url}/4blocks.jpg" in body
    assert md5("bigHunt2.jpg") in body and "Rows refused" not in body
    # Nothing changed yet.
    assert pipeline.store.jobs.get_job(gone.jid).status_version == gone.status_version

    payload = PAYLOAD.search(body).group(1)
    url = f"/batches/{bid}/corrections/confirm"
    assert client.post(url, {"payload": payload, "reason": ""}).status_code == 400
    done = client.post(url, {"payload": payload, "reason": "the depositor fixed two rows"})
    assert done.status_code == 302
    again = client.post(url, {"payload": payload, "reason": "double click"})
    assert again.status_code == 302 and again.url == done.url
    record = AdminAction.objects.get(action="job.edit_resume")
    assert record.reason == "the depositor fixed two rows" and record.params["batch"] == bid
    items = {i.item_id: i for i in record.items.all()}
    assert set(items) == {gone.jid, hunt.jid}
    assert all(i.result == "done" for i in items.values())
    assert (items[gone.jid].before_status, items[gone.jid].after_status) == ("Failed", "Estimating")
    assert items[hunt.jid].after_status == "Downloading"
    assert "payload URL" in items[gone.jid].detail and "digest value" in items[hunt.jid].detail

    batch = pipeline.run(bid, until=lambda b: b.status == "Completed")
    assert batch.status == "Completed", batch.message
    after = {j.configuration["local_id"]: j for j in pipeline.jobs(bid)}
    assert all(j.status == "Completed" for j in after.values())
    assert {k: after[k].status_version for k in others} == others
    assert after["r4"].configuration["payload_url"] == f"{content.url}/4blocks.jpg"
    assert after["r5"].configuration["digest_value"] == md5("bigHunt2.jpg")
    assert after["r4"].retry_count == 1 and after["r1"].retry_count == 0


def test_refused_rows_and_refused_people(pipeline, content, failing, client, people):
    bid, jobs = failing
    gone, hunt, good = jobs["r4"], jobs["r5"], jobs["r1"]
    client.force_login(people["operator"])
    text = download(client, bid)
    header, _, _ = text.partition(f"# {gone.jid}")
    url = content.url

    def row(name, local, digest=""):
        alg = "md5" if digest else ""
        return f"{url}/{name} | {alg} | {digest} |  |  | {name} |  | {local} |  | T | "

    fixed_gone = row("4blocks.jpg", "r4", md5("4blocks.jpg"))
    manifest = header + "\n".join(
        [
            f"# {gone.jid} failed at Downloading: 404",
            fixed_gone,
            "# an unmatched row: no jid, an unknown local id",
            row("call911.jpg", "new-object"),
            f"# {good.jid} is Completed",
            row("call911.jpg", "r1"),
            f"# {hunt.jid} a private address",
            row("bigHunt2.jpg", "r5").replace(url, "http://10.0.0.5"),
            "#%eof",
            "",
        ]
    )
    preview = upload(client, bid, manifest)
    body = preview.content.decode()
    assert preview.status_code == 200, body
    assert body.count('class="applies"') >= 1 and f'data-item="{gone.jid}"' in body
    assert f'data-item="{hunt.jid}"' not in body and f'data-item="{good.jid}"' not in body
    assert "no failed job of this batch matches this row" in body
    assert f"job {good.jid} is Completed, not Failed" in body
    assert "10.0.0.5" in body and ("private" in body or "not allowed" in body)

    # A URL the door refuses refuses the whole file; nothing is previewed.
    bad = (
        header
        + f"# {gone.jid}\n"
        + row("x.jpg", "r4").replace(url, "http://u:pw@example.org")
        + "\n#%eof\n"
    )
    refused = upload(client, bid, bad)
    assert refused.status_code == 400 and "credentials" in refused.content.decode()
    assert "u:pw" not in refused.content.decode()
    # A jid of another batch is no job of this one.
    stray = header + "# jid9999999999\n" + fixed_gone + "\n#%eof\n"
    assert (
        f"jid9999999999 is not a job of batch {bid}" in upload(client, bid, stray).content.decode()
    )

    # An operator of another collection may not correct this batch.
    client.force_login(people["elsewhere"])
    assert upload(client, bid, manifest).status_code == 403
    # A depositor of the batch's collection downloads its failed rows, and uploads nothing.
    client.force_login(people["depositor"])
    theirs = download(client, bid)
    assert parse_manifest(theirs).rows and "127.0.0.1" in text
    # Their view of an error hides the addresses in it, as their view of a step does.
    assert "(address)" in theirs and "127.0.0.1" not in theirs.split("#%fields")[0]
    assert all("127.0.0.1" not in line for line in theirs.splitlines() if line.startswith("# "))
    assert upload(client, bid, manifest).status_code == 403
    # A depositor of another collection sees no such batch.
    client.force_login(people["stranger"])
    assert client.get(f"/batches/{bid}/failed-rows.checkm").status_code == 404
    assert AdminAction.objects.count() == 0
    assert pipeline.store.jobs.get_job(gone.jid).status_version == gone.status_version


def test_a_job_changed_since_the_preview_is_skipped(pipeline, content, failing, client, people):
    bid, jobs = failing
    gone, hunt = jobs["r4"], jobs["r5"]
    client.force_login(people["operator"])
    fixed = download(client, bid).replace(f"{content.url}/gone.jpg", f"{content.url}/4blocks.jpg")
    fixed = fixed.replace("0" * 32, md5("bigHunt2.jpg"))
    payload = PAYLOAD.search(upload(client, bid, fixed).content.decode()).group(1)
    pipeline.store.edits.resume_job(hunt.jid, message="resumed by someone else")
    client.post(f"/batches/{bid}/corrections/confirm", {"payload": payload, "reason": "fix"})
    items = {i.item_id: i for i in AdminAction.objects.get().items.all()}
    assert items[gone.jid].result == "done"
    assert items[hunt.jid].result == "skipped" and "changed" in items[hunt.jid].detail
    assert pipeline.store.jobs.get_job(hunt.jid).configuration["digest_value"] == "0" * 32


def test_the_api_and_the_commands(pipeline, content, failing, client, people, tmp_path):
    from io import StringIO

    from django.core.management import call_command

    from batches.models import ApiToken

    bid, jobs = failing
    gone, hunt = jobs["r4"], jobs["r5"]
    out = tmp_path / "failed.checkm"
    call_command("failed_rows", bid, "-o", str(out))
    text = out.read_text()
    assert [r.local_id for r in parse_manifest(text).rows] == ["r4", "r5"]

    key = ApiToken.issue(people["operator"], "test")[1]
    auth = {"HTTP_AUTHORIZATION": f"Bearer {key}"}
    api = client.get(f"/api/v1/batches/{bid}/failed-rows", **auth)
    assert api.status_code == 200 and api.content.decode() == text

    fixed = text.replace(f"{content.url}/gone.jpg", f"{content.url}/4blocks.jpg")
    out.write_text(fixed)
    said = StringIO()
    call_command("patch_batch", bid, str(out), "--user", "otto", "--dry-run", stdout=said)
    assert f"{gone.jid} (line" in said.getvalue() and "Dry run" in said.getvalue()
    assert AdminAction.objects.count() == 0

    preview = client.post(
        f"/api/v1/batches/{bid}/corrections", fixed, content_type="text/plain", **auth
    )
    assert preview.status_code == 200, preview.content
    body = preview.json()
    assert list(body["each"]) == [gone.jid] and body["unchanged"][0][1] == hunt.jid
    confirmed = client.post(
        f"/api/v1/batches/{bid}/corrections/confirm",
        {"confirm": body["confirm"], "reason": "via the API"},
        **auth,
    )
    assert confirmed.status_code == 200, confirmed.content
    assert confirmed.json()["done"] == 1
    assert pipeline.store.jobs.get_job(gone.jid).status == "Estimating"

    fixed = fixed.replace("0" * 32, md5("bigHunt2.jpg"))
    out.write_text(fixed)
    call_command("patch_batch", bid, str(out), "--user", "otto", "--reason", "cli", stdout=said)
    record = AdminAction.objects.get(reason="cli")
    assert [i.item_id for i in record.items.all()] == [hunt.jid]
