"""The mirror of Merritt's access (assembly) queue: one row per request and its history.

Written only by ``mirror.access`` (the follower, ``reconcile --full``, and the write-through
of the steering actions); read by the pages. See docs/access-queue.md.
"""
