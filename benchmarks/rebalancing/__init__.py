"""The parts of benchmarks/rebalance.py, one job each (that file is the command line): tree.py, the group every
scenario measures; members.py, the consumers under measure; convergence.py and cpu.py, what is measured;
scenario.py, one scenario; report.py, what is printed. Imported as ``rebalancing`` with benchmarks/ on the path,
as ``python benchmarks/rebalance.py`` puts it there (the host processes it spawns inherit that path)."""
