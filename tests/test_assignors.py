"""SPEC §3: every worked example, Kafka's loops as an oracle, and hypothesis properties."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zkconsumer.assignment.assignors import (
    STRATEGIES,
    AssignmentContext,
    RoundRobinPreconditionError,
    TopicPartition,
    assign,
    assign_for_consumer,
)
from zkconsumer.assignment.reference import PORTS
from zkconsumer.javacompat import java_order_key, string_hash

TWO_BY_THREE = AssignmentContext({"c0": {"t0": 1, "t1": 1}, "c1": {"t0": 1, "t1": 1}},
                                 {"t0": [0, 1, 2], "t1": [0, 1, 2]})


def test_java_hash_of_the_spec_example() -> None:
    assert string_hash("[t0,0]") == -1581112286


def test_range_two_consumers_two_topics() -> None:
    assert assign("range", TWO_BY_THREE).by_thread() == {
        "c0-0": ["t0-0", "t0-1", "t1-0", "t1-1"], "c1-0": ["t0-2", "t1-2"]}


def test_roundrobin_two_consumers_two_topics() -> None:
    assert assign("roundrobin", TWO_BY_THREE).by_thread() == {
        "c0-0": ["t0-0", "t0-2", "t1-1"], "c1-0": ["t0-1", "t1-0", "t1-2"]}


def test_range_eight_partitions_three_threads() -> None:
    ctx = AssignmentContext({"a": {"t": 1}, "b": {"t": 1}, "c": {"t": 1}}, {"t": range(8)})
    assert [len(v) for v in assign("range", ctx).by_thread().values()] == [3, 3, 2]


def test_range_five_partitions_two_consumers_two_streams() -> None:
    ctx = AssignmentContext({"C1": {"t": 2}, "C2": {"t": 2}}, {"t": range(5)})
    assert assign("range", ctx).by_thread() == {
        "C1-0": ["t-0", "t-1"], "C1-1": ["t-2"], "C2-0": ["t-3"], "C2-1": ["t-4"]}


def test_connector_test_three_consumers() -> None:
    """Kafka's ZookeeperConsumerConnector test, as assignments (the live version is in the connector tests)."""
    parts = {"topic1": [0, 1]}
    alone = AssignmentContext({"group1_consumer1": {"topic1": 1}}, parts)
    assert {str(k): v for k, v in assign("range", alone).owners.items()} == {
        "topic1-0": "group1_consumer1-0", "topic1-1": "group1_consumer1-0"}
    two = {"group1_consumer1": {"topic1": 1}, "group1_consumer2": {"topic1": 1}}
    expected = {"topic1-0": "group1_consumer1-0", "topic1-1": "group1_consumer2-0"}
    assert {str(k): v for k, v in assign("range", AssignmentContext(two, parts)).owners.items()} == expected
    three = dict(two, group1_consumer3={})
    assert {str(k): v for k, v in assign("range", AssignmentContext(three, parts)).owners.items()} == expected


def test_thread_ids_sort_as_strings() -> None:
    ctx = AssignmentContext({"c": {"t": 11}}, {"t": range(11)})
    owners = assign("range", ctx).owners
    # c-10 sorts before c-2, so it takes partition 2
    assert owners[TopicPartition("t", 2)] == "c-10"
    assert owners[TopicPartition("t", 1)] == "c-1"


def test_roundrobin_precondition_message_is_kafkas() -> None:
    ctx = AssignmentContext({"c0": {"t0": 1, "t1": 1}, "c1": {"t0": 1}}, {"t0": [0], "t1": [0]})
    with pytest.raises(RoundRobinPreconditionError) as e:
        assign("roundrobin", ctx)
    msg = str(e.value)
    assert msg.startswith("requirement failed: Round-robin assignment is allowed only if all consumers in the "
                          "group subscribe to the same topics, AND if the stream counts across topics are "
                          "identical for a given consumer instance.\n")
    assert "Topic t1 has the following available consumer streams: Set(c0-0)" in msg
    assert "Topic t0 has the following available consumer streams: Set(c0-0, c1-0)" in msg


def test_roundrobin_precondition_on_stream_counts() -> None:
    ctx = AssignmentContext({"c0": {"t0": 2, "t1": 1}}, {"t0": [0], "t1": [0]})
    with pytest.raises(RoundRobinPreconditionError):
        assign("roundrobin", ctx)


def test_relaxed_roundrobin_accepts_unequal_subscriptions() -> None:
    ctx = AssignmentContext({"C0": {"A": 1}, "C1": {"A": 1, "B": 1}, "C2": {"A": 1, "B": 1, "C": 1}},
                            {"A": [0], "B": [0, 1], "C": [0, 1, 2]})
    result = assign("roundrobin-relaxed", ctx)
    assert len(result) == 6
    for tp, tid in result.owners.items():
        assert tp.topic in ctx.subscriptions[tid.rsplit("-", 1)[0]]
    assert result.owners == {TopicPartition(*k): v for k, v in PORTS["roundrobin-relaxed"](
        ctx.subscriptions, ctx.partitions).items()}


def test_empty_group_assigns_nothing() -> None:
    ctx = AssignmentContext({"c0": {}}, {})
    for s in STRATEGIES:
        assert len(assign(s, ctx)) == 0


def test_missing_topic_has_no_partitions() -> None:
    ctx = AssignmentContext({"c0": {"gone": 1}}, {})
    assert ctx.missing_topics == ["gone"]
    result = assign("range", ctx)
    assert len(result) == 0 and result.idle_threads() == [("c0-0", "gone")]


def test_idle_thread_warning(caplog: pytest.LogCaptureFixture) -> None:
    ctx = AssignmentContext({"a": {"t": 1}, "b": {"t": 1}}, {"t": [0]})
    with caplog.at_level("WARNING"):
        assert assign_for_consumer("range", ctx, "b") == {}
    assert "No broker partitions consumed by consumer thread b-0 for topic t" in caplog.text


# ------------------------------------------------------------------------------------------- properties

# the last two order differently in Java (UTF-16 units) and Python (code points): Java order must win
names = st.sampled_from(["a", "b", "c", "d", "e", "g1_c-1", "g1_c-10", "g1_c-2", "x_y", "g1_\uff21", "g1_\U0001f600"])
topic_names = st.sampled_from(["t0", "t1", "t2", "orders", "a.b", "x-y"])


@st.composite
def contexts(draw, identical: bool = False) -> AssignmentContext:
    topics = draw(st.lists(topic_names, min_size=1, max_size=4, unique=True))
    partitions = {t: list(range(draw(st.integers(0, 12)))) for t in topics}
    consumers = draw(st.lists(names, min_size=1, max_size=6, unique=True))
    if identical:
        streams = {c: draw(st.integers(1, 3)) for c in consumers}
        subs = {c: {t: streams[c] for t in topics} for c in consumers}
    else:
        subs = {c: {t: draw(st.integers(1, 3)) for t in draw(st.lists(st.sampled_from(topics), unique=True))}
                for c in consumers}
    return AssignmentContext(subs, partitions)


def _check_exact_cover(ctx: AssignmentContext, owners: dict) -> None:
    expected = {TopicPartition(t, p) for t in ctx.consumers_for_topic for p in ctx.partitions.get(t, [])}
    assert set(owners) == expected
    for tp, tid in owners.items():
        assert tid in ctx.consumers_for_topic[tp.topic]  # owner subscribes to the topic


def _check_disjoint_shares(strategy: str, ctx: AssignmentContext, owners: dict) -> None:
    """Each consumer, computing alone from the same inputs read in its own order, claims a disjoint share."""
    union: dict = {}
    for consumer in ctx.subscriptions:
        order = list(ctx.subscriptions)
        random.Random(consumer).shuffle(order)
        mine = AssignmentContext({c: dict(ctx.subscriptions[c]) for c in order}, dict(ctx.partitions))
        share = assign(strategy, mine).for_consumer(consumer)
        assert not set(share) & set(union)
        union.update(share)
    assert union == owners


@settings(max_examples=150, deadline=None)
@given(contexts())
def test_range_properties(ctx: AssignmentContext) -> None:
    owners = assign("range", ctx).owners
    _check_exact_cover(ctx, owners)
    for topic, threads in ctx.consumers_for_topic.items():
        counts = [sum(1 for tp, t in owners.items() if tp.topic == topic and t == tid) for tid in threads]
        assert max(counts) - min(counts) <= 1
        assert counts == sorted(counts, reverse=True)  # extras go to the first threads
    _check_disjoint_shares("range", ctx, owners)


@settings(max_examples=150, deadline=None)
@given(contexts(identical=True))
def test_roundrobin_properties(ctx: AssignmentContext) -> None:
    owners = assign("roundrobin", ctx).owners
    _check_exact_cover(ctx, owners)
    threads = ctx.consumers_for_topic[next(iter(ctx.consumers_for_topic))]
    counts = [sum(1 for t in owners.values() if t == tid) for tid in threads]
    assert max(counts) - min(counts) <= 1
    _check_disjoint_shares("roundrobin", ctx, owners)


@settings(max_examples=150, deadline=None)
@given(contexts())
def test_roundrobin_relaxed_properties(ctx: AssignmentContext) -> None:
    owners = assign("roundrobin-relaxed", ctx).owners
    _check_exact_cover(ctx, owners)
    _check_disjoint_shares("roundrobin-relaxed", ctx, owners)


@settings(max_examples=200, deadline=None)
@given(contexts(), st.sampled_from(sorted(STRATEGIES)))
def test_equals_kafka_loops(ctx: AssignmentContext, strategy: str) -> None:
    """The fast assignors give exactly what a line-by-line port of Kafka's loops gives, whole group and per consumer."""
    port = PORTS[strategy]
    try:
        expected = port(ctx.subscriptions, ctx.partitions)
    except ValueError:
        with pytest.raises(RoundRobinPreconditionError):
            assign(strategy, ctx)
        return
    result = assign(strategy, ctx)
    assert {(tp.topic, tp.partition): t for tp, t in result.owners.items()} == expected
    for consumer in ctx.subscriptions:
        mine = port(ctx.subscriptions, ctx.partitions, consumer)
        assert {(tp.topic, tp.partition): t for tp, t in result.for_consumer(consumer).items()} == mine


# ------------------------------------------------------------------------------------------------- sticky

def test_sticky_keeps_what_it_can_spec_example() -> None:
    """SPEC §3 (seed 001): C1 leaves a 3-member group of T0..T3 x 2; sticky keeps every surviving ownership."""
    from zkconsumer.assignment.assignors import sticky_assign

    def tps(*names: str) -> list[TopicPartition]:
        return [TopicPartition(f"T{n[1]}", int(n[3])) for n in names]

    before = {**{tp: "C0-0" for tp in tps("T0P0", "T1P1", "T3P0")},
              **{tp: "C1-0" for tp in tps("T0P1", "T2P0", "T3P1")},
              **{tp: "C2-0" for tp in tps("T1P0", "T2P1")}}
    topics = {f"T{i}": [0, 1] for i in range(4)}
    after = sticky_assign(AssignmentContext({c: {t: 1 for t in topics} for c in ("C0", "C2")}, topics), before)
    assert after.by_thread() == {"C0-0": ["T0-0", "T1-1", "T2-0", "T3-0"], "C2-0": ["T0-1", "T1-0", "T2-1", "T3-1"]}


def test_seed_001_unequal_roundrobin_is_rejected_by_kafka_08() -> None:
    """Seed 001's unequal-subscription RoundRobin example is not Kafka 0.8's behaviour: 0.8.2 rejects it."""
    ctx = AssignmentContext({"C0": {"A": 1, "B": 1}, "C1": {"B": 1, "C": 1}}, {"A": [0, 1, 2], "B": [0, 1, 2],
                                                                                "C": [0, 1, 2]})
    with pytest.raises(RoundRobinPreconditionError):
        assign("roundrobin", ctx)
    relaxed = assign("roundrobin-relaxed", ctx).by_thread()  # 0.10.2: accepted, each topic to its subscribers
    assert all(p.startswith("A") for p in relaxed["C0-0"] if p[0] in "AC") and len(sum(relaxed.values(), [])) == 9


@settings(max_examples=100, deadline=None)
@given(contexts(), st.randoms())
def test_sticky_properties(ctx: AssignmentContext, rnd) -> None:
    from zkconsumer.assignment.assignors import sticky_assign

    first = sticky_assign(ctx)
    _check_exact_cover(ctx, first.owners)
    # drop a random member: every partition whose owner survives stays where it was
    members = sorted(ctx.subscriptions)
    gone = rnd.choice(members)
    rest = AssignmentContext({c: s for c, s in ctx.subscriptions.items() if c != gone}, ctx.partitions)
    second = sticky_assign(rest, first.owners)
    _check_exact_cover(rest, second.owners)
    # every thread subscribes to every topic (same topics, one stream count per consumer): balanced within 1
    if all(len(v) == len(ctx.consumers_for_topic) and len(set(v.values())) <= 1
           for v in ctx.subscriptions.values()):
        counts = list(Counter(second.owners.values()).values())
        threads = {t for ts in rest.consumers_for_topic.values() for t in ts}
        counts += [0] * (len(threads) - len(counts))
        if counts:
            assert max(counts) - min(counts) <= 1


def _sticky_oracle(ctx: AssignmentContext, previous: dict | None) -> dict:
    """sticky_assign's rules written the obvious, slow way: keep valid previous owners; give each free
    partition, in (topic, partition) order, to the least loaded subscribed thread (ties: smallest id, Java order); then
    repeatedly move the largest movable partition of the most loaded thread (ties: largest id) to the least
    loaded thread of its topic while they differ by more than one."""
    cft = ctx.consumers_for_topic
    load = {t: 0 for threads in cft.values() for t in threads}
    owners: dict = {}
    for tp, tid in (previous or {}).items():
        if tp.topic in cft and tp.partition in ctx.partitions.get(tp.topic, ()) and tid in cft[tp.topic]:
            owners[tp] = tid
            load[tid] += 1
    for topic in sorted(cft):
        for p in sorted(ctx.partitions.get(topic, ())):
            if TopicPartition(topic, p) not in owners:
                tid = min(cft[topic], key=lambda t: (load[t], java_order_key(t)))
                owners[TopicPartition(topic, p)] = tid
                load[tid] += 1
    while load:
        heavy = max(load, key=lambda t: (load[t], java_order_key(t)))
        for tp in sorted((tp for tp, t in owners.items() if t == heavy), reverse=True):
            light = min(cft[tp.topic], key=lambda t: (load[t], java_order_key(t)))
            if load[heavy] - load[light] > 1:
                owners[tp], load[heavy], load[light] = light, load[heavy] - 1, load[light] + 1
                break
        else:
            return owners
    return owners


@st.composite
def group_histories(draw) -> list[AssignmentContext]:
    """A group over the same topics through a few membership and subscription changes (partitions may grow)."""
    first = draw(contexts(identical=draw(st.booleans())))
    steps = [first]
    for _ in range(draw(st.integers(1, 4))):
        nxt = draw(contexts())
        parts = {t: list(range(max(len(first.partitions.get(t, [])), len(ps)))) for t, ps in nxt.partitions.items()}
        keep = {c: s for c, s in steps[-1].subscriptions.items() if draw(st.booleans())}
        steps.append(AssignmentContext({**keep, **nxt.subscriptions}, parts))
    return steps


@settings(max_examples=300, deadline=None)
@given(group_histories())
def test_sticky_equals_the_plain_rules(steps: list[AssignmentContext]) -> None:
    """The fast sticky_assign (bulk fills, C-level filters, per-topic balancing) decides exactly like the plain
    rules, step after step, each step starting from the previous result."""
    from zkconsumer.assignment.assignors import sticky_assign

    prev = None
    for ctx in steps:
        got = dict(sticky_assign(ctx, prev).owners)
        assert got == _sticky_oracle(ctx, prev)
        _check_exact_cover(ctx, got)
        prev = got


@settings(max_examples=150, deadline=None)
@given(contexts(), st.sampled_from(sorted(STRATEGIES)))
def test_one_mapping_shared_by_alike_consumers_assigns_as_separate_copies(ctx: AssignmentContext,
                                                                          strategy: str) -> None:
    """A rebalancing member hands the assignor one shared mapping per distinct subscription
    (consumer/zookeeper/group_view.py), and the assignor groups consumers by that identity first: the result
    must be the one of separate, equal copies, consumer by consumer, idle threads included."""
    shared: dict = {}
    interned = {c: shared.setdefault(tuple(sorted(s.items())), dict(s)) for c, s in ctx.subscriptions.items()}
    copies = AssignmentContext({c: dict(s) for c, s in ctx.subscriptions.items()}, ctx.partitions)
    alike = AssignmentContext(interned, ctx.partitions)
    try:
        expected = assign(strategy, copies)
    except RoundRobinPreconditionError:
        with pytest.raises(RoundRobinPreconditionError):
            assign(strategy, alike)
        return
    got = assign(strategy, alike)
    assert got.owners == expected.owners
    for consumer in ctx.subscriptions:
        assert got.for_consumer(consumer) == expected.for_consumer(consumer)
        assert got.idle_threads(consumer) == [(tid, topic) for tid, topic in expected.idle_threads()
                                              if expected.context.thread_owner[tid] == consumer]
