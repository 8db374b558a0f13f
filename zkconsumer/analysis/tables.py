"""Write result tables as Parquet (a Spark directory) and CSV (one file), and remember what was written.

Parquet keeps types (arrays, maps) for later Spark/pandas work; CSV is for eyes and spreadsheets, so nested
columns become JSON text there. The CSV is written by one task (``coalesce(1)``) and its part file renamed to
``<name>.csv``: result tables are small next to the traces. On a cluster, ``--out`` must be on storage the
driver and executors share (NFS, HDFS via a URI) since executors write the files.

``local=True`` (analyze's small tables): the table is collected once as Arrow and both files are written by the
driver, one Spark job per table instead of a Parquet job, a CSV job and AQE's extra ones; the collected table
is kept (``tables``) so the report's previews and the plots need no job either. The CSV then has to be the one
Spark would write, byte for byte: :func:`csv_cell` formats the values whose Spark form is plain (numbers,
booleans, text without backslashes, control characters or edge whitespace, lists of those as JSON) and a table
holding anything else is written by Spark from the Parquet file, as before (tests compare both writers).
"""

from __future__ import annotations

import json
import re
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as parquet
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from zkconsumer.errors import ZkConsumerError


@dataclass
class WrittenTable:
    name: str
    rows: int
    parquet: str
    csv: str
    description: str


#: Above this many rows (when the caller knows the count) a local writer leaves the writing to Spark.
LOCAL_MAX_ROWS = 1_000_000


@dataclass
class TableWriter:
    out_dir: Path
    csv: bool = True
    written: list[WrittenTable] = field(default_factory=list)
    local: bool = False
    #: the tables written locally, as collected (previews and plots read these)
    tables: dict[str, pa.Table] = field(default_factory=dict)

    def write(self, name: str, df: DataFrame, description: str, rows: int | None = None) -> WrittenTable:
        """Write ``df``; ``rows``, when known, keeps a table too large for the driver out of the local path."""
        tables = self.out_dir / "tables"
        tables.mkdir(parents=True, exist_ok=True)
        pq = tables / f"{name}.parquet"
        csv_path = tables / f"{name}.csv"
        if self.local and (rows is None or rows <= LOCAL_MAX_ROWS):
            return self._write_local(name, df, description, pq, csv_path)
        df.write.mode("overwrite").parquet(str(pq))
        rows = parquet_rows(pq)
        if rows is None:
            rows = df.sparkSession.read.parquet(str(pq)).count()
        if self.csv:
            write_single_csv(read_in_written_order(df.sparkSession, pq), csv_path)
        t = WrittenTable(name, rows, str(pq.relative_to(self.out_dir)),
                         str(csv_path.relative_to(self.out_dir)) if self.csv else "", description)
        self.written.append(t)
        return t

    def _write_local(self, name: str, df: DataFrame, description: str, pq: Path, csv_path: Path) -> WrittenTable:
        table = df.toArrow()
        if pq.exists():
            shutil.rmtree(pq) if pq.is_dir() else pq.unlink()
        pq.mkdir(parents=True)
        parquet.write_table(table, pq / f"part-00000-{uuid.uuid4()}-c000.snappy.parquet", compression="snappy")
        (pq / "_SUCCESS").touch()
        if self.csv:
            text = csv_text(table)
            if text is None:  # a value whose Spark CSV form is not plain: Spark writes it
                write_single_csv(read_in_written_order(df.sparkSession, pq), csv_path)
            else:
                csv_path.write_text(text, encoding="utf-8")
        self.tables[name] = table
        t = WrittenTable(name, table.num_rows, str(pq.relative_to(self.out_dir)),
                         str(csv_path.relative_to(self.out_dir)) if self.csv else "", description)
        self.written.append(t)
        return t


_PLAIN = re.compile(r"[^\x00-\x20\\\x7f\",]([^\x00-\x1f\\\x7f\",]*[^\x00-\x20\\\x7f\",])?")
_QUOTED = re.compile(r"[^\x00-\x20\\\x7f]([^\x00-\x1f\\\x7f]*[^\x00-\x20\\\x7f])?")
_DECIMALS = 4


class NotPlain(ZkConsumerError, ValueError):
    """A value whose Spark CSV form this module does not reproduce."""


def _text_cell(text: str) -> str:
    """Spark's CSV form of a string: as is, or quoted with ``\\"`` for quotes when it holds a quote or comma."""
    if not text:
        return '""'
    if _PLAIN.fullmatch(text):
        return text
    if _QUOTED.fullmatch(text):
        return '"' + text.replace('"', '\\"') + '"'
    raise NotPlain(text)


def _double_cell(x: float) -> str:
    """Java's ``Double.toString`` where it is plain decimal and short (a rounded share): Python's repr."""
    if x == 0:
        return repr(x)
    r = repr(x)
    if not (1e-3 <= abs(x) < 1e7) or "e" in r or len(r.partition(".")[2]) > _DECIMALS:
        raise NotPlain(r)
    return r


def _json_item(v: Any) -> Any:
    if v is None or isinstance(v, bool | int | str):
        return v
    raise NotPlain(repr(v))


def csv_cell(v: Any, kind: pa.DataType) -> str:
    """One value as Spark's CSV writer (through :func:`flat_for_csv`) writes it; NotPlain when unsure."""
    if v is None:
        return ""
    if pa.types.is_boolean(kind):
        return "true" if v else "false"
    if pa.types.is_integer(kind):
        return str(v)
    if pa.types.is_floating(kind):
        return _double_cell(v)
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return _text_cell(v)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return _text_cell(json.dumps([_json_item(x) for x in v], separators=(",", ":"), ensure_ascii=False))
    raise NotPlain(str(kind))


def csv_text(table: pa.Table) -> str | None:
    """The whole CSV file (header, one line per row), or None when a value is not plain."""
    try:
        kinds = [f.type for f in table.schema]
        lines = [",".join(_text_cell(n) for n in table.column_names)]
        columns = [table.column(i).to_pylist() for i in range(table.num_columns)]
        for row in zip(*columns, strict=True):
            lines.append(",".join(csv_cell(v, k) for v, k in zip(row, kinds, strict=True)))
    except NotPlain:
        return None
    return "\n".join(lines) + "\n"


def parquet_rows(directory: Path) -> int | None:
    """Rows of a Parquet directory Spark wrote, summed from the part files' footers: no Spark job (a count
    costs a job per table, a fixed cost that dominates analyzing a small trace). None when the directory is
    not on a local disk the driver sees (then Spark counts)."""
    if not directory.is_dir():
        return None
    parts = sorted(directory.glob("part-*.parquet"))
    if not parts and not (directory / "_SUCCESS").exists():
        return None
    return sum(parquet.read_metadata(part).num_rows for part in parts)


def read_in_written_order(spark: SparkSession, directory: Path) -> DataFrame:
    """A Parquet directory's rows in the order they were written: part file by part file, row by row.

    A plain ``read.parquet`` packs the part files into read partitions largest first, so an ordered table's CSV
    came out in the order of its part files' sizes (a range-partitioned sort's later, longer rows first). The
    file's name (``part-<n>-…``) and the row's index in it restore the order the writer had."""
    df = spark.read.parquet(str(directory))
    return (df.select("*", F.col("_metadata.file_name").alias("_file"), F.col("_metadata.row_index").alias("_row"))
            .orderBy("_file", "_row").drop("_file", "_row"))


def flat_for_csv(df: DataFrame) -> DataFrame:
    """Arrays, maps and structs as JSON text: CSV has no nested types."""
    nested = (T.ArrayType, T.MapType, T.StructType)
    return df.select(*[F.to_json(F.col(f.name)).alias(f.name) if isinstance(f.dataType, nested) else F.col(f.name)
                       for f in df.schema.fields])


def write_single_csv(df: DataFrame, path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp")
    flat_for_csv(df).coalesce(1).write.mode("overwrite").option("header", True).csv(str(tmp))
    parts = sorted(tmp.glob("part-*.csv"))
    if len(parts) != 1:  # remote or unusual layout: keep Spark's directory as it is
        if path.exists():
            shutil.rmtree(path) if path.is_dir() else path.unlink()
        tmp.rename(path)
        return
    shutil.move(str(parts[0]), path)
    shutil.rmtree(tmp)
