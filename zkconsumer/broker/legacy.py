"""Message sets of format v0/v1 (Kafka 0.8–0.10 clients) converted to and from the v2 batches the log stores.

The log keeps message format v2 only. Like Kafka's ``LogValidator``, a Produce v0–v2 message set is
up-converted on append: its messages become one v2 batch with the same keys, values and (v1) timestamps and
the same compression codec; offsets are the broker's to assign, as always. Like Kafka's down-conversion for
old consumers, a Fetch v0–v3 answer turns the stored v2 batches into messages of the format that fetch
version implies (v0 for Fetch v0–v1, v1 for v2–v3): headers are dropped, each message keeps its absolute
offset, and messages before the fetch offset (the front of the batch that holds it) are left out.

Down-converted messages go out uncompressed (Kafka re-compresses with the batch's codec); old clients read
both, and this keeps every offset absolute without the magic-1 relative-offset rules of compressed wrappers.
The codecs are kafka-python's (``kafka.record``): nothing here encodes a message by hand.
"""

from __future__ import annotations

from kafka.errors import CorruptRecordError, UnsupportedCodecError
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatch, LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from zkconsumer.errors import KafkaCode
from zkconsumer.log.batches import InvalidBatchError

UNSUPPORTED_COMPRESSION_TYPE = 76
_MAGIC_AT = 16
_NO_LIMIT = 2**31 - 1


def message_format_for_fetch(api_version: int) -> int:
    """The message format an old Fetch version can read: v0 before Fetch v2, v1 for Fetch v2–v3."""
    return 0 if api_version < 2 else 1


def up_convert(records: bytes | bytearray | memoryview | None) -> bytes:
    """One v2 batch (base offset 0, no producer id) holding every message of a v0/v1 message set.

    Raises :class:`InvalidBatchError` as Kafka would answer: a partial or CRC-failing message → CORRUPT_MESSAGE,
    a v2 batch in an old Produce → INVALID_RECORD, a codec we cannot decode → UNSUPPORTED_COMPRESSION_TYPE.
    """
    if not records:
        raise InvalidBatchError("produce request without records", KafkaCode.INVALID_RECORD)
    data = bytes(records)
    reader = MemoryRecords(data)
    codec = 0
    messages = []
    try:
        while reader.has_next():
            wrapper = reader.next_batch()
            if not isinstance(wrapper, LegacyRecordBatch):
                raise InvalidBatchError("a Produce request below v3 carries message format v0/v1 only",
                                        KafkaCode.INVALID_RECORD)
            if not wrapper.validate_crc():
                raise InvalidBatchError("message CRC mismatch", KafkaCode.CORRUPT_MESSAGE)
            codec = codec or wrapper.compression_type
            for record in wrapper:
                ts = record.timestamp if record.magic >= 1 and record.timestamp is not None else -1
                messages.append((ts, record.key, record.value))
    except InvalidBatchError:
        raise
    except UnsupportedCodecError as e:
        raise InvalidBatchError(str(e), UNSUPPORTED_COMPRESSION_TYPE) from None
    except (CorruptRecordError, AssertionError, ValueError, OSError, EOFError) as e:
        raise InvalidBatchError(f"undecodable message set: {e}", KafkaCode.CORRUPT_MESSAGE) from None
    if reader.valid_bytes() != len(data):
        raise InvalidBatchError(f"partial message at byte {reader.valid_bytes()}", KafkaCode.CORRUPT_MESSAGE)
    if not messages:
        raise InvalidBatchError("message set without messages", KafkaCode.INVALID_RECORD)
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=_NO_LIMIT)
    for delta, (ts, key, value) in enumerate(messages):
        builder.append(delta, timestamp=ts, key=key, value=value, headers=[])
    return bytes(builder.build())


def is_legacy(records: bytes | bytearray | memoryview | None) -> bool:
    """True when the first entry of ``records`` is a v0/v1 message rather than a v2 batch."""
    return bool(records) and len(records) > _MAGIC_AT and records[_MAGIC_AT] < 2


def down_convert(stored: bytes, magic: int, fetch_offset: int, max_bytes: int, min_one: bool) -> bytes:
    """The v2 batches ``stored`` as a message set of format ``magic``, at most ``max_bytes`` long.

    Whole messages only; with ``min_one`` the first message is sent even when it alone is larger, so an old
    consumer makes progress (KIP-74's rule, which Kafka's down-conversion applies too).
    """
    out = bytearray()
    for batch in MemoryRecords(stored):
        if not isinstance(batch, DefaultRecordBatch) or batch.is_control_batch:
            continue
        for record in batch:
            if record.offset < fetch_offset:
                continue
            builder = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=_NO_LIMIT)
            builder.append(record.offset, timestamp=record.timestamp, key=record.key, value=record.value)
            message = builder.build()
            if len(out) + len(message) > max_bytes and (out or not min_one):
                return bytes(out)
            out += message
    return bytes(out)
