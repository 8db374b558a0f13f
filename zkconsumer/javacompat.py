"""Bit-exact reproductions of the few Java library functions Kafka's decisions depend on.

RoundRobin orders partitions by ``String.hashCode``, Range and RoundRobin order thread ids by
``String.compareTo``, and the group coordinator picks its offsets partition with ``Utils.abs(String.hashCode)``;
all must give Java's answers to the bit, so they live here, free of I/O. In the bottom layer: the assignors, the
ZooKeeper layout (consumer ids with ``Long.toHexString``, thread ids in Java's order) and the coordinator use them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_MASK = 0xFFFFFFFF
#: Characters outside the Basic Multilingual Plane: one code point in Python, two UTF-16 units in Java.
_ASTRAL = re.compile("[\U00010000-\U0010FFFF]")


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
    """Kafka's ``Utils.abs`` from 0.8.2.0 on (KAFKA-1469; also 0.9+ and 2.x): ``Math.abs`` except
    ``Integer.MIN_VALUE``, which maps to 0.

    0.8.0 and 0.8.1.x had ``n & 0x7fffffff``, which differs for every other negative n (-1 → 2147483647, not 1).
    We follow 0.8.2, the version we reproduce, which is also what the 0.9+ coordinator uses.
    """
    return 0 if n == -(2**31) else abs(n)


def java_order_key(s: str) -> str:
    """A sort key that orders strings as Java's ``String.compareTo`` does: by UTF-16 code units.

    Python compares code points. The two orders differ only when a string holds a character at or above
    U+10000: Java sees its surrogate pair (U+D800..U+DBFF first), which sorts *below* U+E000..U+FFFF and
    below a lone surrogate U+DC00..U+DFFF, where Python puts the code point above them all. So such a character
    is replaced by its two surrogates (as code points); every other string is its own key, which keeps the
    common case free and lets keys of both kinds compare with each other.
    """
    if s.isascii() or _ASTRAL.search(s) is None:
        return s
    return _ASTRAL.sub(_surrogate_pair, s)


def _surrogate_pair(m: re.Match[str]) -> str:
    c = ord(m.group()) - 0x10000
    return chr(0xD800 | (c >> 10)) + chr(0xDC00 | (c & 0x3FF))


def java_sort(items: list[str]) -> None:
    """Sort ``items`` in place in Java's ``String`` order; a plain sort when every item is ASCII (C speed)."""
    if all(map(str.isascii, items)):
        items.sort()
    else:
        items.sort(key=java_order_key)


def java_sorted(items: Iterable[str]) -> list[str]:
    """A new list of ``items`` in Java's ``String`` order (see :func:`java_order_key`)."""
    out = list(items)
    java_sort(out)
    return out


def long_to_hex_string(n: int) -> str:
    """Java's ``Long.toHexString``: the unsigned 64-bit value in lower-case hex, without leading zeros."""
    return format(n & 0xFFFF_FFFF_FFFF_FFFF, "x")
