"""The neutral value types' helpers (zkconsumer/types.py): how a partition prints, and the two by-topic shapes
the rebalance listener takes."""

from zkconsumer.types import TopicPartition, owners_by_topic, partitions_by_topic, tp_str


def test_a_partition_prints_as_the_tools_print_it() -> None:
    assert tp_str(TopicPartition("t", 3)) == str(TopicPartition("t", 3)) == "t-3"
    assert tp_str(("a-b", 0)) == "a-b-0"


def test_partitions_group_by_topic() -> None:
    tps = [TopicPartition("a", 1), TopicPartition("b", 0), TopicPartition("a", 0), ("a", 1)]
    assert partitions_by_topic(tps) == {"a": {0, 1}, "b": {0}}
    assert partitions_by_topic([]) == {}


def test_owners_group_by_topic_then_partition() -> None:
    owners = {TopicPartition("a", 1): "g_c1-0", TopicPartition("b", 0): "g_c2-0", TopicPartition("a", 0): "g_c2-0"}
    assert owners_by_topic(owners) == {"a": {1: "g_c1-0", 0: "g_c2-0"}, "b": {0: "g_c2-0"}}
