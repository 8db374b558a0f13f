"""Records produced and never delivered, split by why (zkconsumer/analysis/unseen.py): below the readers' frontier
they are never readable (a loss), at or above it they were unread when the run ended (a stall)."""

from __future__ import annotations

from zkconsumer.analysis.unseen import Unseen, split


def test_a_partition_read_to_its_end_has_nothing_unseen() -> None:
    assert split(range(10), 10) == Unseen(0, 0)


def test_a_member_that_claimed_and_read_nothing_leaves_everything_unread_not_lost() -> None:
    """Catalogue mode d on Kafka 0.8.2.2: the joiner whose start failed kept its claim and read none of it."""
    assert split((), 154) == Unseen(never_readable=0, unread=154)


def test_a_reset_to_the_log_end_skips_records_for_good() -> None:
    """auto.offset.reset=largest over a new partition: the records before the reset target are never readable."""
    got = split(range(40, 60), 60, committed=60, reset_to=40)
    assert got == Unseen(never_readable=40, unread=0) and got.total == 40


def test_a_commit_past_undelivered_records_makes_them_never_readable_and_the_rest_unread() -> None:
    delivered = [*range(0, 10), *range(15, 20)]
    assert split(delivered, 30, committed=25) == Unseen(never_readable=5 + 5, unread=5)


def test_the_parts_add_up_to_the_log_end_minus_what_was_delivered() -> None:
    delivered = [0, 1, 2, 7, 8]
    for committed in (0, 5, 9, 12):
        got = split(delivered, 12, committed=committed)
        assert got.total == 12 - len(delivered), committed
    assert Unseen(1, 2) + Unseen(3, 4) == Unseen(4, 6)
