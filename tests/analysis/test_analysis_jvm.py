"""The one-shot JVM options of ``zkconsumer analyze`` (analysis/jvm.py): which runs get them, and the CDS cache.

No archive is written here (a real one is ~190 MB): the JVM's part — writing the archive at exit, mapping it — is
stood in for by files with and without the archive's magic, and one subprocess checks the options reach the JVM.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from helpers import wait_until

from zkconsumer.analysis import jvm, traces
from zkconsumer.cli import analyze as analyze_cli

C1 = "-XX:TieredStopAtLevel=1"


def _flags(plan: jvm.JvmPlan, prefix: str) -> list[str]:
    return [o for o in plan.options if o.startswith(prefix)]


def test_first_run_writes_the_archive_at_exit_and_later_runs_map_it(tmp_path):
    cache = tmp_path / "cache"
    first = jvm.plan_one_shot(cache, cds=True)
    assert first.options[:2] == [C1, "-XX:+UseSerialGC"]
    assert first.partial is not None and first.archive is not None
    assert _flags(first, "-XX:ArchiveClassesAtExit=") == [f"-XX:ArchiveClassesAtExit={first.partial}"]
    assert first.partial.parent == cache and not _flags(first, "-XX:SharedArchiveFile")

    first.partial.write_bytes(jvm.DYNAMIC_MAGIC + b"\0" * 64)  # what the JVM leaves at its exit
    second = jvm.plan_one_shot(cache, cds=True)
    assert second.partial is None and not first.partial.exists() and first.archive.is_file()
    assert _flags(second, "-XX:SharedArchiveFile=") == [f"-XX:SharedArchiveFile={first.archive}"]
    assert "-Xlog:cds=off" in second.options


def test_a_cut_short_archive_is_dropped_and_other_keys_pruned(tmp_path):
    cache = tmp_path / "cache"
    plan = jvm.plan_one_shot(cache, cds=True)
    cache.mkdir(parents=True, exist_ok=True)
    plan.partial.write_bytes(b"\0" * 64)  # the JVM was killed while writing: no header
    old = cache / "spark-0123456789abcdef.jsa"  # another Java or Spark
    old.write_bytes(jvm.DYNAMIC_MAGIC)
    again = jvm.plan_one_shot(cache, cds=True)
    assert not old.exists() and not plan.archive.exists()
    assert again.partial is not None and not _flags(again, "-XX:SharedArchiveFile")


def test_no_second_writer_while_a_jvm_is_writing(tmp_path):
    cache = tmp_path / "cache"
    plan = jvm.plan_one_shot(cache, cds=True)
    cache.mkdir(parents=True, exist_ok=True)
    plan.partial.write_bytes(b"")
    # a process whose command line names the partial file, as the writing JVM's does
    writer = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()",
                               f"-XX:ArchiveClassesAtExit={plan.partial}"], stdin=subprocess.PIPE)
    try:  # it lives until its stdin closes
        # Popen returns after the fork, maybe before the exec: until then /proc shows the parent's command line
        cmdline = Path(f"/proc/{writer.pid}/cmdline")
        wait_until(lambda: str(plan.partial).encode() in cmdline.read_bytes(), message="the writer's exec")
        busy = jvm.plan_one_shot(cache, cds=True)
    finally:
        writer.stdin.close()
        writer.wait(30)
    assert busy.options == list(jvm.ONE_SHOT_OPTIONS) and busy.partial is None
    assert plan.partial.exists()  # left to its writer


def test_opt_out_and_key(tmp_path, monkeypatch):
    monkeypatch.setenv(jvm.CDS_ENV, "0")
    assert jvm.plan_one_shot(tmp_path).options == list(jvm.ONE_SHOT_OPTIONS)
    assert not any(tmp_path.iterdir())
    java, jars = jvm.java_binary(), jvm.spark_jars()
    assert java is not None and jars.is_dir()
    assert jvm.archive_key(java, jars, ["a"]) != jvm.archive_key(java, jars, ["b"])
    assert jvm.archive_key(java, jars, ["a"]) != jvm.archive_key(java, tmp_path, ["a"])
    monkeypatch.setenv(jvm.CACHE_ENV, str(tmp_path / "elsewhere"))
    assert jvm.cache_dir() == tmp_path / "elsewhere" / "jvm"


def _args(trace_dir: Path, master: str | None = None) -> argparse.Namespace:
    return argparse.Namespace(trace_dir=str(trace_dir), master=master)


def test_only_a_small_local_trace_in_a_new_local_jvm_gets_them(tmp_path, monkeypatch):
    from pyspark.sql import SparkSession

    monkeypatch.setenv(jvm.CDS_ENV, "0")
    d = tmp_path / "traces"
    d.mkdir()
    (d / "c.jsonl").write_text("x" * 1000)
    monkeypatch.setattr(SparkSession, "getActiveSession", classmethod(lambda cls: None))
    plan = analyze_cli.one_shot_jvm(_args(d))
    assert plan is not None and C1 in plan.options
    assert analyze_cli.one_shot_jvm(_args(d, "local[2]")) is not None
    assert analyze_cli.one_shot_jvm(_args(d, "spark://head:7077")) is None
    assert analyze_cli.one_shot_jvm(_args("hdfs:///runs/1")) is None  # size unknown
    monkeypatch.setattr(traces, "SMALL_TRACE_BYTES", 1000)  # now the trace is large: C2 is worth it
    assert analyze_cli.one_shot_jvm(_args(d)) is None
    monkeypatch.setattr(traces, "SMALL_TRACE_BYTES", 1001)
    monkeypatch.setattr(SparkSession, "getActiveSession", classmethod(lambda cls: object()))
    assert analyze_cli.one_shot_jvm(_args(d)) is None  # a running session keeps its JVM


def test_options_reach_the_driver_jvm(tmp_path):
    """A new JVM (own process) started with build_session(java_options=...) runs with them."""
    script = """
import json, sys
from pyspark import SparkContext
from zkconsumer.analysis.spark import build_session
spark = build_session("local[1]", java_options=sys.argv[1])
pid = SparkContext._gateway.proc.pid
args = open(f"/proc/{pid}/cmdline", "rb").read().decode().split("\\0")
print(json.dumps(args))
spark.stop()
"""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    run = subprocess.run([sys.executable, "-c", script, f"{C1} -XX:+UseSerialGC"], capture_output=True,
                         text=True, env=env, timeout=180)
    assert run.returncode == 0, run.stderr[-2000:]
    args = json.loads(run.stdout.strip().splitlines()[-1])
    assert C1 in args and "-XX:+UseSerialGC" in args
