"""The Django mirror of the ZooKeeper tree: filled by write-through, watches and full rebuilds.

ZooKeeper holds the truth; these rows (``Batch``, ``Job``, ``Collection``,
``JobEvent``, ``BatchEvent``, ``MirrorState``) are a copy for fast browsing, written only here.

Guarantees:

- Every row is written from a record read from ZooKeeper, or returned by a
  write ZooKeeper accepted. Views never write them.
- Never backwards: a record older than its row (lower ``status_version``) is
  ignored, so write-through, watches and rebuilds racing each other converge
  on the newest state. A full rebuild overwrites whatever differs from its
  read, except rows written after that read began.
- One timeline row (``JobEvent``, ``BatchEvent``) per item and status version,
  never a step that did not happen, whatever the timing between write-through,
  watches and rebuilds: rows come from the item's ``history`` node as read with
  it, or from what the writer told (write-through); a version only seen is named
  as such, a jump as a jump (``timeline``). An exact row replaces an inexact one
  and is never replaced (``events``). Rows outlive their item's row.
- ``Batch.job_counts`` / ``job_total`` are recounted from the batch's Job rows
  in the same transaction as every change to them.
- The write-through listener never raises into the store, and does nothing
  while Django is not set up; a change it misses is caught by the watches or
  the next full rebuild.
- A full rebuild into an empty database restores every batch, job, collection
  and lock, and every timeline row the history nodes hold (what their bounds let
  go of is not invented).

Its parts: ``rows`` (records -> row values), ``timeline`` (records -> timeline
rows), ``upsert`` (writing rows and counts), ``events`` (writing timeline rows),
``sql`` (the hand-written statements), ``writethrough`` (the store's listener),
``rebuild`` (the full reconcile), ``locks`` (collections, holds, the locks page);
``facade`` holds the names callers use to write the mirror; ``follow`` (the
watches, ``reconcile --watch``) writes through it, and ``facade`` knows nothing of it.
The app (``apps``) loads none of them, so that Django can set up before the models it writes exist.
"""
