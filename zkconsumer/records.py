"""The value of a numbered test record: which topic and partition it was written to, and its sequence number.

``zkconsumer produce`` writes these and consumers check them, so a lost, duplicated or reordered record shows
up as a gap or a step back in ``seq`` within one partition, and a record read from the wrong place shows up as
a topic/partition mismatch. Plain functions, free of I/O, so every tool and test decodes them the same way.
"""

from __future__ import annotations

import json

from zkconsumer.errors import ZkConsumerError


class RecordValueError(ZkConsumerError, ValueError):
    """Bytes that are not a value written by :func:`encode_value`."""


def encode_value(topic: str, partition: int, seq: int) -> bytes:
    """Compact JSON with a fixed key order, so equal records are equal bytes."""
    return json.dumps({"topic": topic, "partition": int(partition), "seq": int(seq)},
                      separators=(",", ":")).encode("utf-8")


def decode_value(data: bytes | bytearray | memoryview | None) -> dict:
    """``{"topic": str, "partition": int, "seq": int}``; raises :class:`RecordValueError` on anything else."""
    if data is None:
        raise RecordValueError("record has no value")
    try:
        obj = json.loads(bytes(data).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RecordValueError(f"not a numbered record value: {e}") from None
    if not isinstance(obj, dict):
        raise RecordValueError(f"not a numbered record value: {obj!r}")
    topic, partition, seq = obj.get("topic"), obj.get("partition"), obj.get("seq")
    if not isinstance(topic, str):
        raise RecordValueError(f"'topic' should be a string in {obj!r}")
    for name, value in (("partition", partition), ("seq", seq)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise RecordValueError(f"{name!r} should be an integer >= 0 in {obj!r}")
    return {"topic": topic, "partition": partition, "seq": seq}
