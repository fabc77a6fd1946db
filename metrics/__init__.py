"""``/metrics``: the queue's figures in Prometheus's text format, for operators' monitoring.

``access`` says who may read it, ``collector`` reads the figures at each scrape (mirror,
Redis, ZooKeeper) and the queue core counts the steps its workers run
(``merritt_queue.core.metrics``). docs/metrics.md lists every metric.
"""
