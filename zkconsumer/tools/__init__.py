"""Tools over a group that already exists, as Kafka's shell tools did them: ``groups`` (describe, list, delete,
offsets export and import, verify) and ``offset_checker`` (0.8.2.2's ``ConsumerOffsetChecker``, byte for byte).
"""
