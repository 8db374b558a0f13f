"""Java's String order and Utils.abs, to the bit (javacompat.py is pure: no ZooKeeper needed here)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from zkconsumer.assignment.assignors import AssignmentContext, assign
from zkconsumer.assignment.reference import PORTS
from zkconsumer.javacompat import java_order_key, java_sorted, kafka_abs
from zkconsumer.zk import layout

# Characters from every region that matters: ASCII, Latin-1, below the surrogates, the surrogates themselves
# (lone ones are legal in Python and in Java strings), U+E000..U+FFFF, and beyond U+FFFF.
_chars = st.one_of(
    st.characters(min_codepoint=0x20, max_codepoint=0x7E),
    st.characters(min_codepoint=0x80, max_codepoint=0xD7FF),
    st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF, categories=["Cs"]),
    st.characters(min_codepoint=0xE000, max_codepoint=0xFFFF),
    st.characters(min_codepoint=0x10000, max_codepoint=0x10FFFF),
)


def _utf16_units(s: str) -> bytes:
    """Java's view of a string: its UTF-16 code units, big-endian, so bytes compare as units do."""
    return s.encode("utf-16-be", "surrogatepass")


@settings(max_examples=400, deadline=None)
@given(st.lists(st.text(_chars, max_size=6), max_size=12))
def test_java_order_is_utf16_code_unit_order(items: list[str]) -> None:
    assert java_sorted(items) == sorted(items, key=_utf16_units)


@settings(max_examples=200, deadline=None)
@given(st.text(_chars, max_size=6), st.text(_chars, max_size=6))
def test_java_order_key_compares_like_compare_to(a: str, b: str) -> None:
    assert (java_order_key(a) < java_order_key(b)) == (_utf16_units(a) < _utf16_units(b))


def test_astral_character_sorts_below_the_top_of_the_bmp() -> None:
    """U+1F600 is the pair D83D DE00 in Java, below U+FF21 (fullwidth A); Python's code points say the opposite."""
    smiley, wide_a = "c\U0001F600", "c\uFF21"
    assert sorted([wide_a, smiley]) == [wide_a, smiley]  # code point order
    assert java_sorted([wide_a, smiley]) == [smiley, wide_a]  # String.compareTo order
    assert java_sorted(["c-2", "c-10", "c-1"]) == ["c-1", "c-10", "c-2"]  # ASCII: plain order
    assert java_order_key("plain") == "plain"


def test_thread_ids_and_assignors_use_java_order() -> None:
    smiley, wide_a = "g_\U0001F600", "g_\uFF21"
    assert layout.sort_thread_ids([f"{wide_a}-0", f"{smiley}-0"]) == [f"{smiley}-0", f"{wide_a}-0"]
    ctx = AssignmentContext({wide_a: {"t": 1}, smiley: {"t": 1}}, {"t": [0, 1, 2]})
    # Range: the first thread in Java order takes the extra partition; a Java consumer would compute the same.
    assert assign("range", ctx).by_thread()[f"{smiley}-0"] == ["t-0", "t-1"]
    assert ctx.consumers_for_topic["t"] == [f"{smiley}-0", f"{wide_a}-0"]
    assert ctx.threads == [f"{smiley}-0", f"{wide_a}-0"]
    for strategy in ("range", "roundrobin", "roundrobin-relaxed"):
        ours = {(tp.topic, tp.partition): t for tp, t in assign(strategy, ctx).owners.items()}
        assert ours == PORTS[strategy](ctx.subscriptions, ctx.partitions)
    assert PORTS["range"](ctx.subscriptions, ctx.partitions)[("t", 0)] == f"{smiley}-0"


def test_utils_abs_is_0_8_2s() -> None:
    """0.8.2's Utils.abs (KAFKA-1469): MIN_VALUE → 0, else Math.abs; 0.8.1's ``n & 0x7fffffff`` is not it."""
    assert kafka_abs(-(2**31)) == 0
    assert kafka_abs(-1) == 1 != (-1 & 0x7FFFFFFF)
    assert kafka_abs(-7) == 7 and kafka_abs(7) == 7 and kafka_abs(2**31 - 1) == 2**31 - 1
