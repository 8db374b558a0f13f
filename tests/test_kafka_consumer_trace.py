"""The trace rebuilt for Kafka 0.8.2.2's own consumer from its log and its records (apache_kafka/consumer_trace.py).

The log lines are in the exact words of Kafka 0.8.2.2's ZookeeperConsumerConnector (log4j ``[%d] %p %m (%c)``);
the end-to-end run (a lab group of Kafka's consumers, analysed on Spark) is in tests/analysis/test_analysis_compare.py.
"""

from __future__ import annotations

import json
from pathlib import Path

from zkconsumer.apache_kafka.consumer_trace import KafkaMemberTrace, MemberTrace, parse_log_line

LOGGER = "(kafka.consumer.ZookeeperConsumerConnector)"


def line(clock: str, message: str, level: str = "INFO", ident: str = "lab_c1") -> str:
    return f"[2026-11-24 13:41:{clock}] {level} [{ident}], {message} {LOGGER}"


def feed(core: MemberTrace, lines: list[str]) -> list[tuple[str, int, dict]]:
    out = []
    for raw in lines:
        parsed = parse_log_line(raw)
        assert parsed is not None, raw
        out += core.log(*parsed)
    return out


def test_a_log_line_is_read_as_utc_milliseconds_without_kafkas_ident() -> None:
    ts, level, message = parse_log_line(line("10,967", "begin rebalancing consumer lab_c1 try #0"))
    assert ts == 1795527670967  # 2026-11-24 13:41:10.967 UTC
    assert (level, message) == ("INFO", "begin rebalancing consumer lab_c1 try #0")
    assert parse_log_line("\tat kafka.consumer.ZookeeperConsumerConnector.rebalance(...)") is None


def test_a_conflict_a_retry_and_a_success_become_one_rebalance() -> None:
    core = MemberTrace("lab_c1", {"orders": 1})
    events = feed(core, [
        line("10,000", "begin rebalancing consumer lab_c1 try #0"),
        line("10,010", "Releasing partition ownership"),
        line("10,020", "lab_c1-0 successfully owned partition 0 for topic orders"),
        line("10,021", "waiting for the partition ownership to be deleted: 1"),
        line("10,022", "end rebalancing consumer lab_c1 try #0"),
        line("10,023", "Rebalancing attempt failed. Clearing the cache before the next rebalancing operation is "
                       "triggered"),
        line("12,030", "begin rebalancing consumer lab_c1 try #1"),
        line("12,040", "lab_c1-0 successfully owned partition 1 for topic orders"),
        line("12,041", "lab_c1-0 successfully owned partition 0 for topic orders"),
        line("12,050", "Consumer lab_c1 selected partitions : orders:0: fetched offset = 5: consumed offset = 5,"
                       "orders:1: fetched offset = -1: consumed offset = -1"),
        line("12,051", "end rebalancing consumer lab_c1 try #1"),
    ])
    assert [name for name, _, _ in events] == ["registered", "rebalance_triggered", "attempt_started",
                                               "claim_conflict", "attempt_started", "claimed", "rebalance_done"]
    by_name = {name: (ts, fields) for name, ts, fields in events}
    assert by_name["rebalance_triggered"][1] == {"cause": "startup"}
    assert by_name["claim_conflict"][1]["partition"] == 1
    assert by_name["claimed"][1]["partitions"] == {"orders-0": "lab_c1-0", "orders-1": "lab_c1-0"}
    ts, done = by_name["rebalance_done"]
    assert done == {"rebalance": 1, "attempts": 2, "duration_ms": 2051, "owned": ["orders-0", "orders-1"]}
    assert core.owned == ["orders-0", "orders-1"]


def test_the_next_rebalance_releases_what_the_last_one_owned_and_records_name_their_thread() -> None:
    core = MemberTrace("lab_c1", {"orders": 2})
    feed(core, [line("10,000", "begin rebalancing consumer lab_c1 try #0"),
                line("10,020", "lab_c1-1 successfully owned partition 3 for topic orders"),
                line("10,050", "Consumer lab_c1 selected partitions : orders:3: fetched offset = -1"),
                line("10,051", "end rebalancing consumer lab_c1 try #0")])
    record = core.harness({"event": "record", "id": "c1", "ts": 1795527671000, "stream": 0, "topic": "orders",
                           "partition": 3, "offset": 7})
    assert record == [("record_delivered", 1795527671000,
                       {"topic": "orders", "partition": 3, "offset": 7, "thread": "lab_c1-1"})]
    events = feed(core, [line("20,000", "begin rebalancing consumer lab_c1 try #0"),
                         line("20,031", "Committing all offsets after clearing the fetcher queues"),
                         line("20,044", "Releasing partition ownership")])
    assert events[0][2] == {"cause": "watch"}
    assert events[-1][0] == "released" and events[-1][2] == {"rebalance": 2, "partitions": ["orders-3"]}
    # a failed attempt releases again, but nothing is owned any more: no second line
    assert feed(core, [line("22,000", "begin rebalancing consumer lab_c1 try #1"),
                       line("22,001", "Releasing partition ownership")])[-1][0] == "attempt_started"


def test_session_expiry_shutdown_and_a_new_jvm() -> None:
    core = MemberTrace("lab_c1", {"orders": 1})
    feed(core, [line("10,000", "begin rebalancing consumer lab_c1 try #0"),
                line("10,020", "lab_c1-0 successfully owned partition 0 for topic orders"),
                line("10,050", "Consumer lab_c1 selected partitions : orders:0: fetched offset = -1"),
                line("10,051", "end rebalancing consumer lab_c1 try #0")])
    expired = feed(core, [line("30,000", "ZK expired; release old broker parition ownership; re-register consumer "
                                         "lab_c1"),
                          line("30,100", "begin rebalancing consumer lab_c1 try #0")])
    assert [e[0] for e in expired] == ["session_expired", "rebalance_triggered", "attempt_started"]
    assert expired[1][2] == {"cause": "session_expired"}
    stop = feed(core, [line("40,000", "ZKConsumerConnector shutting down"),
                       line("40,020", "ZKConsumerConnector shutdown completed in 20 ms")])
    assert [e[0] for e in stop] == ["released", "shutdown"] and stop[1][2] == {"committed": True}
    failed = feed(core, [line("50,000", "error during syncedRebalance", level="ERROR")])
    assert failed[0][0] == "rebalance_failed"
    # a member's JVM started again (after a kill -9): it registers again
    assert core.harness({"event": "ready", "ts": 1, "pid": 2}) == []
    again = feed(core, [line("59,000", "begin rebalancing consumer lab_c1 try #0")])
    assert [e[0] for e in again] == ["registered", "rebalance_triggered", "attempt_started"]


def test_a_start_that_gives_up_is_a_failed_rebalance_though_kafka_logs_nothing_of_it() -> None:
    """ConsumerRebalanceFailedException leaves through createMessageStreams, not the log: the harness's error event
    for the start ends the rebalance as given up (catalogue mode d's joiner)."""
    core = MemberTrace("lab_c4", {"orders": 1})
    feed(core, [line("10,000", "begin rebalancing consumer lab_c4 try #0", ident="lab_c4"),
                line("10,021", "waiting for the partition ownership to be deleted: 4", ident="lab_c4"),
                line("16,000", "begin rebalancing consumer lab_c4 try #3", ident="lab_c4"),
                line("16,021", "waiting for the partition ownership to be deleted: 4", ident="lab_c4")])
    error = ("kafka.common.ConsumerRebalanceFailedException: lab_c4 can't rebalance after 4 retries")
    failed = core.harness({"event": "error", "id": "c4", "ts": 1795527678000, "command": "start c4", "error": error})
    assert failed == [("rebalance_failed", 1795527678000, {"rebalance": 1, "attempts": 4, "error": error})]
    # any other command's error is not a rebalance's
    assert core.harness({"event": "error", "id": "c4", "ts": 1, "command": "stop c4",
                         "error": "java.lang.IllegalArgumentException: no running member c4"}) == []


def test_the_writer_merges_both_files_in_time_order_and_holds_back_the_newest(tmp_path: Path) -> None:
    log4j, out = tmp_path / "c1.kafka.log", tmp_path / "c1.log"
    log4j.write_text("\n".join([line("10,000", "begin rebalancing consumer lab_c1 try #0"),
                                line("10,020", "lab_c1-0 successfully owned partition 0 for topic orders"),
                                line("10,050", "Consumer lab_c1 selected partitions : orders:0"),
                                line("10,051", "end rebalancing consumer lab_c1 try #0")]) + "\n")
    # one record handed out during the rebalance (a chunk iterated on), one after it: read after the log, each
    # lands where its time puts it
    out.write_text("OpenJDK 64-Bit Server VM warning: not JSON\n" + "".join(
        json.dumps({"event": "record", "id": "c1", "ts": ts, "stream": 0, "topic": "orders", "partition": 0,
                    "offset": n}) + "\n" for n, ts in enumerate((1795527670005, 1795527670060))))
    trace = KafkaMemberTrace(tmp_path / "traces", "lab", "c1", {"orders": 1}, log4j, out)
    trace.poll()  # the lines are old: all due
    with open(log4j, "a") as f:
        f.write(line("59,999", "ZKConsumerConnector shutting down")[:-5])  # a line still being written
    trace.close()
    lines = [json.loads(x) for x in (tmp_path / "traces" / "lab_c1.jsonl").read_text().splitlines()]
    assert [e["event"] for e in lines] == ["registered", "rebalance_triggered", "attempt_started",
                                           "record_delivered", "claimed", "rebalance_done", "record_delivered"]
    assert [e["seq"] for e in lines] == list(range(1, 8))
    assert all(e["consumer"] == "lab_c1" and e["group"] == "lab" for e in lines)
    assert lines[-1]["thread"] == "lab_c1-0" and lines[-1]["ts"] == 1795527670060
