"""The SparkSession every analysis uses: local by default, a cluster with ``--master``.

Python workers must run this very interpreter (PYSPARK_PYTHON), or they would import another pyspark and
not find zkconsumer. On a non-local master the zkconsumer package is zipped and shipped with ``addPyFile``
so executors can import the assignors; pyspark, pandas and pyarrow must already be on the executors.
"""

from __future__ import annotations

import os
import sys
import tempfile
import warnings
import zipfile
from pathlib import Path

from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
#: pyspark's DataFrame debugging wraps every ``functions`` call to record its Python call site in the JVM: about
#: six py4j round trips per call (the active session, a conf, set and clear), 60% of the ~19,000 round trips of a
#: lab-sized analysis, which a cold JVM answers slowly (18.9 → 12.2 s). It only enriches error messages.
DEBUGGING = "spark.python.sql.dataFrameDebugging.enabled"

# pyspark warns about pandas >= 3 when Arrow is used; what we use (mapInArrow, toPandas) works.
warnings.filterwarnings("ignore", message=".*does not yet fully support pandas.*", category=FutureWarning)


def is_local(master: str) -> bool:
    return master.startswith("local")


def local_cores(master: str) -> int:
    """Threads of a ``local[N]`` / ``local[*]`` master (the shuffle width that keeps local runs quick)."""
    inner = master[len("local["):-1] if master.startswith("local[") else "1"
    if inner.split(",")[0] == "*":
        return os.cpu_count() or 2
    try:
        return max(1, int(inner.split(",")[0]))
    except ValueError:
        return os.cpu_count() or 2


def under_spark_submit() -> bool:
    """True inside ``spark-submit``: the JVM exists already and its --master must win."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def build_session(master: str | None = DEFAULT_MASTER, app_name: str = "zkconsumer-analysis",
                  shuffle_partitions: int | None = None, driver_memory: str = "2g",
                  extra_conf: dict[str, str] | None = None, java_options: str | None = None) -> SparkSession:
    """Get (or reuse) a session. Reuse matters: tests and the benchmark share one JVM across jobs.

    ``master=None`` means: spark-submit's --master when launched by it, else ``local[*]``. ``java_options``
    (``jvm.plan_one_shot``) go to a local driver JVM this call starts, as ``spark.driver.defaultJavaOptions``
    so that the user's own ``spark.driver.extraJavaOptions`` still apply (after them); an existing JVM, or one
    spark-submit started, keeps its options.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if master is None and not under_spark_submit():
        master = DEFAULT_MASTER
    local = master is not None and is_local(master)
    if shuffle_partitions is None:
        shuffle_partitions = 2 * local_cores(master) if local and master else 64
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    builder = (builder
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
               .config("spark.default.parallelism", str(shuffle_partitions))
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.execution.arrow.pyspark.enabled", "true")
               .config("spark.sql.adaptive.enabled", "true")
               .config(DEBUGGING, "false")
               .config("spark.executorEnv.PYSPARK_PYTHON", os.environ["PYSPARK_PYTHON"]))
    if local:
        builder = builder.config("spark.driver.memory", driver_memory)
        if java_options and not under_spark_submit():
            builder = builder.config("spark.driver.defaultJavaOptions", java_options)
    for key, value in (extra_conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if not is_local(spark.sparkContext.master):
        ship_package(spark)
    return spark


def package_zip(dest_dir: str | os.PathLike | None = None) -> Path:
    """Zip the zkconsumer package for ``addPyFile`` / ``spark-submit --py-files``: its .py files and the package data
    its code reads (the shipped scenario files, scenario/shipped/*.toml), as the installed package has them."""
    root = Path(__file__).resolve().parents[1]
    dest = Path(dest_dir or tempfile.mkdtemp(prefix="zkconsumer-pyfiles-")) / "zkconsumer.zip"
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted([*root.rglob("*.py"), *root.rglob("shipped/*.toml")]):
            zf.write(path, path.relative_to(root.parent).as_posix())
    return dest


def ship_package(spark: SparkSession) -> None:
    """Make zkconsumer importable on executors unless spark-submit already shipped it (--py-files)."""
    shipped = spark.sparkContext.getConf().get("spark.submit.pyFiles", "") or ""
    if "zkconsumer" not in shipped:
        spark.sparkContext.addPyFile(str(package_zip()))
