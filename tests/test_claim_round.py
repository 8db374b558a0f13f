"""The pipelined claim round, pure (zkconsumer/consumer/zookeeper/claim_round.py): what it sends next, from the
answers and watch events fed back, without ZooKeeper. Its driver is tested end to end in tests/test_claims.py."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from zkconsumer.assignment.assignors import TopicPartition
from zkconsumer.consumer.zookeeper.claim_round import Batch, ClaimRound, Conflict, NodeState

T = [TopicPartition("t", p) for p in range(6)]
ME = "g_a-0"
B, C = "g_b-0", "g_c-0"  # threads of two other members
MEMBERS = {ME: "g_a", B: "g_b", C: "g_c"}


def test_free_partitions_are_created_in_one_batch_that_completes_the_claim() -> None:
    claim = ClaimRound({T[0]: ME, T[1]: ME})
    batch = claim.next_batch()
    assert batch == Batch(create=(T[0], T[1]), read=(), completes=True)
    assert claim.state == {T[0]: NodeState.CREATING, T[1]: NodeState.CREATING}
    claim.on_created(batch.create)
    assert claim.done and claim.created() == {T[0]: ME, T[1]: ME}


def test_of_the_nodes_one_member_holds_only_the_first_is_read_and_the_rest_follow_it() -> None:
    claim = ClaimRound({T[0]: ME, T[1]: ME, T[2]: ME, T[3]: ME}, held={T[1]: B, T[2]: B, T[3]: C}, members=MEMBERS)
    batch = claim.next_batch()
    assert batch == Batch(create=(T[0],), read=(T[1], T[3]), completes=False)
    assert claim.state[T[2]] is NodeState.HELD  # B releases all at once: T[1]'s watch speaks for it
    claim.on_created([T[0]])
    assert claim.on_read(T[1], B) is None and claim.on_read(T[3], C) is None  # held as predicted: no conflict
    assert not claim.has_work and claim.state[T[1]] is NodeState.WATCHED
    claim.on_freed(T[1])  # B deleted its nodes
    assert claim.next_batch() == Batch(create=(T[1], T[2]), read=(), completes=False)  # T[3] still held by C


def test_a_node_found_free_when_read_is_created_at_once() -> None:
    claim = ClaimRound({T[0]: ME}, held={T[0]: B}, members=MEMBERS)
    assert claim.next_batch().read == (T[0],)
    assert claim.on_read(T[0], None) is None
    assert claim.next_batch() == Batch(create=(T[0],), read=(), completes=True)


def test_a_create_that_finds_the_node_taken_reads_it_and_an_unpredicted_holder_is_a_conflict() -> None:
    claim = ClaimRound({T[0]: ME})
    claim.next_batch()
    claim.on_taken(T[0])
    assert claim.state[T[0]] is NodeState.TO_READ
    assert claim.next_batch() == Batch(create=(), read=(T[0],), completes=False)
    assert claim.on_read(T[0], C) == Conflict(T[0], ME, C)
    claim.on_freed(T[0])  # the holder let go after all: tried again
    assert claim.next_batch().create == (T[0],)


def test_a_follower_taken_by_the_holder_it_was_predicted_for_is_no_conflict() -> None:
    claim = ClaimRound({T[0]: ME, T[1]: ME}, held={T[0]: B, T[1]: B}, members=MEMBERS)
    claim.next_batch()
    claim.on_freed(T[0])  # B freed its first node; T[1] is tried hopefully
    batch = claim.next_batch()
    assert batch.create == (T[0], T[1]) and batch.completes
    claim.on_created([T[0]])
    claim.on_taken(T[1])  # B releases node by node: T[1] is still its
    claim.next_batch()
    assert claim.on_read(T[1], B) is None
    claim.on_taken(T[1])  # tried again and taken again: now watched on its own, so B holding it is a conflict
    claim.next_batch()
    assert claim.on_read(T[1], B) == Conflict(T[1], ME, B)


def test_our_own_node_from_an_earlier_attempt_counts_as_created() -> None:
    claim = ClaimRound({T[0]: ME})
    claim.next_batch()
    claim.on_taken(T[0])
    claim.next_batch()
    assert claim.on_read(T[0], ME) is None and claim.done


def test_a_watch_firing_before_its_read_is_answered_keeps_the_node_freed() -> None:
    claim = ClaimRound({T[0]: ME}, held={T[0]: B}, members=MEMBERS)
    claim.next_batch()
    claim.on_freed(T[0])  # the deletion's event came before we looked at the read's answer
    assert claim.on_read(T[0], B) is None
    assert claim.state[T[0]] is NodeState.FREED and claim.next_batch().create == (T[0],)


def test_events_for_partitions_not_claimed_or_created_already_change_nothing() -> None:
    claim = ClaimRound({T[0]: ME})
    claim.on_created(claim.next_batch().create)
    claim.on_freed(T[0])
    claim.on_freed(T[5])
    assert claim.done and T[5] not in claim.state


@given(held=st.dictionaries(st.sampled_from(T), st.sampled_from([B, C]), max_size=6),
       order=st.permutations(range(6)))
def test_every_partition_is_created_once_every_holder_lets_go(held, order) -> None:
    """Whatever the holders and the order their nodes are freed in, the round ends with every partition created,
    each sent exactly once when no create fails."""
    decision = dict.fromkeys(T, ME)
    claim = ClaimRound(decision, held=held, members=MEMBERS)
    sent: list[TopicPartition] = []
    for p in [*order, None]:
        while claim.has_work:
            batch = claim.next_batch()
            sent += batch.create
            claim.on_created(batch.create)
            for tp in batch.read:
                claim.on_read(tp, held[tp])  # still held as predicted: watched
        if p is not None:
            claim.on_freed(T[p])
    assert claim.done and sorted(sent) == T
