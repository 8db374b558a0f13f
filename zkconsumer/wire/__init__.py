"""The Kafka protocol's request plumbing (``protocol``): the API table, the dispatcher, a request's context, the
errors a malformed frame raises.

Below the broker and the group coordinator both: the broker's core APIs and the coordinator's group APIs are rows
of one table.
"""
