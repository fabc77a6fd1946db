"""Depositors' subscriptions to a batch's events, and their signed webhook and e-mail deliveries.

A ``Subscription`` belongs to one batch (named by the submission, or the profile's default);
each state entry of the batch or of one of its jobs that its filter takes becomes one
``Delivery`` (``outbox``), written in the same transaction as the mirror's timeline row that
records the entry, and unique per subscription and event: the same entry seen twice (write-
through, then the follower; a rebuild) is one delivery, whose id the receiver dedupes.
Deliveries go through their own RQ queue (``tasks``), so they never hold the pipeline.
"""
