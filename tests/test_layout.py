"""SPEC §1: paths, ids and node codecs, byte for byte; malformed data gives a typed error naming the path."""

from __future__ import annotations

import uuid

import pytest

from zkconsumer.javacompat import kafka_abs, long_to_hex_string, string_hash
from zkconsumer.zk import layout
from zkconsumer.zk.layout import (
    BrokerInfo,
    ConsumerRegistration,
    GroupPaths,
    InvalidTopicError,
    MalformedNodeError,
    TopicAssignment,
    TopicFilter,
)


def test_java_string_hash_known_values() -> None:
    assert string_hash("") == 0
    assert string_hash("hello") == 99162322
    assert string_hash("polygenelubricants") == -(2**31)
    assert kafka_abs(string_hash("polygenelubricants")) == 0
    assert kafka_abs(string_hash("my-group")) % 50 == 12
    assert string_hash("é€") == 0xE9 * 31 + 0x20AC  # UTF-16 code units, not UTF-8 bytes
    assert string_hash("😀") == 0xD83D * 31 + 0xDE00  # a surrogate pair


def test_long_to_hex_has_no_leading_zeros() -> None:
    assert long_to_hex_string(0x0ABC) == "abc"
    assert long_to_hex_string(-1) == "f" * 16


def test_group_paths() -> None:
    g = GroupPaths("group1")
    assert g.registration("group1_consumer1") == "/consumers/group1/ids/group1_consumer1"
    assert g.owner("topic1", 0) == "/consumers/group1/owners/topic1/0"
    assert g.offset("topic1", 7) == "/consumers/group1/offsets/topic1/7"
    assert layout.topic_path("t") == "/brokers/topics/t"
    assert layout.broker_path(3) == "/brokers/ids/3"
    with pytest.raises(layout.LayoutError):
        GroupPaths("a/b")


def test_static_registration_is_byte_identical() -> None:
    reg = ConsumerRegistration.static({"topic1": 1, "topic2": 3}, timestamp_ms=1420070400000)
    assert reg.encode() == (b'{"version":1,"subscription":{"topic1":1,"topic2":3},"pattern":"static",'
                            b'"timestamp":"1420070400000"}')
    assert ConsumerRegistration.decode("/p", reg.encode()) == reg


def test_wildcard_registration_escapes_the_regex_like_kafka() -> None:
    tf = TopicFilter(' "orders\\..*, audit" ')
    assert tf.regex == "orders\\..*|audit"
    reg = ConsumerRegistration.wildcard(tf, 2, timestamp_ms=5)
    assert reg.encode() == (b'{"version":1,"subscription":{"orders\\\\..*|audit":2},"pattern":"white_list",'
                            b'"timestamp":"5"}')
    back = ConsumerRegistration.decode("/p", reg.encode())
    assert back.topic_filter == tf
    assert back.topic_streams(["orders.eu", "ordersXeu", "audit", "__consumer_offsets"]) == {
        "audit": 2, "orders.eu": 2}


def test_empty_registration_reads_as_static() -> None:
    reg = ConsumerRegistration.decode("/p", b'{"version":1,"subscription":{},"pattern":"white_list","timestamp":"1"}')
    assert reg.pattern == "static" and reg.topic_streams(["a"]) == {}


@pytest.mark.parametrize("raw, reason", [
    (b"{not json", "not valid JSON"),
    (b"[1,2]", "expected a JSON object"),
    (b'{"version":1,"pattern":"static","timestamp":"1"}', "missing field 'subscription'"),
    (b'{"version":1,"subscription":{"t":1},"timestamp":"1"}', "missing field 'pattern'"),
    (b'{"version":1,"subscription":{"t":"x"},"pattern":"static"}', "stream count"),
    (b'{"version":1,"subscription":{"t":0},"pattern":"static"}', "stream count"),
    (b'{"version":1,"subscription":{"t":1},"pattern":"sometimes"}', "unknown pattern"),
    (b"\xff\xfe", "not valid JSON"),
    (None, "no data"),
])
def test_malformed_registration_names_path_and_value(raw, reason) -> None:
    with pytest.raises(MalformedNodeError) as e:
        ConsumerRegistration.decode("/consumers/g/ids/c1", raw)
    assert e.value.path == "/consumers/g/ids/c1"
    assert reason in str(e.value)
    assert "/consumers/g/ids/c1" in str(e.value)
    if raw:
        assert repr(raw.decode("utf-8", "replace"))[:10] in str(e.value)


def test_consumer_id_format() -> None:
    u = uuid.UUID("0a1b2c3d-4e5f-4a6b-8c7d-8e9fa0b1c2d3")
    # Long.toHexString drops the leading zero: "a1b2c3d4e5f4a6b", first 8 chars
    assert layout.consumer_uuid("host1", 1700000000000, u) == "host1-1700000000000-a1b2c3d4"
    assert layout.make_consumer_id("g", hostname="h", now_ms=1, uuid=u) == "g_h-1-a1b2c3d4"
    assert layout.make_consumer_id("group1", "consumer1") == "group1_consumer1"
    assert layout.thread_ids("group1_consumer1", 2) == ["group1_consumer1-0", "group1_consumer1-1"]
    assert layout.sort_thread_ids(["c-2", "c-10", "c-1"]) == ["c-1", "c-10", "c-2"]
    assert layout.consumer_of_thread("g_c-1-10") == "g_c-1"
    with pytest.raises(layout.LayoutError):
        layout.thread_ids("c", 0)


def test_topic_node_versions() -> None:
    v1 = TopicAssignment.decode("/brokers/topics/t", b'{"version":1,"partitions":{"1":[7,0],"0":[5,6],"10":[1]}}')
    assert v1.partition_ids == [0, 1, 10]  # numeric, not string order
    assert v1.partitions[0] == [5, 6]
    v3 = TopicAssignment.decode("/p", b'{"version":3,"topic_id":"xyz","partitions":{"0":[1]},'
                                      b'"adding_replicas":{},"removing_replicas":{}}')
    assert v3.partition_ids == [0] and v3.extra["topic_id"] == "xyz"
    assert TopicAssignment({1: [7, 0], 0: [5, 6]}).encode() == b'{"version":1,"partitions":{"0":[5,6],"1":[7,0]}}'
    for bad in (b'{"version":1}', b'{"version":1,"partitions":{"x":[1]}}', b'{"partitions":{"0":"1"}}'):
        with pytest.raises(MalformedNodeError):
            TopicAssignment.decode("/brokers/topics/t", bad)


@pytest.mark.parametrize("raw, host, port", [
    (b'{"version":1,"host":"h1","port":9092,"jmx_port":-1,"timestamp":"1"}', "h1", 9092),
    (b'{"version":2,"host":"h2","port":9092,"jmx_port":-1,"timestamp":"1","endpoints":["PLAINTEXT://h2:9093"]}',
     "h2", 9092),
    (b'{"version":3,"host":null,"port":-1,"jmx_port":-1,"timestamp":"1","endpoints":["PLAINTEXT://h3:9094"],'
     b'"rack":"r1"}', "h3", 9094),
    (b'{"listener_security_protocol_map":{"CLIENT":"PLAINTEXT"},"endpoints":["CLIENT://h4:9095"],"rack":null,'
     b'"jmx_port":-1,"port":-1,"host":null,"timestamp":"1","version":4}', "h4", 9095),
    (b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":["PLAINTEXT://h5:1"],'
     b'"jmx_port":-1,"port":1,"host":"h5","timestamp":"1","version":5}', "h5", 1),
])
def test_broker_node_versions(raw, host, port) -> None:
    info = BrokerInfo.decode("/brokers/ids/3", raw)
    assert info.broker_id == 3 and info.host == host and info.port == port
    assert info.plaintext_address()[0] == host


def test_broker_node_written_as_version_4() -> None:
    info = BrokerInfo.plaintext(0, "127.0.0.1", 9092, timestamp_ms=7)
    assert info.encode() == (b'{"version":4,"host":"127.0.0.1","port":9092,"endpoints":["PLAINTEXT://127.0.0.1:9092"],'
                             b'"jmx_port":-1,"timestamp":"7","listener_security_protocol_map":'
                             b'{"PLAINTEXT":"PLAINTEXT"}}')
    assert BrokerInfo.decode("/brokers/ids/0", info.encode()) == info


def test_malformed_broker_node() -> None:
    with pytest.raises(MalformedNodeError, match="/brokers/ids/1"):
        BrokerInfo.decode("/brokers/ids/1", b'{"version":2,"host":"h"}')


def test_offset_and_owner_codecs() -> None:
    assert layout.encode_offset(42) == b"42"
    assert layout.decode_offset("/o", b"42") == 42
    with pytest.raises(MalformedNodeError, match="/consumers/g/offsets/t/0"):
        layout.decode_offset("/consumers/g/offsets/t/0", b"forty")
    assert layout.decode_owner("/x", b"g_c-0") == "g_c-0"
    with pytest.raises(MalformedNodeError):
        layout.decode_owner("/x", b"")


@pytest.mark.parametrize("name", ["", ".", "..", "a" * 250, "has space", "tab\t", "ü"])
def test_illegal_topic_names(name: str) -> None:
    with pytest.raises(InvalidTopicError):
        layout.validate_topic(name)


def test_legal_topic_names() -> None:
    for name in ("a", "a.b-c_D9", "a" * 249, "..."):
        assert layout.validate_topic(name) == name


def test_topic_filters() -> None:
    wl = layout.whitelist("t.*")
    bl = layout.blacklist("t.*")
    topics = ["t1", "t2", "x", "__consumer_offsets", "at1"]
    assert wl.select(topics) == ["t1", "t2"]  # full match, like String.matches
    assert bl.select(topics) == ["at1", "x"]
    assert layout.whitelist(".*").select(topics, exclude_internal=False)[0] == "__consumer_offsets"
    with pytest.raises(layout.LayoutError, match="invalid regex"):
        layout.whitelist("(")
