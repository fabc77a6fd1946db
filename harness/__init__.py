"""What the benchmarks (``bench/``) and the tests share to run the queue as real processes.

Starting and stopping the queue's processes, waiting on them, the servers of
``scripts/services.sh``, the processes' environment, and the rules that keep a run off a
ZooKeeper tree or a Redis database it does not own. No Django and no app: both callers
import it before (or without) any settings, and each adds its own defaults on top.

Also Merritt's other writers, replayed on their own ZooKeeper sessions (``merrittzk``:
mrt-ingest's MerrittZK; ``merrittservices``: storage's and inventory's queue consumers):
the tests meet them, and the ``merritt`` benchmark runs them beside the queue.
"""
