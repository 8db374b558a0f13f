"""``zkconsumer watch``: the live view's server and page over a real ZooKeeper group (real consumers of ours, the
local broker for the log ends) and over our broker's group coordinator; the page in a real browser.

One group, one server and one browser per module (the tests run in order on them): the snapshot and the event
stream, the page following a member that leaves, a client leaving the stream, ZooKeeper cut off (through the lab's
TCP proxy) and back; then the coordinator group, and the command line itself.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from urllib.parse import urlparse

import pytest
from browser import chromium, open_page
from helpers import consumer, fresh_chroot, wait_until
from helpers import produce_counts as produce

from zkconsumer.assignment.assignors import TopicPartition
from zkconsumer.broker import Broker
from zkconsumer.cli import main
from zkconsumer.config import ConsumerConfig
from zkconsumer.consumer.coordinated.connector import CoordinatorConsumerConnector
from zkconsumer.coordinator.offsets_codec import (
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
)
from zkconsumer.coordinator.store import CommittedOffset, GroupSnapshot, MemberSnapshot
from zkconsumer.lab.faults.proxy import LinkMode, TcpProxy
from zkconsumer.web.coordinator_source import CoordinatorGroupSource, group_info
from zkconsumer.web.group_metadata import GroupMetadataFold, View
from zkconsumer.web.history import MAX_LISTED, History, Settling, moves_text
from zkconsumer.web.offsets_topic_reader import OffsetsTopicReader
from zkconsumer.web.serve import AddressInUse, serve
from zkconsumer.web.zookeeper_source import ZooKeeperGroupSource, consumer_host
from zkconsumer.zk.layout import make_consumer_id
from zkconsumer.zk.registry import Registry, connect, split_connect
from zkconsumer.zk.topics import create_topic

TIMEOUT_MS = 15000


def get_json(url: str, body: dict | None = None) -> tuple[int, dict]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def first_event(url: str) -> dict:
    """The first server-sent event of ``/events``, then the connection is dropped (a client going away)."""
    parsed = urlparse(url)
    conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=10)
    try:
        conn.request("GET", "/events")
        response = conn.getresponse()
        assert response.status == 200 and response.getheader("content-type").startswith("text/event-stream")
        event = None
        while True:
            line = response.readline().decode().strip()
            if line.startswith("event:"):
                event = line.partition(":")[2].strip()
            elif line.startswith("data:") and event == "snapshot":
                return json.loads(line.partition(":")[2])
    finally:
        conn.close()


# ------------------------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def browser() -> Iterator:
    with chromium() as b:
        yield b


@pytest.fixture(scope="module")
def zk_group(zk_server, tmp_path_factory) -> Iterator[dict]:
    """Group ``g`` (members ``g_a`` and ``g_b`` on topic ``t``, 4 partitions) in a chroot with the local broker; a
    ZooKeeper source reaching ZooKeeper through a TCP proxy the tests cut; its server."""
    zk_connect = fresh_chroot(zk_server.connect_string, "watch")
    hosts, chroot = split_connect(zk_connect)
    host, port = hosts.split(",")[0].rsplit(":", 1)
    proxy = TcpProxy((host, int(port))).start()
    client = connect(zk_connect)
    reg = Registry(client)
    broker = Broker(zk_connect, data_dir=tmp_path_factory.mktemp("broker")).start()
    create_topic(reg, "t", 4)
    produce(broker.bootstrap, "t", {0: 10, 1: 4})
    reg.write_offset("g", "t", 0, 3)
    members = {name: consumer(zk_connect, "g", name) for name in ("a", "b")}
    source = served = None
    try:
        for c in members.values():
            c.create_message_streams({"t": 1})
        source = ZooKeeperGroupSource(proxy.address + chroot, "g", poll=0.3, lag_every=0.5)
        served = serve(source, interval=0.1)
        yield {"url": served.url, "source": source, "members": members, "proxy": proxy, "reg": reg,
               "zk_connect": zk_connect}
    finally:
        if served is not None:
            served.stop()
        if source is not None:
            source.close()
        for c in members.values():
            c.shutdown()
        broker.stop()
        client.stop()
        client.close()
        proxy.stop()


def owners(snapshot: dict) -> dict[int, str | None]:
    return {p["partition"]: p["owner"] for p in snapshot["partitions"]}


def columns(page) -> list[str]:
    """The member table's columns as the page shows them (web/static/live.js, ``th[data-column]``)."""
    return page.evaluate("[...document.querySelectorAll('#members th[data-column]')].map(th => th.dataset.column)")


# ------------------------------------------------------------------------------------------- pure history
def test_history_keeps_owner_changes_and_logs_a_line_per_read() -> None:
    h = History()
    h.observe_members(1, ["c1"])
    h.observe_owners(1, {"t-0": "c1-0", "t-1": None})
    h.observe_members(2, ["c1", "c2"])
    h.observe_owners(2, {"t-0": "c2-0", "t-1": "c1-0"})
    h.observe_owners(3, {"t-1": "c1-0"})
    assert [(c.ts, c.partition, c.owner) for c in h.changes] == [
        (1, "t-0", "c1-0"), (2, "t-0", "c2-0"), (2, "t-1", "c1-0"), (3, "t-0", None)]
    assert [e.text for e in h.events] == ["ids changed: +c2",
                                          "released by c1-0: t-0; claimed by c1-0: t-1; claimed by c2-0: t-0",
                                          "released by c2-0: t-0"]


def test_a_rebalance_reads_as_a_few_lines_and_one_summary_once_the_group_settled() -> None:
    """c1 (6 partitions) leaves a group of two with 12: one line for the ids, one per read that moved owners, and
    the summary at the first quiet read of a settled group, not at the read that saw the ids change."""
    h = History()
    ids = ["c1", "c2"]
    first = {f"orders-{p}": f"c{1 + p % 2}-0" for p in range(12)}
    h.observe(1000, ids, first, settled=True)  # where the watch starts: no event, no rebalance
    h.observe(1500, ids, first, settled=True)
    assert h.events == [] and len(h.changes) == 12
    h.observe(2000, ["c2"], first, settled=False)  # its ids node gone, its owner nodes a moment longer
    released = {p: (None if o == "c1-0" else o) for p, o in first.items()}
    h.observe(2010, ["c2"], released, settled=False)
    half = {**released, **{f"orders-{p}": "c2-0" for p in (0, 2, 4)}}
    h.observe(2040, ["c2"], half, settled=False)
    everything = dict.fromkeys(first, "c2-0")
    h.observe(2070, ["c2"], everything, settled=True)  # the last claim: settled, but not quiet yet
    assert len(h.events) == 4
    h.observe(3000, ["c2"], everything, settled=True)
    assert [(e.ts, e.kind, e.text) for e in h.events] == [
        (2000, "rebalance", "ids changed: -c1"),
        (2010, "rebalance", "released by c1-0: orders-0, orders-2, orders-4, orders-6, orders-8, orders-10"),
        (2040, "rebalance", "claimed by c2-0: orders-0, orders-2, orders-4"),
        (2070, "rebalance", "claimed by c2-0: orders-6, orders-8, orders-10"),
        (3000, "rebalance", "group settled: 6 partitions changed hands, 70 ms from the ids change to the last claim;"
                            " longest a partition sat unowned: 60 ms")]
    assert len([c for c in h.changes if c.ts >= 2000]) == 12  # the timeline keeps a change per partition
    h.observe(4000, ["c2"], everything, settled=True)
    assert len(h.events) == 5  # settled once
    # a member joining while the group holds still: the read that saw it does not settle it
    h.observe(5000, ["c2", "c3"], everything, settled=True)
    assert h.events[-1].text == "ids changed: +c3"
    h.observe(5100, ["c2", "c3"], everything, settled=True)
    assert h.events[-1].text == "group settled: no partition changed hands"


def test_the_summary_counts_moves_returns_and_the_unowned() -> None:
    s = Settling()
    assert s.settle(5) is None  # nothing under way
    s.change(100, "t-0", "a", None)
    s.change(150, "t-0", None, "a")  # released and claimed back
    s.change(160, "t-1", "a", "b")  # seen as one step
    s.change(170, "t-2", "a", None)  # left with no owner (a member whose topic went)
    summary = s.settle(400)
    assert (summary.moved, summary.unowned, summary.returned, summary.longest_unowned_ms) == (2, 1, 1, 230)
    assert summary.text((90, "kill -9 a")) == (
        "group settled 0.1 s after kill -9 a: 2 partitions changed hands (1 to no owner), 1 released and claimed "
        "back, 70 ms from the first release to the last release; longest a partition sat unowned: 230 ms")
    assert not s.open


def test_a_generated_consumer_id_names_its_host() -> None:
    generated = make_consumer_id("g", hostname="web-3.example", now_ms=1712345678901, uuid=uuid.UUID(int=7 << 100))
    assert consumer_host("g", generated) == "web-3.example"
    assert consumer_host("g", make_consumer_id("g", "a")) is None  # consumer.id named it: no host in it
    assert consumer_host("g", "g_a-1-1") is None and consumer_host("other", generated) is None


def test_a_long_list_of_partitions_is_cut_short() -> None:
    assert moves_text([(f"t-{p}", "a", None) for p in range(20)]) == (
        "released by a: " + ", ".join(f"t-{p}" for p in range(MAX_LISTED)) + " and 4 more")
    assert moves_text([]) is None


# -------------------------------------------------------------------------------------------- ZooKeeper
def test_the_snapshot_and_the_events_show_the_group_from_zookeeper(zk_group) -> None:
    url = zk_group["url"]

    def settled() -> dict | None:
        status, snap = get_json(url + "snapshot")
        assert status == 200
        done = (sorted(m["id"] for m in snap["members"]) == ["g_a", "g_b"]
                and all(owners(snap).values()) and len(owners(snap)) == 4
                and snap["partitions"][0]["end"] == 10)
        return snap if done else None

    snap = wait_until(settled, message="both members, every partition owned, the log ends read")
    assert snap["kind"] == "zookeeper" and snap["status"]["ok"] and snap["group"]["id"] == "g"
    assert {m["id"]: m["subscription"] for m in snap["members"]} == {"g_a": {"t": 1}, "g_b": {"t": 1}}
    # each registration's version, pattern and timestamp; no host in an id consumer.id named, no client id
    assert {(m["version"], m["pattern"], m["host"], m["client_id"], m["client"]) for m in snap["members"]} == {
        (1, "static", None, None, "")}
    assert all(snap["ts"] - 600_000 < m["registered_at"] <= snap["ts"] for m in snap["members"])
    assert snap["since"] <= snap["ts"]
    assert sorted(p for m in snap["members"] for p in m["owned"]) == ["t-0", "t-1", "t-2", "t-3"]
    rows = {p["partition"]: (p["offset"], p["end"], p["lag"]) for p in snap["partitions"]}
    assert rows[0] == (3, 10, 7) and rows[1] == (None, 4, None)
    assert {c["partition"] for c in snap["changes"]} == {"t-0", "t-1", "t-2", "t-3"}
    event = first_event(url)
    assert sorted(m["id"] for m in event["members"]) == ["g_a", "g_b"]
    status, answer = get_json(url + "act", {"action": "kill", "member": "g_a"})
    assert status == 400 and "takes no action" in answer["error"]
    assert get_json(url + "act", {"member": 3})[0] == 400


def test_a_client_leaving_the_event_stream_leaves_the_server_serving(zk_group) -> None:
    for _ in range(3):
        first_event(zk_group["url"])  # read one event, hang up
    parsed = urlparse(zk_group["url"])
    raw = socket.create_connection((parsed.hostname, parsed.port))
    raw.sendall(b"GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
    raw.close()  # gone before the first event
    assert get_json(zk_group["url"] + "snapshot")[0] == 200
    assert first_event(zk_group["url"])["group"]["id"] == "g"


def test_the_page_shows_members_and_owners_and_follows_a_member_leaving(zk_group, browser) -> None:
    with open_page(browser, zk_group["url"]) as (page, log):
        page.set_default_timeout(TIMEOUT_MS)
        page.wait_for_selector("#members tr[data-member=g_a]")
        page.wait_for_selector("#members tr[data-member=g_b]")
        page.wait_for_function("document.querySelectorAll('#partitions tr[data-owner]').length === 4")
        assert page.text_content("#group-id") == "g"
        assert page.locator("#partitions tr[data-partition=t-0] td.lag").text_content() == "7"
        assert page.locator("#status").is_hidden()
        # what a 0.8 registration has, in columns that say so; no client, client id or host column (ids named)
        assert columns(page) == ["member-id", "state", "version", "pattern", "registered-at", "subscription", "owned"]
        row = page.locator("#members tr[data-member=g_a]")
        assert (row.locator("td.version").text_content(), row.locator("td.pattern").text_content()) == ("1", "static")
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", row.locator("td.registered-at").text_content())
        # the "no rebalance" line stands exactly while the log has no rebalance (the first read may catch the tail
        # of b's join)
        assert page.evaluate("document.getElementById('events-none').hidden === "
                             "(document.querySelectorAll('#events li[data-kind=rebalance]').length > 0)")
        zk_group["members"].pop("b").shutdown()
        page.wait_for_selector("#members tr[data-member=g_b]", state="detached")
        page.wait_for_function("[...document.querySelectorAll('#partitions td.owner')]"
                               ".every(td => td.textContent === 'g_a-0')")
        assert page.locator("#members tr[data-member=g_a] td.owned").text_content() == "t-0, t-1, t-2, t-3"
        page.wait_for_selector("#events li[data-kind=rebalance]:has-text('ids changed: -g_b')")
        page.wait_for_selector("#events li[data-kind=rebalance]:has-text('released by g_b-0: ')")
        page.wait_for_selector("#events li[data-kind=rebalance]:has-text('group settled: 2 partitions changed hands')")
        assert page.locator("#events-none").is_hidden()
        box = page.locator("#timeline .point path").first.bounding_box()
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        assert "t-0" in page.locator(".hovertext").first.text_content()
        # a member joins with the id Kafka generates (no consumer.id): its host shows, in a column of its own, and
        # the log has its join and the rebalance it made, summed up once the group settled
        settled = "[...document.querySelectorAll('#events li[data-kind=rebalance]')]" \
                  ".filter(li => li.textContent.includes('group settled: 2 partitions changed hands')).length"
        before = page.evaluate(settled)
        joined = zk_group["members"]["c"] = consumer(zk_group["zk_connect"], "g")
        joined.create_message_streams({"t": 1})
        page.wait_for_selector(f"#events li[data-kind=rebalance]:has-text('ids changed: +{joined.consumer_id}')")
        page.wait_for_function(f"{settled} > {before}")
        assert columns(page) == ["member-id", "state", "host", "version", "pattern", "registered-at", "subscription",
                                 "owned"]
        assert page.locator(f"#members tr[data-member='{joined.consumer_id}'] td.host").text_content() == (
            socket.gethostname())
        assert page.locator("#members tr[data-member=g_a] td.host").text_content() == "-"
    assert log.errors == [] and log.remote == []


def test_zookeeper_going_away_leaves_the_server_answering_and_the_page_saying_so(zk_group, browser) -> None:
    proxy, url = zk_group["proxy"], zk_group["url"]
    with open_page(browser, url) as (page, log):
        page.set_default_timeout(TIMEOUT_MS)
        page.wait_for_selector("#members tr[data-member=g_a]")
        proxy.set_mode(LinkMode.DROP)
        try:
            page.wait_for_selector("#status[data-ok=false]")
            assert "ZooKeeper" in page.text_content("#status") and "since" in page.text_content("#status")
            status, snap = get_json(url + "snapshot")
            assert status == 200 and not snap["status"]["ok"]
            assert sorted(m["id"] for m in snap["members"]) == sorted(  # the last data stays
                c.consumer_id for c in zk_group["members"].values())
            assert page.locator("#members tr[data-member=g_a]").count() == 1
        finally:
            proxy.set_mode(LinkMode.PASS)
        page.wait_for_selector("#status[data-ok=true]", state="attached")
        assert page.locator("#status").is_hidden()
        page.wait_for_selector("#events li[data-kind=source]:has-text('back')")
        # ZooKeeper going away and coming back, marked on the timeline: a dotted line and a label each
        page.wait_for_function("document.getElementById('timeline').layout.annotations.length >= 2")
        layout = page.evaluate("(() => { const l = document.getElementById('timeline').layout;"
                               " return {labels: l.annotations.map(a => [a.text, a.x]),"
                               " lines: l.shapes.filter(s => s.line.dash === 'dot').map(s => s.x0)}; })()")
        labels = [text for text, _ in layout["labels"]]
        assert labels[0].startswith("ZooKeeper ") and labels[-1] == "ZooKeeper back", labels
        assert [x for _, x in layout["labels"]] == layout["lines"]
    assert log.errors == [] and log.remote == []


def test_zookeeper_unreachable_at_start_is_said_and_then_read(zk_server, browser) -> None:
    hosts, _ = split_connect(zk_server.connect_string)
    host, port = hosts.split(",")[0].rsplit(":", 1)
    with TcpProxy((host, int(port))) as proxy:
        proxy.set_mode(LinkMode.DROP)
        source = ZooKeeperGroupSource(proxy.address, "nobody", poll=0.3)
        try:
            with serve(source) as served:
                snap = wait_until(lambda: (s := get_json(served.url + "snapshot")[1])["status"]["ok"] is False and s,
                                  message="the unreachable status")
                assert "ZooKeeper unreachable since" in snap["status"]["message"]
                proxy.set_mode(LinkMode.PASS)
                wait_until(lambda: get_json(served.url + "snapshot")[1]["status"]["ok"], message="connected")
                # nothing happened to the group: the Events section says so in a line (beside ZooKeeper's own)
                with open_page(browser, served.url) as (page, log):
                    page.set_default_timeout(TIMEOUT_MS)
                    page.wait_for_selector("#events li[data-kind=source]:has-text('back')")
                    assert page.locator("#events-none").text_content().startswith("no rebalance seen since ")
                    assert page.locator("#events-none").is_visible()
                    assert columns(page) == ["member-id", "state", "subscription", "owned"]  # no member, no fields
                assert log.errors == [] and log.remote == []
        finally:
            source.close()


# ------------------------------------------------------------------------------------------- coordinator
def test_the_latest_group_metadata_is_picked_out_of_the_partition() -> None:
    """The group's records among other groups', offset commits and bytes that do not decode, in offset order: the
    latest GroupMetadata wins, a tombstone resets it, and everything skipped is counted."""
    def snapshot(generation: int, leader: str | None, at: int = -1) -> bytes:
        members = () if leader is None else (MemberSnapshot(leader, "c", "/h", 3000, 3000, b"", b""),)
        return encode_group_value(GroupSnapshot("consumer", generation, "range", leader, at, members))

    fold = GroupMetadataFold("cg")
    commit = (encode_offset_key("cg", TopicPartition("ct", 0)), encode_offset_value(CommittedOffset(5)))
    records = [(encode_group_key("cg"), snapshot(1, "m1", 1000)), commit,
               (encode_group_key("other"), snapshot(9, "x1")),
               (encode_group_key("cg"), snapshot(2, "m2", 2000)), commit,
               (b"\x00\x07junk", b"?"), (encode_group_key("cg"), b"\x00\x09not a value"), (None, b"")]
    for offset, (key, value) in enumerate(records):
        fold.apply(offset, key, value, timestamp_ms=50_000 + offset)
    assert (fold.latest.snapshot.generation, fold.latest.snapshot.leader, fold.latest.offset,
            fold.latest.at_ms) == (2, "m2", 3, 2000)
    assert (fold.group_records, fold.offset_commits, fold.other_groups, fold.undecodable) == (2, 2, 1, 3)
    assert fold.counts_text() == "8 records read: 2 of the group, 2 offset commits, 1 of other groups, 3 undecodable"
    shown = group_info("cg", {"group_state": "Stable", "protocol_data": "range"},
                       View(fold.latest, "__consumer_offsets-7", "", fold.counts_text()))
    assert (shown.generation, shown.leader, shown.rebalanced_at) == (2, "m2", 2000)
    assert shown.generation_note.startswith("from the GroupMetadata record at __consumer_offsets-7 offset 3 (8 ")
    fold.apply(8, encode_group_key("cg"), None, timestamp_ms=60_000)  # the group deleted
    assert fold.latest.snapshot is None and fold.latest.deleted and fold.latest.offset == 8
    fold.apply(9, encode_group_key("cg"), encode_group_value(GroupSnapshot("consumer", 1, None, None)), 61_000)
    assert (fold.latest.snapshot.generation, fold.latest.at_ms) == (1, 61_000)  # v3 without a state timestamp
    gone = group_info("cg", {}, View(GroupMetadataFold("cg").latest, None, "broker unreachable", ""))
    assert (gone.generation, gone.leader, gone.generation_note) == (None, None, "broker unreachable")


def test_the_coordinator_group_shows_state_members_assignments_lag_and_generation(zk_connect, registry, tmp_path,
                                                                                  browser) -> None:
    """Its generation, from the group's GroupMetadata in __consumer_offsets, is the members' own, and grows when a
    second member joins; before any group asked for a coordinator, the topic is not there and the reader says so."""
    broker = Broker(zk_connect, data_dir=tmp_path / "broker", group_initial_rebalance_delay_ms=0,
                    group_min_session_timeout_ms=500).start()
    early = OffsetsTopicReader(broker.bootstrap, "cg", retry=0.2)
    try:
        assert wait_until(lambda: early.view().problem.startswith("no __consumer_offsets topic yet"),
                          message=f"no topic yet: {early.view()}")
        assert early.view().latest.snapshot is None
    finally:
        early.close()
    members: list[CoordinatorConsumerConnector] = []
    source = CoordinatorGroupSource(broker.bootstrap, "cg", poll=0.3, lag_every=0.3)

    def join(name: str) -> CoordinatorConsumerConnector:
        member = CoordinatorConsumerConnector(ConsumerConfig.from_properties({
            "group.id": "cg", "bootstrap.servers": broker.bootstrap, "consumer.id": name,
            "auto.offset.reset": "smallest", "session.timeout.ms": 3000, "heartbeat.interval.ms": 300,
            "auto.commit.interval.ms": 200, "consumer.timeout.ms": -1}))
        members.append(member)
        stream = member.create_message_streams({"ct": 1})["ct"][0]
        threading.Thread(target=lambda: [None for _ in stream], daemon=True).start()  # offsets advance as read
        return member

    try:
        create_topic(registry, "ct", 3)
        produce(broker.bootstrap, "ct", {0: 5, 1: 2})
        member = join("m1")
        with serve(source) as served:
            def stable() -> dict | None:
                snap = get_json(served.url + "snapshot")[1]
                rows = {p["partition"]: (p["offset"], p["end"], p["lag"]) for p in snap["partitions"]}
                done = (snap["group"]["state"] == "Stable" and len(snap["members"]) == 1
                        and all(owners(snap).values()) and len(owners(snap)) == 3
                        and rows.get(0) == (5, 5, 0) and rows.get(1) == (2, 2, 0)
                        and snap["group"]["generation"] == member.group_generation)
                last.append((snap["group"], rows))
                return snap if done else None

            last: list = []
            snap = wait_until(stable, message=f"one member owning the 3 partitions, its offsets committed {last[-1:]}")
            m = snap["members"][0]
            assert snap["kind"] == "coordinator" and snap["group"]["protocol"] == "range"
            first = snap["group"]["generation"]
            assert first >= 1 and snap["group"]["leader"] == m["id"] and snap["group"]["rebalanced_at"] > 0
            assert snap["group"]["generation_note"].startswith("from the GroupMetadata record at __consumer_offsets-")
            assert sorted(m["owned"]) == ["ct-0", "ct-1", "ct-2"] and m["subscription"] == {"ct": 0}
            assert (m["host"], m["client"], m["version"], m["registered_at"]) == ("127.0.0.1", "", None, None)
            assert m["client_id"] and set(owners(snap).values()) == {m["id"]}
            with open_page(browser, served.url) as (page, log):
                page.set_default_timeout(TIMEOUT_MS)
                page.wait_for_selector(f"#members tr[data-member='{m['id']}']")
                # the client id and host it has, and no column of a 0.8 registration
                assert columns(page) == ["member-id", "state", "client-id", "host", "subscription", "owned"]
                row = page.locator(f"#members tr[data-member='{m['id']}']")
                assert row.locator("td.client-id").text_content() == m["client_id"]
                assert row.locator("td.host").text_content() == "127.0.0.1"
                assert page.text_content("#group-state") == "Stable"
                assert page.text_content("#group-generation") == str(first)
                assert "__consumer_offsets-" in page.get_attribute("#group-generation", "title")
                assert page.text_content("#group-leader") == m["id"]
                assert page.locator("#group-rebalanced").text_content().count(":") == 2

                second = join("m2")

                def grown() -> dict | None:
                    g = second.group_generation
                    snap = get_json(served.url + "snapshot")[1]
                    return snap if (g > first and member.group_generation == g and len(snap["members"]) == 2
                                    and snap["group"]["generation"] == g) else None

                snap = wait_until(grown, message=f"m2 joined, the generation past {first}: {second.group_generation}")
                generation = snap["group"]["generation"]
                page.wait_for_function(f"document.querySelector('#group-generation').textContent === '{generation}'")
                page.wait_for_selector("#events li[data-kind=rebalance]:has-text('members changed: +')")
                assert page.text_content("#group-leader") in {m["id"] for m in snap["members"]}
                for gone in (second, member):  # first: a member whose broker is gone takes its timeouts to leave
                    members.remove(gone)
                    gone.shutdown()
                page.wait_for_selector("#group-state:text('Empty')")
                page.wait_for_selector("#members tbody tr", state="detached")
                broker.stop()
                page.wait_for_selector("#status[data-ok=false]:has-text('broker unreachable since')")
                assert get_json(served.url + "snapshot")[0] == 200
            assert log.errors == [] and log.remote == []
    finally:
        for member in members:
            member.shutdown()
        source.close()
        broker.stop()


# ------------------------------------------------------------------------------------------- the command
def test_the_command_needs_one_group_source_and_a_free_port(capsys) -> None:
    assert main(["watch", "--group", "g"]) == 1
    assert "--zookeeper ZK" in capsys.readouterr().err
    assert main(["watch", "--zookeeper", "localhost:2181"]) == 1
    assert "--group" in capsys.readouterr().err
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(AddressInUse, match="in use"):
            serve(None, port=port)
        assert main(["watch", "--bootstrap-server", "127.0.0.1:1", "--group", "g", "--port", str(port)]) == 1
        assert "the port is in use" in capsys.readouterr().err


def test_the_command_prints_its_address_serves_and_stops_on_ctrl_c(zk_connect, tmp_path) -> None:
    props = tmp_path / "consumer.properties"
    props.write_text(f"group.id=g\nzookeeper.connect={zk_connect}\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen([sys.executable, "-m", "zkconsumer", "watch", "--consumer.config", str(props)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline()
        assert line.startswith("zkconsumer watch: http://127.0.0.1:") and "(Ctrl-C to stop)" in line
        url = line.split()[2]
        snap = wait_until(lambda: (s := get_json(url + "snapshot")[1])["status"]["ok"] and s["title"] and s)
        assert snap["group"]["id"] == "g" and "ZooKeeper" in snap["title"]
        proc.send_signal(signal.SIGINT)
        assert proc.wait(15) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
