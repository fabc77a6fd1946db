"""Finding why something failed: the message beside the id, a text search that finds part of
a message, and the dashboard's causes of failure, each linked to its jobs and to a bulk
resume of them."""

from __future__ import annotations

import re
from html import unescape
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.pages.test_dashboard import empty_cache  # noqa: F401 - the same autouse fixture
from tests.pages.test_pages_batches_jobs import bid, jid, listed, make_batch, make_job
from tests.roles import viewer
from ui.signatures import signature

pytestmark = pytest.mark.django_db

DIGEST = "digest mismatch: md5 expected {} got {}"


@pytest.fixture
def user(django_user_model):
    return viewer(django_user_model.objects.create_user("librarian"))


@pytest.fixture
def browser(client, user):
    client.force_login(user)
    return client


@pytest.fixture
def admin(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("boss"))
    return client


def headers(html: str) -> list[str]:
    thead = html.split("<thead", 1)[1].split("</thead>", 1)[0]
    return [
        unescape(re.sub(r"<[^>]+>", "", h)).strip() for h in re.findall(r"<th.*?</th>", thead, re.S)
    ]


# --- the message where people look ------------------------------------------------------


def test_the_job_list_shows_id_status_and_message_first(browser):
    make_batch(1)
    make_job(1, "Failed", message="download failed: HTTP 404 Not Found")
    html = browser.get("/jobs/").content.decode()
    shown = [h for h in headers(html) if h]  # the selection column has no header text
    assert shown[:3] == ["Job", "Status", "Message"]
    row = html.split("<tbody>", 1)[1]
    assert row.index(jid(1)) < row.index("Failed") < row.index("HTTP 404 Not Found")


def test_the_batch_page_lists_its_jobs_with_the_message_first_too(browser):
    make_batch(1)
    make_job(1, "Failed", message="no such file")
    html = browser.get(f"/batches/{bid(1)}/").content.decode()
    assert [h for h in headers(html.split("no such file", 1)[0].rsplit("<table", 1)[1]) if h][
        :3
    ] == ["Job", "Status", "Message"]


def test_a_long_message_opens_to_its_whole_text(browser):
    make_batch(1)
    message = "storage refused: " + "x" * 100 + " <b>end</b>"
    make_job(1, "Failed", message=message)
    html = browser.get("/jobs/").content.decode()
    cell = html.split('<td class="c-message" data-label="Message">', 1)[1].split("</td>", 1)[0]
    assert cell.startswith('<details class="msg"><summary title="storage refused: ')
    assert "…</span></summary>" in cell
    assert '<span class="full">storage refused: ' in cell
    assert "&lt;b&gt;end&lt;/b&gt;</span></details>" in cell
    assert "<b>" not in cell


def test_a_batch_that_failed_before_making_jobs_shows_its_message(browser):
    make_batch(1, "Failed", message="manifest line 3: 5 fields, expected 12")
    make_batch(2, "Completed", job_counts={"Completed": 2})
    html = browser.get("/batches/").content.decode()
    shown = [h for h in headers(html) if h]
    assert shown[:3] == ["Batch", "Status", "Message"]
    assert "manifest line 3: 5 fields, expected 12" in html


# --- search: any part of a message, batchID, local id, ARK or title, in any case ----------


@pytest.fixture
def jobs():
    make_batch(1, uuid="AB12-batch-one")
    make_batch(2, uuid="cd34-batch-two")
    made = [
        make_job(1, "Failed", message=DIGEST.format("3f2a9b41c0d8e7f6", "0123456789abcdef")),
        make_job(2, "Failed", message="download failed: HTTP 404 Not Found"),
        make_job(3, "Completed", batch=2, title="Letters of Ann Lee", local_id="box7/folder2"),
        make_job(4, "Completed", batch=2, ark="ark:/13030/m5zz9q"),
    ]
    return {j.jid: j for j in made}


@pytest.mark.parametrize(
    "query, expected",
    [
        ("message=md5", [1]),
        ("message=MD5 Expected", [1]),
        ("message=not found", [2]),
        ("status=Completed&message=md5", []),
        ("q=md5", [1]),
        ("q=HTTP 404", [2]),
        ("q=ann lee", [3]),
        ("q=FOLDER2", [3]),
        ("q=m5zz9", [4]),
        ("q=ab12-BATCH", [2, 1]),
        ("q=batch-two", [4, 3]),
        ("q=nothing like this", []),
    ],
)
def test_search_finds_any_part_in_any_case(browser, jobs, query, expected):
    assert listed(browser.get(f"/jobs/?{query}")) == [jid(n) for n in expected]


@pytest.mark.parametrize(
    "query, expected",
    [("q=manifest LINE", [2]), ("q=ab12", [1]), ("q=TWO", [2]), ("q=zzz", [])],
)
def test_the_batch_search_finds_any_part_of_a_batchid_title_or_message(browser, query, expected):
    make_batch(1, uuid="AB12-batch-one", status="Completed")
    make_batch(2, uuid="cd34-batch-two", status="Failed", message="manifest line 3: bad")
    assert listed(browser.get(f"/batches/?{query}")) == [bid(n) for n in expected]


# --- the dashboard's causes of failure --------------------------------------------------


def test_a_signature_masks_what_differs_between_jobs():
    assert signature(DIGEST.format("3f2a9b41c0d8e7f6", "0123456789abcdef")) == (
        "digest mismatch: md5 expected <hex> got <hex>"
    )
    assert signature("callback https://example.org/h?x=1 failed: 502 Bad  Gateway") == (
        "callback <url> failed: <n> Bad Gateway"
    )
    assert signature("object ark:/13030/m5jid0000000042 is locked by jid0000000042") == (
        "object <ark> is locked by <id>"
    )
    assert signature("") == ""


def causes_table(html: str) -> str:
    return html.split("Top error messages", 1)[1].split("</table>", 1)[0]


def query(href: str) -> dict[str, list[str]]:
    parts = urlsplit(unescape(href))
    return {"path": [parts.path], **parse_qs(parts.query, keep_blank_values=True)}


@pytest.fixture
def failures():
    make_batch(1)
    hexes = ["3f2a9b41c0d8e7f6", "0123456789abcdef", "deadbeef01234567", "aa00bb11cc22dd33"]
    for n in range(1, 5):
        make_job(n, "Failed", message=DIGEST.format(hexes[n - 1], hexes[-n]))
    for n in range(5, 8):
        make_job(n, "Failed", message=f"callback https://example.org/hook/{n} failed: 502")
    make_job(8, "Failed", message="digest mismatch: sha256 expected 1234abcd got abcd1234")
    make_job(9, "Completed", message=DIGEST.format("ffff0000ffff0000", "0000ffff0000ffff"))


def test_the_top_errors_group_one_cause_with_its_count_and_an_example(browser, failures):
    table = causes_table(browser.get("/").content.decode())
    causes = re.findall(r'<a class="msg" href="([^"]+)" title="([^"]+)"', table)
    assert [unescape(t) for _, t in causes] == [
        "digest mismatch: md5 expected <hex> got <hex>",
        "callback <url> failed: <n>",
        "digest mismatch: sha256 expected <hex> got <hex>",
    ]
    assert '<td class="num"><a href="' in table and ">4</a></td>" in table
    assert "(4 different texts)" in table and "e.g. digest mismatch: md5 expected" in table


def test_a_cause_links_to_exactly_its_failed_jobs(browser, failures):
    table = causes_table(browser.get("/").content.decode())
    hrefs = [query(h) for h in re.findall(r'<a class="msg" href="([^"]+)"', table)]
    assert hrefs[0]["path"] == ["/jobs/"] and hrefs[0]["status"] == ["Failed"]
    lists = [
        listed(browser.get("/jobs/", {k: v[0] for k, v in h.items() if k != "path"})) for h in hrefs
    ]
    assert lists == [[jid(n) for n in (4, 3, 2, 1)], [jid(n) for n in (7, 6, 5)], [jid(8)]]


def test_resume_all_of_a_cause_opens_the_bulk_confirmation_with_its_filter(admin, failures):
    table = causes_table(admin.get("/").content.decode())
    resume = re.findall(r'<a class="resume-all" href="([^"]+)">resume all 4…</a>', table)
    assert len(resume) == 1
    q = query(resume[0])
    assert q["path"] == ["/actions/job.resume/confirm"] and q["all"] == ["1"]
    assert q["signature"] == ["digest mismatch: md5 expected <hex> got <hex>"]
    page = admin.get(unescape(resume[0]))
    assert page.status_code == 200
    body = page.content.decode()
    assert all(jid(n) in body for n in (1, 2, 3, 4))
    assert jid(8) not in body and jid(9) not in body
    # The filter is shown as words, not percent-encoded.
    shown = "status=Failed · signature=digest mismatch: md5 expected &lt;hex&gt; got &lt;hex&gt;"
    assert shown in body


def test_no_resume_link_for_a_reader_who_may_not_resume(browser, failures):
    html = browser.get("/").content.decode()
    assert "resume-all" not in html


def test_a_cause_without_a_message_lists_only_its_own_jobs(admin, db):
    """Its signature was empty: its link, and "resume all", selected every failed job."""
    make_batch(1)
    make_job(1, "Failed", message="")
    make_job(2, "Failed", message="digest mismatch: md5 expected 3f2a9b41c0d8e7f6 got 01234567")
    table = causes_table(admin.get("/").content.decode())
    hrefs = [query(h) for h in re.findall(r'<a class="msg" href="([^"]+)"', table)]
    blank = next(h for h in hrefs if h["signature"] == ["<none>"])
    found = listed(admin.get("/jobs/", {k: v[0] for k, v in blank.items() if k != "path"}))
    assert found == [jid(1)]


def test_a_cause_is_found_exactly_as_the_dashboard_counted_it(admin, db):
    """The list's regular expression took a number for a digest (``<hex>`` matched ``12``)
    and missed an upper-case id the dashboard counted."""
    make_batch(1)
    make_job(1, "Failed", message="digest 3f2a9b41c0d8e7f6 bad")
    make_job(2, "Failed", message="digest 12 bad")
    make_job(3, "Failed", message="lock held by JID0000000009")
    assert listed(admin.get("/jobs/", {"signature": "digest <hex> bad"})) == [jid(1)]
    assert listed(admin.get("/jobs/", {"signature": "lock held by <id>"})) == [jid(3)]


def test_a_depositor_lists_and_searches_only_their_collections(client, django_user_model):
    """The lists were not narrowed: a depositor searched every collection's messages, and
    the dashboard showed other collections' error texts."""
    from door.rights import grant_depositor

    make_batch(1, collection="demo")
    make_batch(2, collection="other", message="their failure")
    make_job(1, "Failed", message="storage refused: ours")
    make_job(2, "Failed", batch=2, collection="other", message="storage refused: theirs")
    person = django_user_model.objects.create_user("dee")
    grant_depositor(person, ["demo"])
    client.force_login(person)
    assert listed(client.get("/jobs/", {"q": "storage refused"})) == [jid(1)]
    batches = client.get("/batches/").content.decode()
    assert bid(1) in batches and bid(2) not in batches
    assert "theirs" not in client.get("/").content.decode()
