"""The assignment sweep's drivers: many scenarios (:mod:`zkconsumer.analysis.scenarios`) run in a plain Python loop
(:func:`run_local`, the reference and the benchmark's baseline) or in Spark tasks (:func:`run_spark`, ``mapInArrow``),
where Range and both RoundRobins are computed over whole batches with numpy (:mod:`zkconsumer.analysis.sweep_batch`,
checked against the loop row for row); ``run_spark(..., scalar=True)`` runs the loop in the tasks instead.

The scenario names are re-exported here: ``from zkconsumer.analysis.sweep import SweepConfig, make_scenario`` works.
"""

from __future__ import annotations

from collections.abc import Iterator

import pandas as pd
import pyarrow as pa

from zkconsumer.analysis.scenarios import (  # noqa: F401 - re-exported
    ARROW_SCHEMA,
    CHANGE_KINDS,
    GRID_FULL,
    GRID_QUICK,
    INT_COLS,
    PATTERNS,
    RESULT_SCHEMA,
    Scenario,
    SweepConfig,
    arrow_batch,
    iter_rows,
    make_scenario,
    run_scenario,
)
from zkconsumer.analysis.sweep_batch import batch_rows

#: Scenarios per Arrow batch a Spark task yields (16 rows each with 4 strategies and 3 changes).
OUTPUT_CHUNK = 1000
#: Scenarios per batched computation (split by shape inside, so each numpy call covers hundreds of them).
BATCH_CHUNK = 5000


def run_local(cfg: SweepConfig, n: int, start: int = 0) -> pd.DataFrame:
    """The same sweep in a plain Python loop: the benchmark baseline and the tests' reference."""
    frame = arrow_batch(list(iter_rows(cfg, iter(range(start, start + n))))).to_pandas()
    return frame.astype(dict.fromkeys(INT_COLS, "Int32"))  # nullable, as in Spark


def run_spark(spark, cfg: SweepConfig, n: int, partitions: int | None = None, scalar: bool = False):  # -> DataFrame
    """``n`` scenarios as a Spark DataFrame of result rows, computed in Python workers (``mapInArrow``).

    Range and both RoundRobins are computed over whole batches of scenarios with numpy
    (:mod:`zkconsumer.analysis.sweep_batch`, same rows as the scalar loop); ``scalar=True`` runs the per-scenario
    loop instead (the benchmark's "previous approach").
    """
    sc = spark.sparkContext
    if partitions is None:
        # batched tasks want thousands of scenarios each (numpy's per-call cost is per shape and step)
        per_task = OUTPUT_CHUNK if scalar else BATCH_CHUNK
        partitions = max(2, min(sc.defaultParallelism * 4, -(-n // per_task)))
        partitions = max(partitions, min(sc.defaultParallelism, -(-n // 500)))  # keep every core busy

    def compute(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        cells = cfg.cells
        for batch in batches:
            ids = batch.column(0).to_pylist()
            chunk = OUTPUT_CHUNK if scalar else BATCH_CHUNK
            for i in range(0, len(ids), chunk):  # bounded result batches keep the worker's heap small
                if scalar:
                    yield arrow_batch(list(iter_rows(cfg, iter(ids[i:i + chunk]))))
                else:
                    yield batch_rows([make_scenario(cfg, j, cells) for j in ids[i:i + chunk]],
                                     cfg.strategies, cfg.seed)

    return spark.range(0, n, numPartitions=partitions).mapInArrow(compute, RESULT_SCHEMA)
