"""``zkconsumer sim --seeds N`` on Spark (the path issue 39's 10,000 seeds take): the seeds run as Spark tasks and
each gives the trace it gives in this process, and ``--json`` prints the JSON alone on stdout, so that
``--json > results.json`` is a file a program can read."""

from __future__ import annotations

import json

from zkconsumer.cli import main
from zkconsumer.sim.runs import SimJob, SourceKind, run_seed


def test_seeds_on_spark_give_the_traces_they_give_here_and_stdout_is_the_json(spark, capsys) -> None:
    assert main(["sim", "--profile", "kafka-0.8", "--scenario", "gc-pause", "--seeds", "3", "--first-seed", "4",
                 "--shrink", "0", "--master", "local[2]", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    job = SimJob("kafka-0.8", SourceKind.SCENARIO, scenario="gc-pause")
    assert [s["seed"] for s in out["seeds"]] == [4, 5, 6]
    assert [s["trace_sha256"] for s in out["seeds"]] == [run_seed(job, s).trace_sha256 for s in (4, 5, 6)]
    assert out["breaking_runs"] == 3 and out["breaches"]["overlaps"] == 3  # catalogue mode a, every seed
