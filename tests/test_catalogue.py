"""The failure catalogue as data (zkconsumer/lab/catalogue.py): every mode names its scenario and sources, a
variant with nothing to strike is n/a, the table says each invariant's verdict. The runs are in
tests/test_failure_modes.py (make faults)."""

from __future__ import annotations

import pytest

from zkconsumer.lab.catalogue import CATALOGUE_VARIANTS, MODES, Cell, markdown, modes, not_applicable
from zkconsumer.lab.compare import judged
from zkconsumer.lab.nemesis import Invariant
from zkconsumer.lab.scenario import builtin, builtin_names
from zkconsumer.lab.variants import VARIANTS


def test_every_mode_of_the_issue_is_there_with_a_shipped_scenario_or_where_it_is_measured() -> None:
    assert sorted({m.key for m in MODES}) == list("abcdefghijk")
    for mode in MODES:
        assert mode.scenario in builtin_names() if mode.scenario else mode.elsewhere, mode
        for source in mode.sources:
            assert source.url.startswith("https://"), source
    assert set(CATALOGUE_VARIANTS) <= set(VARIANTS)


def test_modes_are_chosen_by_letter_or_scenario_in_the_catalogues_order() -> None:
    assert [m.scenario for m in modes(["k", "a"])] == ["gc-pause", "quorum-loss", "broker-kill", "coordinator-kill"]
    assert [m.key for m in modes(["zk-cut"])] == ["f"]
    assert len(modes(None)) == len(MODES)
    with pytest.raises(ValueError, match="unknown failure modes \\['z'\\]"):
        modes(["z"])


def test_a_variant_where_no_fault_of_the_scenario_strikes_is_not_applicable() -> None:
    cut = builtin("zk-cut")
    assert "no ZooKeeper session" in not_applicable(cut, "coordinator")
    assert not_applicable(cut, "zookeeper-kafka-0.8") is None
    # the mode is its fault: the joins around the cut alone would show a healthy group
    assert "no ZooKeeper session" in not_applicable(builtin("reconnect-mid-rebalance"), "coordinator")
    assert not_applicable(builtin("quorum-loss"), "consumer-protocol-kafka-4")
    assert not_applicable(builtin("gc-pause"), "coordinator") is None


def test_the_table_names_each_broken_invariant_with_its_count() -> None:
    broken = Cell("a", "gc-pause", "zookeeper-kafka-0.8",
                  invariants={i.value: 0 for i in Invariant} | {Invariant.ONE_LIVE_OWNER.value: 10},
                  duplicates=707, overlaps=10, unowned_ms_total=18500, unowned_ms_max=1900, failed_rebalances=0)
    holds = Cell("a", "gc-pause", "zookeeper-default", invariants={i.value: 0 for i in Invariant}, duplicates=25)
    na = Cell("f", "zk-cut", "coordinator", not_applicable="a coordinator-mode member has no ZooKeeper session")
    assert broken.verdict == "BROKEN: never two live owners (10)"
    assert holds.verdict == "all hold" and na.verdict == "n/a"
    assert Cell("a", "gc-pause", "coordinator").verdict == "not analysed"
    # Kafka 0.8.2.2's own consumer: its commits are not in its trace, so the invariants about them are not judged
    own = Cell("a", "gc-pause", "kafka-0.8.2.2", invariants=judged({i: 0 for i in Invariant} | {
        Invariant.ONE_LIVE_OWNER: 9, Invariant.DUPLICATES_UNCOMMITTED: 3}, VARIANTS["kafka-0.8.2.2"]))
    assert own.verdict == ("BROKEN: never two live owners (9) (not judged: duplicates only inside uncommitted "
                           "windows, commits never backwards)")
    assert judged({i: 0 for i in Invariant}, VARIANTS["coordinator"]) == {i: 0 for i in Invariant}
    # records nobody consumed (new partitions a classic member has not discovered) are lost, though no trace shows
    # a gap: the lab's own tally counts
    assert judged({i: 0 for i in Invariant}, VARIANTS["coordinator"], 255)[Invariant.ZERO_LOST] == 255
    text = markdown([broken, holds, na])
    assert ("| a | `gc-pause` | `zookeeper-kafka-0.8` | BROKEN: never two live owners (10) | - | 10 | 707 | "
            "18,500 (1,900) | 0 |") in text
    assert "n/a: a coordinator-mode member has no ZooKeeper session" in text
