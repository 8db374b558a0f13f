"""Idempotent-producer bookkeeping for one partition: the duplicate and gap checks Kafka does on append.

kafka-python's KafkaProducer is idempotent by default, and a retried batch (after a lost response or a broker
restart) must not be appended twice. Per producer id we remember its epoch and its last five batches, as
Kafka's ``ProducerStateManager`` does; the state is rebuilt from the batch headers when a log is recovered,
and saved with each recovery checkpoint so a restart only rescans what came after it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from zkconsumer.errors import KafkaCode

#: Kafka keeps metadata of the last five batches per producer (``ProducerStateEntry.NumBatchesToRetain``).
BATCHES_TO_RETAIN = 5
_SEQ_MOD = 2**31


@dataclass
class ProducerEntry:
    epoch: int
    #: (first sequence, last sequence, first offset, last offset) of the most recent batches, oldest first.
    batches: deque = field(default_factory=lambda: deque(maxlen=BATCHES_TO_RETAIN))

    @property
    def last_sequence(self) -> int:
        return self.batches[-1][1] if self.batches else -1


@dataclass(frozen=True)
class Verdict:
    """What to do with a batch: append it, answer with the offset it already has, or refuse it."""

    error: int = KafkaCode.NONE
    duplicate_of: int | None = None  # base offset of the batch already in the log

    @property
    def append(self) -> bool:
        return self.error == KafkaCode.NONE and self.duplicate_of is None


APPEND = Verdict()


class ProducerStateTable:
    def __init__(self) -> None:
        self.entries: dict[int, ProducerEntry] = {}

    def check(self, producer_id: int, epoch: int, first_seq: int, last_seq: int) -> Verdict:
        """Kafka's ``ProducerAppendInfo.checkSequence`` (non-transactional), without mutating state."""
        if producer_id < 0 or first_seq < 0:
            return APPEND  # not an idempotent batch
        entry = self.entries.get(producer_id)
        if entry is None:
            # Unknown producers are accepted (the log may have been deleted under them, as KIP-360 allows).
            return APPEND
        if epoch < entry.epoch:
            return Verdict(KafkaCode.INVALID_PRODUCER_EPOCH)
        if epoch > entry.epoch:
            return APPEND if first_seq == 0 else Verdict(KafkaCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
        for b_first, b_last, b_offset, _ in entry.batches:
            if b_first == first_seq and b_last == last_seq:
                return Verdict(duplicate_of=b_offset)
        if entry.last_sequence < 0 or first_seq == (entry.last_sequence + 1) % _SEQ_MOD:
            return APPEND
        return Verdict(KafkaCode.OUT_OF_ORDER_SEQUENCE_NUMBER)

    def record(self, producer_id: int, epoch: int, first_seq: int, last_seq: int, first_offset: int,
               last_offset: int) -> None:
        """Note an appended (or recovered) batch."""
        if producer_id < 0 or first_seq < 0:
            return
        entry = self.entries.get(producer_id)
        if entry is None or epoch != entry.epoch:
            entry = self.entries[producer_id] = ProducerEntry(epoch)
        entry.batches.append((first_seq, last_seq, first_offset, last_offset))

    # ---------------------------------------------------------------------------------------- snapshots
    def snapshot(self) -> dict:
        return {str(pid): {"epoch": e.epoch, "batches": [list(b) for b in e.batches]}
                for pid, e in self.entries.items()}

    @classmethod
    def from_snapshot(cls, data: dict) -> ProducerStateTable:
        table = cls()
        for pid, e in data.items():
            entry = ProducerEntry(int(e["epoch"]))
            for b in e["batches"]:
                entry.batches.append(tuple(int(x) for x in b))
            table.entries[int(pid)] = entry
        return table
