"""Read a trace directory (docs/trace.md) with Spark, keeping every malformed line with its file and line.

JSON is parsed by Spark itself (``from_json``), not in Python: a 10-million-line trace stays in the JVM.
Structured fields whose shape depends on the event (``partitions`` is a list in ``released`` and an object in
``claimed``) are read as raw JSON text first and decoded per event. A line is *bad* when it is not a JSON
object, lacks a field the analysis needs, has a field of the wrong type or names an unknown event; bad lines
are counted and reported, never dropped silently and never fatal.

Line numbers: the text source gives no line numbers, so each row gets ``monotonically_increasing_id`` (dense
within a Spark partition) plus its file split's start offset; counting rows per (file, split) and ordering
the splits of a file by start offset turns the id into an exact 1-based line number, with no shuffle.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from zkconsumer.errors import ZkConsumerError
from zkconsumer.trace import EVENTS, LAB_EVENTS, SCHEMA_VERSION
from zkconsumer.types import GroupMode


class TraceInputError(ZkConsumerError, ValueError):
    """The trace directory cannot be analysed at all (missing, empty): a user error, not a bad line."""


L, S, B = T.LongType(), T.StringType(), T.BooleanType()
#: Every field any event may carry. Raw-JSON fields (objects, lists) are strings here, decoded per event.
FIELDS: dict[str, T.DataType] = {
    "v": L, "ts": L, "event": S, "group": S, "consumer": S, "seq": L, "mode": S,
    "subscription": S, "pattern": S, "cause": S, "rebalance": L, "attempt": L, "ids_cversion": L,
    "attempts": L, "duration_ms": L, "partitions": S, "assignment": S, "strategy": S, "path": S,
    "topic": S, "partition": L, "thread": S, "holder": S, "owned": S, "error": S,
    "same_session": B, "committed": B, "offset": L, "from_offset": L, "to_offset": L, "reset": S,
    "generation": L, "member_id": S, "store": S,  # coordinator mode; the broker-side offset store
    "sent_ts": L,  # offset_committed (ZooKeeper store): when the write was sent
    "fault": S, "target": S, "session_timeout_ms": L, "step": S,  # the lab's fault and step events
    "waited_ms": L, "rebalance_timeout_ms": L, "member_state": S, "waiting_for": S, "join_errors": S,  # join_stalled
    "group_state": S, "group_protocol": S, "group_members": S, "describe_error": S,
    "phases_ms": S,  # rebalance_done / rebalance_failed: where the time went (the report's lanes show its backoff)
}
COMMON = ("v", "ts", "event", "group", "consumer", "seq")
#: Fields the analysis needs beyond COMMON, per event; others are optional.
REQUIRED: dict[str, tuple[str, ...]] = {
    "registered": ("subscription",),
    "rebalance_triggered": ("cause",),
    "attempt_started": ("rebalance", "attempt"),
    "released": ("rebalance", "partitions"),
    "assigned": ("rebalance", "assignment"),
    "claim_conflict": ("rebalance", "attempt", "topic", "partition"),
    "claimed": ("rebalance", "partitions"),
    "rebalance_done": ("rebalance", "owned"),
    "rebalance_failed": ("rebalance",),
    "session_expired": (), "connection_suspended": (), "reconnected": (), "shutdown": (),
    "offset_committed": ("topic", "partition", "offset"),
    "offset_reset": ("topic", "partition", "from_offset", "to_offset"),
    "record_delivered": ("topic", "partition", "offset", "thread"),
    "fault_injected": ("fault",), "fault_healed": ("fault", "session_timeout_ms"), "lab_step": ("step",),
    "join_stalled": ("waited_ms",),
}
assert set(REQUIRED) == EVENTS, "REQUIRED must cover every trace event"

_SCHEMA = T.StructType([T.StructField(k, v) for k, v in FIELDS.items()]
                       + [T.StructField("_corrupt", S)])
_LIST = T.ArrayType(S)
_OBJ = T.MapType(S, S)
BAD_TEXT_CHARS = 300


@dataclass
class TraceSet:
    """A parsed trace directory: valid events (persisted) and bad lines, with the counts the report shows."""

    events: DataFrame
    bad: DataFrame
    files: int
    lines: int
    valid: int
    bad_count: int
    #: the lab's own lines (``fault_injected`` / ``fault_healed``), kept out of ``events``: no consumer wrote them
    lab_events: DataFrame | None = None
    #: every consumer event but the deliveries, in memory: commits, resets and the rebalance lines
    small: DataFrame | None = None
    _deliveries: DataFrame | None = None
    #: valid lines per event (lab events included), counted while staging: empty parts cost no Spark job
    event_counts: dict[str, int] = field(default_factory=dict)

    def deliveries(self) -> DataFrame:
        """The ``record_delivered`` lines, read from the staged Parquet (too many to hold in memory)."""
        d = self._deliveries if self._deliveries is not None else self.events.where(
            F.col("event") == "record_delivered")
        return d.select("group", "consumer", "file", "seq", "ts", "topic", "partition", "offset")

    def rest(self) -> DataFrame:
        """Every consumer event but the deliveries."""
        return self.small if self.small is not None else self.events.where(F.col("event") != "record_delivered")

    def control(self) -> DataFrame:
        """Everything but deliveries and commits: the small part rebalance analysis works on."""
        return self.rest().where(F.col("event") != "offset_committed")


def trace_files(trace_dir: str) -> str:
    """Validate a local trace directory and return the glob Spark reads (remote URIs are passed through)."""
    if "://" in trace_dir and not trace_dir.startswith("file://"):
        return trace_dir.rstrip("/") + "/*.jsonl"
    path = Path(trace_dir.removeprefix("file://"))
    if not path.exists():
        raise TraceInputError(f"trace directory {trace_dir} does not exist")
    if not path.is_dir():
        raise TraceInputError(f"{trace_dir} is not a directory (give the directory holding <consumer>.jsonl)")
    files = sorted(p for p in path.glob("*.jsonl") if p.is_file())
    if not files:
        raise TraceInputError(f"trace directory {trace_dir} has no *.jsonl files")
    if all(os.path.getsize(p) == 0 for p in files):
        raise TraceInputError(f"trace directory {trace_dir}: all {len(files)} *.jsonl files are empty")
    return str(path.resolve() / "*.jsonl")


def _quick_ok(p: Column) -> Column:
    """True for a well-formed line, decided on the typed parse alone: the cheap test every line takes."""
    required = F.lit(False)
    for event, fields in REQUIRED.items():
        cond = p["event"] == event
        for k in fields:
            cond = cond & p[k].isNotNull()
        required = required | cond
    shapes = (F.when(p["event"].isin("released", "claimed"), F.col("_parts").isNotNull())
              .when(p["event"] == "rebalance_done", F.col("_owned").isNotNull())
              .when(p["event"] == "assigned", F.col("_assignment").isNotNull())
              .otherwise(F.lit(True)))
    common = F.lit(True)
    for k in COMMON:
        common = common & p[k].isNotNull()
    return F.coalesce(p["_corrupt"].isNull() & common & (p["v"] == SCHEMA_VERSION) & required & shapes,
                      F.lit(False))


_PY_TYPES: dict[type, tuple[type, ...]] = {T.LongType: (int,), T.BooleanType: (bool,)}


def diagnose(text: str) -> str:
    """Why a line failed :func:`_quick_ok`, in words. Runs on the driver, on bad lines only: a Spark
    expression this detailed costs seconds of query planning in every run, good input or not."""
    if not text.strip():
        return "empty line"
    try:
        obj = json.loads(text)
    except ValueError as e:
        return f"invalid JSON ({e.msg} at column {e.colno})"
    if not isinstance(obj, dict):
        return f"invalid JSON (not a JSON object but {type(obj).__name__})"
    present = {k for k, v in obj.items() if v is not None}
    missing = [k for k in COMMON if k not in present]
    if missing:
        return "missing field(s): " + ", ".join(missing)
    if obj["v"] != SCHEMA_VERSION:
        return f"unsupported schema version v={obj['v']}"
    if obj["event"] not in EVENTS:
        return f"unknown event {obj['event']!r}"
    wrong = [k for k, t in FIELDS.items() if k in present and type(t) in _PY_TYPES
             and (not isinstance(obj[k], _PY_TYPES[type(t)]) or (t == L and isinstance(obj[k], bool)))]
    wrong += [k for k, t in FIELDS.items() if k in present and isinstance(t, T.StringType)
              and isinstance(obj[k], bool | int | float) and k in ("event", "group", "consumer")]
    if wrong:
        return "wrong type for field(s): " + ", ".join(wrong)
    missing = [k for k in REQUIRED[obj["event"]] if k not in present]
    if missing:
        return f"missing field(s) for {obj['event']}: " + ", ".join(missing)
    shapes = {"released": ("partitions", list), "claimed": ("partitions", dict),
              "rebalance_done": ("owned", list), "assigned": ("assignment", dict)}
    if obj["event"] in shapes:
        key, kind = shapes[obj["event"]]
        if not isinstance(obj[key], kind):
            return f"malformed field(s): {key} (expected a JSON {'list' if kind is list else 'object'})"
    return "malformed line"


#: The per-record events: nearly every line of a long trace. They are parsed against the few fields they may
#: carry (COMMON, theirs, the coordinator mode's), not all of FIELDS: about 10% less parse time at 1M lines.
HOT_EVENTS = ("record_delivered", "offset_committed")
HOT_FIELDS = (*COMMON, "topic", "partition", "offset", "thread", "store", "sent_ts", "mode", "generation",
              "member_id")
_HOT_SCHEMA = T.StructType([T.StructField(k, FIELDS[k]) for k in HOT_FIELDS] + [T.StructField("_corrupt", S)])
_JSON_OPTIONS = {"columnNameOfCorruptRecord": "_corrupt", "mode": "PERMISSIVE"}


def _typed(value: Column) -> Column:
    """The typed parse of a line as a struct of every FIELDS field plus ``_corrupt``.

    A line that names a per-record event (a substring test: the parse below decides) is parsed with the narrow
    schema first; when that parse is clean, complete and says the event is one of HOT_EVENTS, its struct is
    widened with nulls. Every other line (control events, and anything malformed) gets the full parse, so what
    makes a line bad is unchanged except in one respect, deliberately: a per-record line's *unrelated* fields
    (``rebalance`` on a ``record_delivered``) are ignored like unknown fields, not type-checked."""
    candidate = value.contains('"record_delivered"') | value.contains('"offset_committed"')
    hot = F.from_json(value, _HOT_SCHEMA, _JSON_OPTIONS)
    clean = hot["_corrupt"].isNull() & hot["event"].isin(*HOT_EVENTS)
    for k in HOT_FIELDS[:len(COMMON)]:
        clean = clean & hot[k].isNotNull()
    widened = F.struct(*[(hot[k] if k in HOT_FIELDS else F.lit(None).cast(t)).alias(k) for k, t in FIELDS.items()],
                       F.lit(None).cast(S).alias("_corrupt"))
    return F.when(candidate & clean, widened).otherwise(F.from_json(value, _SCHEMA, _JSON_OPTIONS))


def _parse(df: DataFrame) -> DataFrame:
    """Add the typed parse ``p`` and the per-event decodings of the raw-JSON fields."""
    parsed = df.select("*", _typed(F.col("value")).alias("p"))
    event = F.col("p.event")
    parts = F.when(event == "released", F.from_json("p.partitions", _LIST)).when(
        event == "claimed", F.map_keys(F.from_json("p.partitions", _OBJ)))
    return parsed.select(
        "*", parts.alias("_parts"),
        F.when(event == "claimed", F.from_json("p.partitions", _OBJ)).alias("_claim_map"),
        F.when(event == "rebalance_done", F.from_json("p.owned", _LIST)).alias("_owned"),
        F.when(event == "assigned", F.from_json("p.assignment", _OBJ)).alias("_assignment"))


#: Parsed fields the analysis uses; the others are validated but not staged.
STAGED = ("ts", "event", "group", "consumer", "seq", "cause", "rebalance", "attempt", "ids_cversion", "attempts",
          "strategy", "topic", "partition", "offset", "from_offset", "to_offset", "reset", "store", "sent_ts", "fault",
          "target", "session_timeout_ms", "step", "assignment", "phases_ms")


def _local_jsonl(trace_dir: str) -> list[Path] | None:
    """The ``*.jsonl`` files Spark reads in a trace directory (like Spark's file listing, names starting with
    ``_`` or ``.`` are not data), or None when the directory is not on a local disk."""
    if "://" in trace_dir and not trace_dir.startswith("file://"):
        return None
    return [p for p in Path(trace_dir.removeprefix("file://")).glob("*.jsonl")
            if p.is_file() and not p.name.startswith(("_", "."))]


def _local_files(glob: str) -> int | None:
    """Non-empty files the glob (``<dir>/*.jsonl``) names: the files that have lines; None when not local."""
    files = _local_jsonl(glob.rsplit("/", 1)[0])
    return None if files is None else sum(1 for p in files if p.stat().st_size)


#: A trace this small (bytes of its ``*.jsonl``: about 200,000 lines at ~160 bytes a line) is held in memory
#: rather than staged, and a one-shot CLI run gives its JVM quick-start options (``jvm.py``).
SMALL_TRACE_BYTES = 32 * 2**20


def trace_bytes(trace_dir: str) -> int | None:
    """Bytes of the ``*.jsonl`` files of a local trace directory; None when it is not on a local disk."""
    files = _local_jsonl(trace_dir)
    return None if files is None else sum(p.stat().st_size for p in files)


def is_small(trace_dir: str) -> bool:
    size = trace_bytes(trace_dir)
    return size is not None and size < SMALL_TRACE_BYTES


def read_traces(spark: SparkSession, trace_dir: str, work_dir: str | Path, in_memory: bool | None = None) -> TraceSet:
    """Parse every ``*.jsonl`` of ``trace_dir``; keep valid events; bad lines carry file and line number.

    Parsed lines are staged as Parquet in ``work_dir``: every later query then scans a few typed columns
    and plans against a short lineage, instead of re-parsing JSON (or holding it all in memory). The lines
    and bad lines are counted while staging (an observation, no extra job); the per-split line counts that
    turn row ids into line numbers are only gathered when there are bad lines to number. Everything but the
    deliveries (a few percent of a long trace) is then held in memory once, so the many small queries of the
    rebalance, commit and invariant analyses never re-scan the staged trace.

    ``in_memory`` (default: a local trace under SMALL_TRACE_BYTES) holds the parsed lines in memory, in one
    partition, instead: writing and re-reading Parquet, the small part's own copy and a task per file split cost
    a small trace more than they save (about 2 s of a cold 3,000-line run).
    """
    glob = trace_files(trace_dir)
    if in_memory is None:
        in_memory = is_small(trace_dir)
    parsed = _parse(_raw_lines(spark, glob)).withColumn("_ok", _quick_ok(F.col("p")))
    staged = str(Path(work_dir) / "lines.parquet")
    counted = Observation("lines")
    bad_only = ~F.col("_ok")
    lines_df = parsed.select(
        "file", F.when(bad_only, F.col("_block")).alias("_block"), F.when(bad_only, F.col("_id")).alias("_id"),
        "_ok", F.when(bad_only, F.col("value")).alias("_text"),
        *[F.col(f"p.{k}").alias(k) for k in STAGED],
        F.coalesce("p.mode", F.lit(GroupMode.ZOOKEEPER.value)).alias("mode"),  # no mode written: a 0.8 member's
        F.col("p.error").alias("failure"), F.col("_parts").alias("parts"), F.col("_owned").alias("owned"),
    ).observe(counted, F.count(F.lit(1)).alias("lines"), F.sum(F.when(~F.col("_ok"), 1).otherwise(0)).alias("bad"),
              *[F.sum(F.when(F.col("_ok") & (F.col("event") == e), 1).otherwise(0)).alias(e) for e in sorted(EVENTS)])
    if in_memory:  # coalesce keeps each split's row ids: they are computed below it, per split
        rows = lines_df.coalesce(1).localCheckpoint(eager=True)
    else:
        lines_df.write.mode("overwrite").parquet(staged)
        rows = spark.read.parquet(staged)
    lines, bad_count = int(counted.get["lines"] or 0), int(counted.get["bad"] or 0)
    counts = {e: int(counted.get[e] or 0) for e in sorted(EVENTS)}

    files = _local_files(glob)
    if bad_count or files is None:
        files, bad_rows = _numbered_bad_rows(spark, glob, rows)
    bad = _diagnosed(spark, bad_rows) if bad_count else local_frame(spark, [], BAD_SCHEMA)
    valid = rows.where(F.col("_ok")).drop("_block", "_id", "_ok", "_text")
    lab = F.col("event").isin(*sorted(LAB_EVENTS))
    small = valid.where(F.col("event") != "record_delivered")
    if not in_memory:
        small = small.localCheckpoint(eager=True)
    return TraceSet(events=valid.where(~lab), bad=bad, files=files, lines=lines, valid=lines - bad_count,
                    bad_count=bad_count, lab_events=small.where(lab), small=small.where(~lab), event_counts=counts,
                    _deliveries=valid.where(F.col("event") == "record_delivered"))


def _raw_lines(spark: SparkSession, glob: str) -> DataFrame:
    """The lines with their file, split start and row id; reading the same files again gives the same ids."""
    return (spark.read.option("recursiveFileLookup", "false").text(glob)
            .select(F.col("value"), F.col("_metadata.file_name").alias("file"),
                    F.col("_metadata.file_block_start").alias("_block"),
                    F.monotonically_increasing_id().alias("_id")))


def _numbered_bad_rows(spark: SparkSession, glob: str, rows: DataFrame) -> tuple[int, DataFrame]:
    """(files with lines, bad rows with their 1-based line numbers): counting the rows of every file split
    gives each split's first line. Only bad rows keep their split and row id in the staged Parquet (two dense
    columns fewer to write for every good line), so the splits are counted on the text itself, read again
    without parsing: the same files in the same session give the same splits and ids."""
    blocks = (_raw_lines(spark, glob).groupBy("file", "_block")
              .agg(F.count("*").alias("n"), F.min("_id").alias("first")).collect())
    base, seen = [], {}
    for b in sorted(blocks, key=lambda r: (r["file"], r["_block"])):
        base.append((b["file"], b["_block"], b["first"], seen.get(b["file"], 0)))
        seen[b["file"]] = seen.get(b["file"], 0) + b["n"]
    base_df = local_frame(spark, base, _SPLITS_SCHEMA)
    return len(seen), (rows.where(~F.col("_ok")).join(F.broadcast(base_df), ["file", "_block"])
                       .select("file", (F.col("_id") - F.col("_first") + F.col("_base") + 1).alias("line"),
                               F.col("_text").alias("text")))


MAX_DIAGNOSED = 100_000
BAD_SCHEMA = T.StructType([T.StructField("file", T.StringType()), T.StructField("line", T.LongType()),
                           T.StructField("reason", T.StringType()), T.StructField("text", T.StringType())])
_SPLITS_SCHEMA = T.StructType([T.StructField(name, T.StringType() if name == "file" else T.LongType())
                               for name in ("file", "_block", "_first", "_base")])


def local_frame(spark: SparkSession, rows: list[tuple], schema: T.StructType) -> DataFrame:
    """A DataFrame of rows the driver holds, made from an Arrow table: pyspark makes one from a list of rows as
    a Python RDD, whose first job starts Spark's Python workers (~1 s of a lab-sized trace's analysis in a fresh
    JVM, for rows that are already here); from Arrow it is a local relation the JVM evaluates on its own.
    pyspark < 4 (no Arrow tables in ``createDataFrame``): the list, as before."""
    if int(spark.version.split(".")[0]) < 4:
        return spark.createDataFrame(rows, schema)
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow = to_arrow_schema(schema)
    columns = [pa.array([row[i] for row in rows], type=f.type) for i, f in enumerate(arrow)]
    return spark.createDataFrame(pa.Table.from_arrays(columns, schema=arrow))


def _diagnosed(spark: SparkSession, bad_rows: DataFrame) -> DataFrame:
    """Bad lines with a reason: the first MAX_DIAGNOSED (by file, line) diagnosed in Python, the rest
    (a file that is not a trace at all) kept with file:line and a generic reason."""
    head = bad_rows.orderBy("file", "line").limit(MAX_DIAGNOSED + 1).collect()
    rows = [(r["file"], r["line"], diagnose(r["text"] or ""), (r["text"] or "")[:BAD_TEXT_CHARS])
            for r in head[:MAX_DIAGNOSED]]
    bad = local_frame(spark, rows, BAD_SCHEMA)
    if len(head) > MAX_DIAGNOSED:
        last = (head[MAX_DIAGNOSED - 1]["file"], head[MAX_DIAGNOSED - 1]["line"])
        rest = bad_rows.where((F.col("file") > last[0]) | ((F.col("file") == last[0]) & (F.col("line") > last[1])))
        bad = bad.unionByName(rest.select("file", "line", F.lit("malformed line (not diagnosed)").alias("reason"),
                                          F.substring("text", 1, BAD_TEXT_CHARS).alias("text")))
    return bad.orderBy("file", "line").localCheckpoint(eager=True)
