"""Results as data (issue 55, zkconsumer/results/): the documents' rendered blocks agree with their records, a hand
edit fails the check, a record older than its code is marked and not failed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from zkconsumer.errors import IllegalArgument
from zkconsumer.results import blocks, fingerprint, record
from zkconsumer.results.record import Record, Scope

RATES = {"coordinator": {"verdict": "holds in 200 of 200 runs", "runs": 200, "breaking_runs": 0,
                         "schedules_per_minute": 15.1,
                         "breaches": {"overlaps": 0, "lost": 0}},
         "kafka-0.8": {"verdict": "breaks in 441 of 2000 runs", "runs": 2000, "breaking_runs": 441,
                       "schedules_per_minute": 219.0,
                       "breaches": {"overlaps": 423, "lost": 0, "duplicates_committed": 287}}}


def _record(figures: dict, source: dict | None = None) -> dict:
    data = {"command": "zkconsumer sim --seeds 200", "date": "2026-12-07T15:00:00+00:00", "commit": "abc1234",
            "machine": {"cores": 2, "cpu": "a CPU", "memory_gib": 24}, "figures": figures}
    if source is not None:
        data["source"] = source
    return data


def _loader(records: dict[str, dict]):
    def load(name: str) -> Record:
        if name not in records:
            raise IllegalArgument(f"no result record results/{name}.json")
        return Record(name, records[name])
    return load


DOC = """# Rates

Before.

<!-- result rates sim-rates -->
<!-- /result -->

The coordinator held in <!-- result rates figure coordinator.runs --><!-- /result --> runs.
"""


def test_a_rendered_document_agrees_and_a_hand_edit_fails_the_check(tmp_path: Path) -> None:
    load = _loader({"rates": _record(RATES)})
    text = blocks.render_text(DOC, load, with_stale=False)
    assert "| `kafka-0.8` | breaks in 441 of 2,000 | 423 | 287 | 219.0 |" in text
    assert "| world | verdict | two live owners | duplicates of committed | schedules a minute |" in text
    assert "held in <!-- result rates figure coordinator.runs -->200<!-- /result " in text
    assert "*From results/rates.json: `zkconsumer sim --seeds 200`, 2026-12-07, commit abc1234, 2 cores" in text
    assert blocks.render_text(text, load, with_stale=False) == text  # rendering twice changes nothing
    assert [f.state for f in blocks.check_text(tmp_path / "d.md", text, load)] == [blocks.State.CURRENT] * 2

    edited = text.replace("| 423 |", "| 424 |")
    found = blocks.check_text(tmp_path / "d.md", edited, load)
    assert [f.state for f in found] == [blocks.State.EDITED, blocks.State.CURRENT]
    assert found[0].state.fails and "d.md:5:" in str(found[0])

    inline_edit = text.replace("-->200<!--", "-->201<!--")
    assert [f.state for f in blocks.check_text(tmp_path / "d.md", inline_edit, load)][1] is blocks.State.EDITED


def test_a_record_that_changed_under_a_block_fails_until_rendered_again(tmp_path: Path) -> None:
    old = _loader({"rates": _record(RATES)})
    text = blocks.render_text(DOC, old, with_stale=False)
    newer = json.loads(json.dumps(RATES))
    newer["kafka-0.8"]["breaches"]["overlaps"] = 400
    new = _loader({"rates": _record(newer)})
    assert [f.state for f in blocks.check_text(tmp_path / "d.md", text, new)][0] is blocks.State.OUTDATED
    again = blocks.render_text(text, new, with_stale=False)
    assert "| 400 |" in again and all(not f.state.fails for f in blocks.check_text(tmp_path / "d.md", again, new))


def test_a_block_inside_fenced_code_is_an_example_not_a_block(tmp_path: Path) -> None:
    example = "How to write one:\n\n```\n<!-- result rates sim-rates -->\n<!-- /result -->\n```\n"
    load = _loader({"rates": _record(RATES)})
    assert blocks.render_text(example, load) == example
    assert blocks.check_text(tmp_path / "d.md", example, load) == []


def test_a_missing_record_or_figure_is_a_clear_failure(tmp_path: Path) -> None:
    load = _loader({"rates": _record(RATES)})
    text = blocks.render_text(DOC, load, with_stale=False)
    gone = blocks.check_text(tmp_path / "d.md", text, _loader({}))
    assert {f.state for f in gone} == {blocks.State.BROKEN} and "no result record results/rates.json" in str(gone[0])
    with pytest.raises(IllegalArgument, match="has no figure 'coordinator.nothing'"):
        blocks.render_text(DOC.replace("coordinator.runs", "coordinator.nothing"), load, with_stale=False)


def test_a_record_older_than_its_code_is_marked_not_failed(tmp_path: Path) -> None:
    """A record's source fingerprint no longer matching the tree: ``render`` writes the mark a reader sees, and the
    check passes with it (the mark is outside the hash) and reports the block as stale."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("x = 1\n")
    measured = fingerprint.of_tree(tmp_path, ["src"])
    (tmp_path / "src" / "a.py").write_text("x = 2\n")
    assert fingerprint.of_tree(tmp_path, ["src"]) != measured

    class Moved(Record):
        def stale_since(self) -> str | None:  # the real one reads the checkout: here, the tree above
            return "def5678" if fingerprint.of_tree(tmp_path, ["src"]) != measured else None

    load = lambda name: Moved(name, _record(RATES))  # noqa: E731
    text = blocks.render_text(DOC, load)
    assert text.count('<span class="stale">Measured before def5678: the code it measures has changed') == 1
    assert text.count('<span class="stale">(measured before def5678)</span>') == 1  # in a sentence: short
    found = blocks.check_text(tmp_path / "d.md", text, load)
    assert [f.state for f in found] == [blocks.State.STALE] * 2 and not any(f.state.fails for f in found)
    assert "measured before def5678" in str(found[0])


def test_a_fingerprint_follows_what_the_code_does_not_its_docstrings_or_comments(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    f = tmp_path / "src" / "a.py"
    f.write_text('"""A module."""\n\ndef f(x):\n    """Twice x."""\n    return 2 * x  # doubled\n')
    before = fingerprint.of_tree(tmp_path, ["src"])
    f.write_text('"""A module, reworded."""\n\ndef f(x):\n    """Twice x, said again."""\n    return 2 * x\n')
    assert fingerprint.of_tree(tmp_path, ["src"]) == before
    f.write_text('"""A module."""\n\ndef f(x):\n    return 3 * x\n')
    assert fingerprint.of_tree(tmp_path, ["src"]) != before


def test_fingerprints_of_a_commit_and_of_its_tree_agree() -> None:
    scope = Scope.SIM
    head = subprocess.run(["git", "-C", str(record.ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(record.ROOT), "status", "--porcelain", *scope.paths],
                           capture_output=True, text=True).stdout
    assert fingerprint.blob_sha(b"hello\n") == "ce013625030ba8dba906f756967f9e9ca394464a"  # git hash-object
    if head.returncode != 0 or dirty:
        pytest.skip("not a clean git checkout of the simulator's code")
    assert fingerprint.at_commit(record.ROOT, head.stdout.strip(), scope.paths) == \
        fingerprint.of_tree(record.ROOT, scope.paths)


def test_every_record_in_results_is_a_record_with_its_source() -> None:
    records = record.load_all()
    assert len(records) >= 20
    for r in records:
        assert {"command", "date", "commit", "machine", "figures", "source"} <= set(r.data), r.name
        assert r.data["source"]["scope"] in {s.value for s in Scope}, r.name


def test_the_documents_rendered_blocks_agree_with_their_records() -> None:
    """The CI check (``zkconsumer results check``): no rendered block of README.md, docs/ or benchmarks/README.md
    was edited by hand or disagrees with its record; blocks older than their code are only marked."""
    out = subprocess.run([sys.executable, "-m", "zkconsumer", "results", "check"], capture_output=True, text=True,
                         cwd=record.ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "rendered blocks: 0 failing" in out.stdout


AUDITED = """# Runs

The join took 370 ms and broke in 8 of 200 runs (4%), 0.58x of Kafka's, 215 a minute, 200/200.
Took <!-- result r figure a.b -->1.34 s<!-- /result 0a1b -->; `--timeout 6 s` and issue 23 and Kafka 0.8.2.2.
With 4 s sessions, a 2 s pause and 30-s schedules set, a pause of 2.5 s counts.

```sh
zkconsumer sim --seeds 200   # 3 s
```

## Scaling to 500 consumers, 14 ms
At 2,273 requests and 1,110 ms.
"""


def test_the_audit_finds_typed_figures_and_skips_rendered_blocks_and_code() -> None:
    from zkconsumer.results import audit

    found = audit.typed_figures("d.md", AUDITED)
    assert [f.text for f in found] == ["370 ms", "8 of 200", "4%", "0.58x", "215 a minute", "200/200", "2.5 s",
                                       "1,110 ms"]
    assert [f.line for f in found][-1] == 12 and found[-1].section == "Scaling to 500 consumers, 14 ms"
    assert audit.by_section(found)[0] == ("Runs", 7)


def test_the_audit_is_a_ratchet_a_document_may_lose_typed_figures_never_gain_them(tmp_path: Path) -> None:
    from zkconsumer.results import audit

    doc = tmp_path / "d.md"
    doc.write_text(AUDITED)
    found = audit.audit([doc])
    (key,) = found
    assert audit.regressions(found, {key: 8}) == {}
    assert audit.regressions(found, {key: 9}) == {}
    assert audit.regressions(found, {key: 7}) == {key: (8, 7)}
    assert audit.regressions(found, {}) == {key: (8, 0)}  # a document not in the baseline may hold none
    audit.write_baseline({key: 7}, tmp_path / "allowed.json")
    assert audit.load_baseline(tmp_path / "allowed.json") == {key: 7}


def test_no_document_gained_typed_figures() -> None:
    """The CI half of the audit (``zkconsumer results audit``): README.md, docs/ and benchmarks/README.md hold no
    more hand-typed measured numbers than results/audit/typed-figures.json allows."""
    out = subprocess.run([sys.executable, "-m", "zkconsumer", "results", "audit"], capture_output=True, text=True,
                         cwd=record.ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "typed figures in" in out.stdout
