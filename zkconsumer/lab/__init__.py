"""The lab: whole groups on one machine, with churn and faults, watched live and judged by the analysis.

- ``runner``: ``zkconsumer lab``: servers, topics, producers, consumers, churn, the run directory.
- ``backends``: where the lab's processes run: local processes or Docker containers (``containers/``).
- ``compare``: ``zkconsumer compare``: one workload in every mode, one table and one figure.
- ``faults/``: the fault matrix (ZooKeeper, broker and migration faults) and its verdicts.
- ``demo``: ``zkconsumer demo``.
"""
