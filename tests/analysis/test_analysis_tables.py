"""The driver-side table writer (``TableWriter(local=True)``) writes the CSV Spark writes, byte for byte.

Each case writes one DataFrame both ways (Spark's Parquet and CSV jobs; the driver from one Arrow collect) and
compares the CSV bytes and the Parquet contents.
"""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pytest
from pyspark.sql import functions as F

from zkconsumer.analysis.tables import NotPlain, TableWriter, csv_cell, csv_text

# values whose Spark CSV form the driver reproduces: quotes and commas (quoted, \" inside), JSON text, unicode
PLAIN_TEXT = ["plain", "a,b", 'say "hi"', 'a"b,c', '["x","y"]', "{\"k\":1}", "naïve ✓", "#comment", "a b", "x-1",
              "", None, "'single'", "semi;colon", "tab\u00a0nbsp"]
# values it leaves to Spark: backslashes, line breaks, control characters, edge whitespace
#: list elements become JSON text, where a quote is escaped with a backslash: those lists are Spark's to write
LIST_TEXT = ["plain", "a,b", "naïve ✓", "", "x-1", None]
SPARK_TEXT = ["back\\slash", "two\nlines", "cr\rhere", " lead", "trail ", "tab\tinside", "nul\x00", '\\"', "\t"]

SCHEMA = "id long, name string, flag boolean, share double, tags array<string>, n long"


def _both(spark, tmp_path, df):
    spark_w, local_w = TableWriter(tmp_path / "spark"), TableWriter(tmp_path / "local", local=True)
    a = spark_w.write("t", df, "test table")
    b = local_w.write("t", df, "test table")
    assert a.rows == b.rows == df.count()
    csv_a = (tmp_path / "spark" / "tables" / "t.csv").read_bytes()
    csv_b = (tmp_path / "local" / "tables" / "t.csv").read_bytes()
    pq_a = pd.read_parquet(tmp_path / "spark" / "tables" / "t.parquet")
    pq_b = pd.read_parquet(tmp_path / "local" / "tables" / "t.parquet")
    pd.testing.assert_frame_equal(pq_a.astype(str), pq_b.astype(str))
    return csv_a, csv_b, local_w


def test_plain_values_written_by_the_driver_match_spark(spark, tmp_path):
    shares = [0.0] + [round(i / 10_000, 4) for i in range(10, 20_001, 7)] + [0.001, 0.5, 1.0, 12.25, 1234567.0]
    rows = [(i, PLAIN_TEXT[i % len(PLAIN_TEXT)], i % 3 == 0, shares[i % len(shares)],
             None if i % 5 == 0 else [LIST_TEXT[i % 6], "b,c"], None if i % 4 else -i)
            for i in range(len(shares))]
    df = spark.createDataFrame(rows, SCHEMA).orderBy("id")
    csv_a, csv_b, local_w = _both(spark, tmp_path, df)
    assert csv_text(local_w.tables["t"]) is not None  # the driver wrote it
    assert csv_b == csv_a


def test_values_spark_must_format_fall_back_to_spark(spark, tmp_path):
    for text in SPARK_TEXT:
        with pytest.raises(NotPlain):
            csv_cell(text, pa.string())
    with pytest.raises(NotPlain):
        csv_cell(0.0001, pa.float64())  # Java writes 1.0E-4
    rows = [(i, t, False, 0.25, [t], i) for i, t in enumerate(SPARK_TEXT + PLAIN_TEXT)]
    df = spark.createDataFrame(rows, SCHEMA).orderBy("id")
    csv_a, csv_b, local_w = _both(spark, tmp_path, df)
    assert csv_text(local_w.tables["t"]) is None  # Spark wrote it, from the driver's Parquet
    assert csv_b == csv_a


def test_empty_table_has_the_header_only(spark, tmp_path):
    df = spark.createDataFrame([], SCHEMA)
    csv_a, csv_b, _ = _both(spark, tmp_path, df)
    assert csv_b == csv_a == b"id,name,flag,share,tags,n\n"


def test_known_large_tables_stay_with_spark(spark, tmp_path):
    w = TableWriter(tmp_path, local=True)
    w.write("big", spark.range(3), "pretend-large", rows=10**9)
    assert "big" not in w.tables
    assert sorted((tmp_path / "tables" / "big.csv").read_text().split()) == ["0", "1", "2", "id"]


def test_spark_writes_an_ordered_tables_csv_in_its_order(spark, tmp_path):
    """Part files of different sizes: a plain Parquet read packs them largest first, which put the later (longer)
    rows at the top of the CSV; the writer keeps the table's order."""
    df = (spark.range(0, 400).select("id", F.repeat(F.lit("x"), (F.col("id") / 100).cast("int") * 40).alias("name"))
          .repartitionByRange(4, "id").sortWithinPartitions("id"))
    w = TableWriter(tmp_path)
    w.write("t", df, "test table")
    assert len(list((tmp_path / "tables" / "t.parquet").glob("part-*.parquet"))) == 4
    ids = [int(line.split(",")[0]) for line in (tmp_path / "tables" / "t.csv").read_text().splitlines()[1:]]
    assert ids == list(range(400))
