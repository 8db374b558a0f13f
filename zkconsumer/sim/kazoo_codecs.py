"""kazoo's decoding of a ``getChildren`` answer, remembered by its bytes, for the simulator's herds.

A group of N members that all list ``/consumers/<g>/ids`` gets N copies of one N-name answer: kazoo reads it name
by name in Python (``read_string``), so at thousands of members decoding the same bytes again was most of a
simulated rebalance. :func:`install` wraps ``GetChildren.deserialize`` and ``GetChildren2.deserialize`` so that the
same bytes decode once: the answer is the same function of the same bytes (a fresh list each time, as kazoo's own),
so nothing a client sees changes. Installed by the simulated handler; it stays for the process (a real client in
the same process decodes through it too, to the same result).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kazoo.protocol.serialization import GetChildren, GetChildren2

#: answers remembered at once (a simulated herd lists one or two paths; a small table keeps memory bounded)
CAPACITY = 32
_MARK = "_zkconsumer_memo"


def install() -> None:
    """Wrap both decoders once (idempotent)."""
    for cls, with_stat in ((GetChildren, False), (GetChildren2, True)):
        if not getattr(cls.deserialize, _MARK, False):
            cls.deserialize = classmethod(_remembering(cls.deserialize.__func__, with_stat))


def _remembering(decode: Callable[..., Any], with_stat: bool) -> Callable[..., Any]:
    seen: dict[bytes, tuple] = {}

    def deserialize(cls: type, buf: bytes, offset: int) -> Any:
        key = bytes(buf[offset:])
        hit = seen.get(key)
        if hit is None:
            answer = decode(cls, buf, offset)
            if len(seen) >= CAPACITY:
                seen.clear()
            if with_stat and isinstance(answer, tuple):
                hit = seen[key] = (tuple(answer[0]), answer[1])
            else:
                hit = seen[key] = (tuple(answer), None)
        # every caller gets its own list, as from kazoo's decoder (getChildren2 of a count of -1 is a bare list)
        return (list(hit[0]), hit[1]) if hit[1] is not None else list(hit[0])

    setattr(deserialize, _MARK, True)
    return deserialize
