"""The result records (results/*.json, zkconsumer/results/record.py) read with Spark as with plain Python."""

from __future__ import annotations

from zkconsumer.results import record


def test_spark_reads_every_result_record_with_its_provenance(spark) -> None:
    records = record.load_all()
    df = spark.read.json(str(record.RESULTS / "*.json"), multiLine=True)
    rows = df.select("command", "commit", "source.scope", "source.fingerprint").collect()
    assert len(rows) == len(records)
    assert sorted(r["commit"] for r in rows) == sorted(r.commit for r in records)
    assert all(r["scope"] and r["fingerprint"] for r in rows)
