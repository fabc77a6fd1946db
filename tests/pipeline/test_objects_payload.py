"""A job's payload as workers read it from the tree: its sizes are checked there again, since
another writer (Merritt's ingest, a hand edit) may have put anything in a job's data."""

from __future__ import annotations

import pytest

from merritt_queue.deposit.manifest import ManifestError
from pipeline.payload import PayloadFile

URL = "https://example.org/a.txt"


@pytest.mark.parametrize("size", ["12abc", -1, True, 1.5, "", [3]])
def test_a_size_that_is_not_a_whole_number_of_bytes_is_refused(size):
    with pytest.raises(ManifestError, match="not a whole number of bytes"):
        PayloadFile(URL, "a.txt", size)


@pytest.mark.parametrize(("size", "read"), [(None, None), (0, 0), (12, 12), ("12", 12)])
def test_a_size_in_bytes_is_kept_as_a_number(size, read):
    assert PayloadFile(URL, "a.txt", size).size == read
