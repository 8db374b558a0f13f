"""Kafka's log, as the local broker keeps it on disk: record batches (``batches``), segments and their offset
indexes (``segment``), the idempotent producers' sequence table (``producer_state``) and the partition logs with
their manager (``storage``).

Below the broker and the group coordinator both: the broker appends and fetches, and the coordinator keeps
``__consumer_offsets`` in the same logs.
"""
