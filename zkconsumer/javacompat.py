"""Bit-exact reproductions of the few Java library functions Kafka's decisions depend on.

RoundRobin orders partitions by ``String.hashCode`` and the group coordinator picks its offsets partition
with ``Utils.abs(String.hashCode)``; both must give Java's answers to the bit, so they live here, free of I/O.
"""

from __future__ import annotations

_MASK = 0xFFFFFFFF


def _to_signed(h: int) -> int:
    return h - 0x1_0000_0000 if h & 0x8000_0000 else h


def string_hash(s: str, seed: int = 0) -> int:
    """Java's ``String.hashCode``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units, as signed int32.

    ``seed`` continues a hash already computed for a prefix (unsigned 32-bit form, see
    :func:`string_hash_unsigned`), which lets callers hash ``"[topic," + p + "]"`` without re-hashing the topic.
    """
    return _to_signed(string_hash_unsigned(s, seed))


def string_hash_unsigned(s: str, seed: int = 0) -> int:
    """Like :func:`string_hash` but returns the unsigned 32-bit state, for chaining prefixes."""
    h = seed
    if s.isascii():
        for b in s.encode("ascii"):
            h = (31 * h + b) & _MASK
        return h
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & _MASK
    return h


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs`` (0.9+): ``Math.abs`` except ``Integer.MIN_VALUE``, which maps to 0.

    (0.8's ``n & 0x7fffffff`` differs for every negative n; the coordinator is a 0.9+ feature, so 0.9+ wins.)
    """
    return 0 if n == -(2**31) else abs(n)


def long_to_hex_string(n: int) -> str:
    """Java's ``Long.toHexString``: the unsigned 64-bit value in lower-case hex, without leading zeros."""
    return format(n & 0xFFFF_FFFF_FFFF_FFFF, "x")
