"""Trace reading: bad input is reported with file:line and never fatal; unusable directories are errors."""

from __future__ import annotations

import json

import pytest

from zkconsumer.analysis.traces import BAD_SCHEMA, TraceInputError, diagnose, local_frame, read_traces, trace_files
from zkconsumer.cli import main


def test_missing_and_empty_directories_are_clear_errors(tmp_path, capsys):
    with pytest.raises(TraceInputError, match="does not exist"):
        trace_files(str(tmp_path / "nope"))
    with pytest.raises(TraceInputError, match="no \\*.jsonl files"):
        trace_files(str(tmp_path))
    (tmp_path / "a.jsonl").write_text("")
    with pytest.raises(TraceInputError, match="are empty"):
        trace_files(str(tmp_path))
    # the CLI turns them into a one-line error and exit code 2, before any JVM starts
    assert main(["analyze", str(tmp_path / "nope"), "--out", str(tmp_path / "out")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("text, reason", [
    ("", "empty line"),
    ("   ", "empty line"),
    ("{", "invalid JSON"),
    ("[1, 2]", "invalid JSON (not a JSON object but list)"),
    ('{"v":1,"ts":1,"event":"shutdown","group":"g","consumer":"c"}', "missing field(s): seq"),
    ('{"v":2,"ts":1,"event":"shutdown","group":"g","consumer":"c","seq":1}', "unsupported schema version v=2"),
    ('{"v":1,"ts":"x","event":"shutdown","group":"g","consumer":"c","seq":1}', "wrong type for field(s): ts"),
    ('{"v":1,"ts":1,"event":"released","group":"g","consumer":"c","seq":1,"rebalance":1,"partitions":5}',
     "malformed field(s): partitions (expected a JSON list)"),
])
def test_diagnose(text, reason):
    assert diagnose(text).startswith(reason)


@pytest.mark.parametrize("in_memory", [True, False], ids=["in-memory", "staged"])
def test_line_numbers_exact_when_files_are_split(spark, tmp_path, in_memory):
    """Force many Spark splits per file: line numbers must still be the file's own, whether the parsed lines are
    held in memory (coalesced into one partition: the row ids are computed per split, below the coalesce) or
    staged as Parquet."""
    d = tmp_path / "traces"
    d.mkdir()
    expected = set()
    for name in ("c1", "c2"):
        lines = []
        for i in range(1, 401):
            if i % 97 == 0:
                lines.append("{garbage")
                expected.add((f"{name}.jsonl", i))
            else:
                lines.append(json.dumps({"v": 1, "ts": i, "event": "record_delivered", "group": "g",
                                         "consumer": name, "seq": i, "topic": "t", "partition": 0,
                                         "offset": i, "thread": f"{name}-0"}))
        (d / f"{name}.jsonl").write_text("\n".join(lines))  # last line without newline: a killed writer
    saved = spark.conf.get("spark.sql.files.maxPartitionBytes")
    spark.conf.set("spark.sql.files.maxPartitionBytes", "8192")  # ~8 splits a file: each split a task
    try:
        ts = read_traces(spark, str(d), tmp_path / "work", in_memory=in_memory)
        got = {(r["file"], r["line"]) for r in ts.bad.collect()}
        n_splits = spark.read.text(str(d / "*.jsonl")).rdd.getNumPartitions()
    finally:
        spark.conf.set("spark.sql.files.maxPartitionBytes", saved)
    assert n_splits > 10
    assert got == expected
    assert ts.lines == 800 and ts.bad_count == len(expected) and ts.valid == 800 - len(expected)
    assert ts.events.count() == ts.valid
    assert (tmp_path / "work" / "lines.parquet").exists() is not in_memory


def test_per_record_lines_parse_like_the_rest(spark, tmp_path):
    """Deliveries and commits take the narrow parse (compact JSON, as consumers write it) or the full one (any
    other spacing); both give the same rows, and a bad per-record field still makes the line bad."""
    d = tmp_path / "traces"
    d.mkdir()
    good = {"v": 1, "ts": 5, "event": "record_delivered", "group": "g", "consumer": "c", "seq": 1, "topic": "t-1",
            "partition": 3, "offset": 7, "thread": "c-0"}
    commit = {**good, "event": "offset_committed", "seq": 2, "offset": 8, "store": "kafka", "mode": "coordinator",
              "generation": 4, "member_id": "m"}
    compact = [json.dumps(r, separators=(",", ":")) for r in (good, commit)]
    spaced = [json.dumps({**r, "seq": r["seq"] + 2}) for r in (good, commit)]
    bad = [json.dumps({**good, "seq": 9, "offset": "x"}, separators=(",", ":")),  # wrong type: bad
           json.dumps({**good, "seq": 10, "partition": None}, separators=(",", ":")),  # missing: bad
           '{"v":1,"event":"record_delivered","nested":{"event":"record_delivered"}}']  # missing fields
    unrelated = json.dumps({**good, "seq": 11, "rebalance": "x"}, separators=(",", ":"))  # ignored (docs)
    (d / "c.jsonl").write_text("\n".join([*compact, *spaced, *bad, unrelated]) + "\n")
    ts = read_traces(spark, str(d), tmp_path / "work")
    rows = {r["seq"]: r.asDict() for r in ts.events.collect()}
    assert sorted(rows) == [1, 2, 3, 4, 11]
    keep = ("ts", "event", "group", "consumer", "topic", "partition", "offset", "store", "mode")
    for a, b in ((1, 3), (2, 4)):
        assert {k: rows[a][k] for k in keep} == {k: rows[b][k] for k in keep}
    assert rows[2]["store"] == "kafka" and rows[1]["mode"] == "zookeeper"
    got = {r["line"]: r["reason"] for r in ts.bad.collect()}
    assert got == {5: "wrong type for field(s): offset", 6: "missing field(s) for record_delivered: partition",
                   7: "missing field(s): ts, group, consumer, seq"}
    assert ts.event_counts["record_delivered"] == 3 and ts.event_counts["offset_committed"] == 2


def test_rows_held_by_the_driver_become_a_local_relation_not_a_python_rdd(spark):
    """A Python RDD's first job starts Spark's Python workers (~1 s of a lab run's analysis, for rows the driver
    already has): the bad lines and the split table are local relations the JVM evaluates alone."""
    rows = [("a.jsonl", 3, "not JSON", "{"), ("b.jsonl", 1, "unknown event 'x'", None)]
    for given in (rows, []):
        df = local_frame(spark, given, BAD_SCHEMA)
        plan = df._jdf.queryExecution().analyzed().toString()
        assert "LocalRelation" in plan and "LogicalRDD" not in plan
        assert df.schema == BAD_SCHEMA
        assert [tuple(r) for r in df.collect()] == given
    assert local_frame(spark, [], BAD_SCHEMA).groupBy("file").count().collect() == []
