"""The ``activity`` table: deliveries and owned / unowned partitions per group and time bucket.

Hand-built frames in (the shapes the pipeline passes), the table out; the pipeline's own run of a hand-built
trace is checked in test_analysis_pipeline.py (test_activity_over_time).
"""

from __future__ import annotations

import pandas as pd
import pytest

from zkconsumer.analysis.activity import MAX_BUCKETS, activity

COLUMNS = ["group", "ts", "bucket_ms", "deliveries", "records_per_s", "owned", "unowned"]


def _frames(spark, deliveries: list[tuple], rest: list[tuple], owners: list[tuple]):
    d = spark.createDataFrame(pd.DataFrame(deliveries, columns=["group", "ts", "topic", "partition"]))
    r = spark.createDataFrame(pd.DataFrame(rest, columns=["group", "ts"]))
    o = spark.createDataFrame(pd.DataFrame(owners, columns=["group", "topic", "partition", "owned_from", "owned_to"]))
    return d, r, o


def test_buckets_without_gaps_count_deliveries_and_owners(spark) -> None:
    # g: t-0 owned 10_200..12_500 then by another member from 14_000 to the end; t-1 owned from 10_100 to the
    # end, by two members at once for a moment (counted once); t-2 only ever delivered (known, never owned)
    deliveries = [("g", 10_300, "t", 0), ("g", 10_400, "t", 0), ("g", 10_999, "t", 1), ("g", 11_000, "t", 2),
                  ("g", 14_500, "t", 1)]
    rest = [("g", 10_050), ("g", 15_400)]
    owners = [("g", "t", 0, 10_200, 12_500), ("g", "t", 0, 14_000, 15_400),
              ("g", "t", 1, 10_100, 13_000), ("g", "t", 1, 12_900, 15_400)]
    got = activity(*_frames(spark, deliveries, rest, owners)).toPandas()
    assert list(got.columns) == COLUMNS
    assert list(got["ts"]) == [10_000, 11_000, 12_000, 13_000, 14_000, 15_000]
    assert set(got["bucket_ms"]) == {1000}
    assert list(got["deliveries"]) == [3, 1, 0, 0, 1, 0]
    assert list(got["records_per_s"]) == [3.0, 1.0, 0.0, 0.0, 1.0, 0.0]
    # sampled at each bucket's last ms (10_999, ..., 14_999) and, for the last bucket, at the last event (15_400)
    assert list(got["owned"]) == [2, 2, 1, 1, 2, 2]
    assert list(got["unowned"]) == [1, 1, 2, 2, 1, 1]


def test_groups_are_apart_and_a_partition_owned_by_nobody_at_first(spark) -> None:
    deliveries = [("a", 2_000, "t", 0), ("b", 7_100, "u", 0)]
    rest = [("a", 1_500), ("a", 3_200), ("b", 7_000)]
    owners = [("a", "t", 0, 2_500, 3_200), ("a", "t", 1, 1_600, 2_100)]
    got = activity(*_frames(spark, deliveries, rest, owners)).toPandas()
    a, b = got[got["group"] == "a"], got[got["group"] == "b"]
    assert list(a["ts"]) == [1_000, 2_000, 3_000]
    assert list(a["owned"]) == [1, 1, 1] and list(a["unowned"]) == [1, 1, 1]  # t-1 until 2_100, t-0 from 2_500
    assert list(b["ts"]) == [7_000] and list(b["deliveries"]) == [1]
    assert list(b["owned"]) == [0] and list(b["unowned"]) == [1]


@pytest.mark.parametrize("span_s, bucket", [(1_999, 1000), (2_001, 2000), (10_000, 5000)])
def test_long_traces_get_whole_second_buckets(spark, span_s: int, bucket: int) -> None:
    start = 1_700_000_000_000
    rest = [("g", start), ("g", start + span_s * 1000)]
    got = activity(*_frames(spark, [("g", start + 1, "t", 0)], rest, [("g", "t", 0, start, start + 5)])).toPandas()
    assert set(got["bucket_ms"]) == {bucket}
    assert len(got) <= MAX_BUCKETS + 1
    assert (got["ts"] % bucket == 0).all() and got["ts"].diff().dropna().eq(bucket).all()
    assert got["deliveries"].sum() == 1 and got["records_per_s"].iloc[0] == pytest.approx(1000 / bucket)
