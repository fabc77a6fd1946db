"""Two-person deletion (``MQ_TWO_PERSON_DELETION``): a deletion one administrator confirms
becomes a ``DeletionRequest``, which a second administrator approves (running the very action,
with its version guard) or rejects. ``policy``: which deletions; ``requests``: the request's
life; ``showing``: what a request lists; ``views``, ``door.deletions_api`` and the
``deletion_requests`` command: its three doors."""
