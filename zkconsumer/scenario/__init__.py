"""One scenario, two worlds: what a run is, independent of where it runs.

The scenario model (model.py), its TOML file (reader.py, writer.py), the nemesis's seeded draw and shrinking
(nemesis.py), which consumer properties each kind of member takes (properties.py) and the plan a run follows
(plan.py). Pure: no processes, no threads, no sockets. The lab (``zkconsumer/lab``: real processes) and the simulator
(``zkconsumer/sim``: simulated ones) both import this package and never each other (tests/test_architecture.py).
"""
