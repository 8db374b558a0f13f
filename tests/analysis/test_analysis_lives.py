"""A consumer started again under its id (a deploy's restart, a ``kill -9`` and a start) appends to its trace and
counts its rebalances from 1 again: the analysis keeps its lives apart (docs/trace.md, "How the analysis reads it").

The story (group g, topic t, partitions t-0 and t-1):
  1000  A starts alone and owns both.
  2000  B joins: A keeps t-0, B takes t-1. A commits at 2400, then is killed with ``kill -9``.
  3000  A's session has expired: B owns both.
  5000  A is started again under its id (its rebalance 1 again): A takes t-0 back, B keeps t-1; 6000 A shuts down.
"""

from __future__ import annotations

import pandas as pd
from rich.console import Console

from zkconsumer.analysis.pipeline import run_analysis


def test_a_restarted_consumer_starts_a_new_life(spark, tmp_path, trace_builder_class) -> None:
    tb = trace_builder_class(tmp_path / "traces")
    tb.emit("A", 1000, "registered", subscription={"t": 1}, pattern="static")
    tb.rebalance("A", 1000, 1, ["t-0", "t-1"], cause="startup", done_ts=1010)
    tb.emit("B", 2000, "registered", subscription={"t": 1}, pattern="static")
    tb.rebalance("B", 2000, 1, ["t-1"], cause="startup", done_ts=2020)
    tb.rebalance("A", 2001, 2, ["t-0"], released=["t-0", "t-1"], done_ts=2015)
    tb.deliver("A", 2300, "t", 0, 0)
    tb.commit("A", 2400, "t", 0, 1)
    tb.deliver("A", 2450, "t", 0, 1)  # then: kill -9
    tb.rebalance("B", 3000, 2, ["t-0", "t-1"], released=["t-1"], done_ts=3010)
    tb.emit("A", 4990, "registered", subscription={"t": 1}, pattern="static")
    tb.rebalance("A", 5000, 1, ["t-0"], cause="startup", done_ts=5015)
    tb.rebalance("B", 5001, 3, ["t-1"], released=["t-0", "t-1"], done_ts=5012)
    tb.emit("A", 6000, "shutdown", committed=True)

    out = tmp_path / "report"
    run_analysis(spark, str(tb.dir), out, Console(file=open(tmp_path / "log.txt", "w")))  # noqa: SIM115
    crb = pd.read_parquet(out / "tables" / "consumer_rebalances.parquet")
    a = crb[crb.consumer == "A"].sort_values("start")
    assert list(a.rebalance) == [1, 2, 3]  # the second life's rebalance 1 is numbered on
    assert list(a.status) == ["done"] * 3 and list(a.end) == [1010, 2015, 5015]
    grb = pd.read_parquet(out / "tables" / "group_rebalances.parquet")
    assert len(grb) == 4  # 1000, 2000, 3000, 5000: not one rebalance spanning both lives

    own = pd.read_parquet(out / "tables" / "ownership.parquet")
    first_life = own[(own.consumer == "A") & (own.partition == 0) & (own.owned_from == 2015)].iloc[0]
    # killed: its ownership ends with its last line, not when the next life owns t-0 again
    assert first_life.owned_to == 2400 and first_life.end_reason.startswith("its process ended")
    unowned = pd.read_parquet(out / "tables" / "unowned.parquet")
    taken_by_b = unowned[(unowned.partition == 0) & (unowned.new_owner == "B")].iloc[0]
    assert taken_by_b.unowned_ms == 3010 - 2400
