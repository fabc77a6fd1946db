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


def of_job(configuration: Mapping[str, Any] | None) -> str:
    """The mode a job was submitted under; ``local`` when it names none or an unknown one."""
    value = (configuration or {}).get(KEY)
    return value if value in MODES else LOCAL
