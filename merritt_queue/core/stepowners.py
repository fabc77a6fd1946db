"""Who does a job's Storing and Recording: this project, or Merritt's storage and inventory.

- ``local``: our workers store (``MQ_STORAGE``) and record in this project's inventory.
- ``merritt-queue``: Merritt's storage and inventory services take the job through the
  queue, as they take mrt-ingest's: our workers leave it in Storing with its ``store`` node
  written, storage's consumer moves it to Recording, inventory's to Notify; ours never take
  a Storing or Recording job then.
- ``merritt-api``: our workers call storage's and inventory's HTTP APIs themselves, for
  sites whose services run no queue consumers.

A site's default is ``MQ_STORE_RECORD``; a profile may name its own. The choice is made once,
at submission, and written into the batch's submission, which every job's configuration
inherits (``planning.INHERITED``): a restart, a second site process or Merritt's admin
reads it from the job's own nodes and never guesses from today's settings. A job without
it (submitted before the setting existed) is ``local``, what it was submitted under.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

LOCAL, MERRITT_QUEUE, MERRITT_API = "local", "merritt-queue", "merritt-api"
MODES = (LOCAL, MERRITT_QUEUE, MERRITT_API)
# The modes in which Merritt's storage stores: it fetches the content over HTTP and needs a
# numeric storage node.
MERRITT_MODES = (MERRITT_QUEUE, MERRITT_API)
# The key of a submission and of a job configuration that holds the choice.
KEY = "store_record"
MODE_TEXT = {
    LOCAL: "this project stores and records",
    MERRITT_QUEUE: "Merritt's storage and inventory take Storing and Recording through the queue",
    MERRITT_API: "this project's workers call Merritt's storage and inventory APIs",
}


def chosen(profile_mode: str, site_mode: str) -> str:
    """The mode a new submission is made under: the profile's, else the site's."""
    return profile_mode or site_mode


def storage_node_problem(node: object) -> str | None:
    """Why a profile's storage node cannot be Merritt storage's; None when it can. Storage
    parses the node of the store node's mode as a number, and fails the job otherwise."""
    text = node if isinstance(node, str) else str(node)
    if text.isascii() and text.isdigit():
        return None
    return (
        f"storage node {node!r} is not a number: Merritt storage takes only its numeric "
        "node ids (e.g. 9501)"
    )


def content_base_problem(base: object) -> str | None:
    """Why ``MQ_CONTENT_BASE_URL`` cannot be where Merritt storage fetches content; None
    when it can. Storage fetches every row's URL itself: a ``file:`` URL names a file on
    storage's own disk, never ours."""
    text = base if isinstance(base, str) else ""
    scheme, _, rest = text.partition("://")
    if scheme.lower() in ("http", "https") and rest.strip("/"):
        return None
    return f"MQ_CONTENT_BASE_URL={base!r} is not an http(s) URL Merritt storage can fetch"


def of_job(configuration: Mapping[str, Any] | None) -> str:
    """The mode a job was submitted under; ``local`` when it names none or an unknown one."""
    value = (configuration or {}).get(KEY)
    return value if value in MODES else LOCAL
