"""Live migration of a ZooKeeper (0.8) group to the broker's group coordinator, member by member (docs/migration.md).

``plan``: the ``/consumers/<g>/migration`` node that says which member runs in which mode.
``bridge``: what a coordinator-mode member does in ZooKeeper while the group is mixed (registration, owner nodes,
offsets) and the assignor that makes both halves of the group compute the same split.
``member``: a consumer process that switches mode when the plan says so (``zkconsumer consume --migratable``).
``driver``: ``zkconsumer migrate``, which moves members one at a time and can roll back.
"""
