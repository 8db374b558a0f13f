"""Write result tables as Parquet (a Spark directory) and CSV (one file), and remember what was written.

Parquet keeps types (arrays, maps) for later Spark/pandas work; CSV is for eyes and spreadsheets, so nested
columns become JSON text there. The CSV is written by one task (``coalesce(1)``) and its part file renamed to
``<name>.csv``: result tables are small next to the traces. On a cluster, ``--out`` must be on storage the
driver and executors share (NFS, HDFS via a URI) since executors write the files.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as parquet
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T


@dataclass
class WrittenTable:
    name: str
    rows: int
    parquet: str
    csv: str
    description: str


@dataclass
class TableWriter:
    out_dir: Path
    csv: bool = True
    written: list[WrittenTable] = field(default_factory=list)

    def write(self, name: str, df: DataFrame, description: str) -> WrittenTable:
        tables = self.out_dir / "tables"
        tables.mkdir(parents=True, exist_ok=True)
        pq = tables / f"{name}.parquet"
        df.write.mode("overwrite").parquet(str(pq))
        rows = parquet_rows(pq)
        if rows is None:
            rows = df.sparkSession.read.parquet(str(pq)).count()
        csv_path = tables / f"{name}.csv"
        if self.csv:
            write_single_csv(df.sparkSession.read.parquet(str(pq)), csv_path)
        t = WrittenTable(name, rows, str(pq.relative_to(self.out_dir)),
                         str(csv_path.relative_to(self.out_dir)) if self.csv else "", description)
        self.written.append(t)
        return t


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
