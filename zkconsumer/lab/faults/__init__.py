"""The fault matrix: faults driven against a live lab group, each judged by the Spark analysis' invariants.

``proxy`` is a loopback TCP proxy that can pass, drop or blackhole one consumer's ZooKeeper connection;
``lab`` the lab with the handles faults need (an ensemble, the broker in its own process, a consumer behind
the proxy); ``matrix`` the faults themselves; ``verdict`` turns the analysis' invariants into one line per fault.
``scenario_lab`` carries a scenario's fault and topic actions out on the lab's own loop (``lab_for`` picks it for
a plan that needs it).
"""
