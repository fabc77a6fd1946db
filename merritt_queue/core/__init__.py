"""The queue core: the ZooKeeper tree, its state machines, the store, the dispatcher and
the worker. No Django."""
