"""Spark analysis of run traces (``zkconsumer analyze``) and of assignors over many group shapes (``sweep``).

Everything heavy runs on Spark through PySpark, local by default; the same code runs on a cluster when the
session is built with ``--master spark://…`` (see docs/analysis.md). Modules:

``spark``       session builder (same interpreter for workers, small shuffles, ships this package)
``traces``      JSON-lines reading with file:line for every malformed line
``rebalances``  consumer and group rebalances, ownership timeline, unowned gaps
``partitions``  duplicates, lost offsets, overlapping delivery
``consumers``   per-consumer totals
``sweep``       assignors over a grid of group shapes and membership changes, inside Spark tasks
``plots``       matplotlib (Agg) figures;  ``report``  report.md / report.html;  ``pipeline`` wires it all
"""
