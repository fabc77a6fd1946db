"""The queue at a moment: for incident review, the queue as it stood at a chosen time,
rebuilt from what the site recorded, and what changed between two moments.

- ``states``: each job's and batch's state as of the moment, from the mirror's record of
  every status write (``JobEvent``, ``BatchEvent``; docs/history.md), counted in SQL;
- ``holds``: collection holds and queue pauses, from the audit of the actions (and
  windows) that put them on and took them off;
- ``windows``: the maintenance windows whose occurrence covered the moment;
- ``diff``: two moments side by side, and the items that moved in between;
- ``when``: reading a moment, and the refusals (the future, before the record begins),
  and what a purge took out of the record.

Locks are not recorded over time: only the present shows them (``/locks/``).
"""
