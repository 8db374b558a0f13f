"""The sweep on a real Spark standalone cluster (a master and a worker JVM from the pyspark wheel).

The executors run Python with ``-S`` and only site-packages on PYTHONPATH: the editable install of zkconsumer
is invisible to them, so the job can only import the assignors from the zip the driver ships (``--master``
path) or that spark-submit ships (``--py-files`` path). That is what a cluster without the project needs.
The module takes about two minutes: the master and worker JVMs, then a driver and an executor JVM per job.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from helpers import wait_until

from zkconsumer.analysis.spark import package_zip
from zkconsumer.analysis.sweep import GRID_QUICK, SweepConfig, run_local

REPO = Path(__file__).resolve().parents[2]
#: A cluster's default is 64 shuffle partitions: 64 tasks per stage, each a round trip to a Python worker, for a
#: sweep of a few dozen scenarios on one 2-core worker. What these tests check is that the package reaches the
#: executors, not Spark's shuffle width.
SMALL_SHUFFLE = ("--shuffle-partitions", "4")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[tuple[str, Path, dict[str, str]]]:
    import pyspark

    home = Path(pyspark.__file__).parent
    root = tmp_path_factory.mktemp("standalone")
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_LOG_DIR": str(root / "logs"), "SPARK_NO_DAEMONIZE": "1"}
    port = _free_port()
    spark_class = [str(home / "bin" / "spark-class")]
    procs = []
    master_log = open(root / "master.log", "w")  # noqa: SIM115 - closed in the teardown
    worker_log = open(root / "worker.log", "w")  # noqa: SIM115
    try:
        procs.append(subprocess.Popen(
            spark_class + ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                           "--webui-port", str(_free_port())],
            env=env, stdout=master_log, stderr=subprocess.STDOUT, start_new_session=True))
        wait_until(lambda: _listening(port), timeout=60, message="standalone master listening")
        work = root / "work"
        procs.append(subprocess.Popen(
            spark_class + ["org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}", "--host",
                           "127.0.0.1", "--cores", "2", "--memory", "1g", "--work-dir", str(work),
                           "--webui-port", str(_free_port())],
            env=env, stdout=worker_log, stderr=subprocess.STDOUT, start_new_session=True))
        wait_until(lambda: "Registering worker" in (root / "master.log").read_text(), timeout=60,
                   message="worker registered with the master")
        # executors' Python: this interpreter without site processing, so no editable install of zkconsumer
        wrapper = root / "python-no-site"
        wrapper.write_text("#!/bin/sh\n"
                           f"PYTHONPATH={sysconfig.get_paths()['purelib']}${{PYTHONPATH:+:$PYTHONPATH}} "
                           f"exec {sys.executable} -S \"$@\"\n")
        wrapper.chmod(0o755)
        client_env = {**env, "PYSPARK_PYTHON": str(wrapper), "PYSPARK_DRIVER_PYTHON": sys.executable}
        yield f"spark://127.0.0.1:{port}", work, client_env
    finally:
        for p in reversed(procs):
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(30)
        master_log.close()
        worker_log.close()


def _check(out: Path, scenarios: int, work: Path, apps_before: set[str]) -> None:
    got = pd.read_parquet(out / "tables" / "sweep_results.parquet")
    want = run_local(SweepConfig(GRID_QUICK, seed=1, changes=3), scenarios)
    key = ["scenario_id", "strategy", "step"]
    pd.testing.assert_frame_equal(got.sort_values(key).reset_index(drop=True),
                                  want.sort_values(key).reset_index(drop=True), check_dtype=False)
    new_apps = {p.name for p in work.glob("app-*")} - apps_before
    assert len(new_apps) == 1, "the job ran on the standalone worker"
    assert (out / "report.md").is_file()


def test_cli_sweep_with_master_ships_the_package(cluster, tmp_path):
    url, work, env = cluster
    before = {p.name for p in work.glob("app-*")}
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, "-m", "zkconsumer", "sweep", "--out", str(out), "--quick",
                          "--scenarios", "12", "--master", url, *SMALL_SHUFFLE], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    _check(out, 12, work, before)  # 12 scenarios reach the worker as well as 24 did, in less of make test's time


@pytest.mark.extended  # the second way to the same executors (~45 s): make full; make test runs --master's
def test_spark_submit_with_py_files(cluster, tmp_path):
    import pyspark

    url, work, env = cluster
    before = {p.name for p in work.glob("app-*")}
    out = tmp_path / "out"
    zip_path = package_zip(tmp_path)
    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    run = subprocess.run([str(submit), "--master", url, "--py-files", str(zip_path),
                          str(REPO / "zkconsumer" / "__main__.py"), "sweep", "--out", str(out), "--quick",
                          "--scenarios", "12", *SMALL_SHUFFLE], env=env, cwd=tmp_path, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    _check(out, 12, work, before)
