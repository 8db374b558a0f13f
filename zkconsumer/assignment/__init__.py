"""Who consumes which partition, as pure functions: no I/O, so they are tested and benchmarked alone.

- ``assignors``: Kafka 0.8's Range and RoundRobin (and the relaxed and sticky variants) over an
  :class:`~zkconsumer.assignment.assignors.AssignmentContext`, in Java's orders (``zkconsumer/javacompat.py``).
- ``foreign``: members registered in a foreign format (pykafka's balanced consumer).
- ``reference``: a line-by-line port of Kafka's loops: the tests' oracle, the benchmarks' baseline.
"""
