"""Synthetic traces in the docs/trace.md schema, fast enough for 10-million-event benchmarks.

A group of consumers reads one or more topics; members join and leave; at each change every member runs a
0.8-style rebalance (release all, assign with the project's range assignor, claim, done). A new owner resumes
from the last *committed* offset, so records delivered after the last commit are delivered again: the
at-least-once duplicates the analysis must find. Lines are formatted with f-strings, not ``json.dumps``,
because generation would otherwise dominate the benchmark.
"""

from __future__ import annotations

import random
from pathlib import Path

from zkconsumer.assignment.assignors import AssignmentContext, assign


class _Writer:
    def __init__(self, directory: Path, group: str, consumer: str) -> None:
        self.f = open(directory / f"{consumer}.jsonl", "w", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self.prefix = f'{{"v":1,"ts":%d,"event":"%s","group":"{group}","consumer":"{consumer}","seq":%d'
        self.seq = 0
        self.lines = 0

    def emit(self, ts: int, event: str, extra: str = "") -> None:
        self.seq += 1
        self.lines += 1
        self.f.write(self.prefix % (ts, event, self.seq) + extra + "}\n")

    def close(self) -> None:
        self.f.close()


def _list(items: list[str]) -> str:
    return "[" + ",".join(f'"{i}"' for i in items) + "]"


def generate(directory: str | Path, events: int, consumers: int = 8, topics: int = 2, partitions: int = 16,
             changes: int = 6, commit_every: int = 50, seed: int = 7, group: str = "synth") -> int:
    """Write about ``events`` lines over ``consumers`` (+ joiners) files; return the exact line count."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    topic_names = [f"t{i}" for i in range(topics)]
    parts = {t: list(range(partitions)) for t in topic_names}
    writers: dict[str, _Writer] = {}
    members: list[str] = []
    next_offset: dict[str, int] = {f"{t}-{p}": 0 for t in topic_names for p in parts[t]}
    committed = dict(next_offset)
    owned: dict[str, list[str]] = {}
    rebalance_no: dict[str, int] = {}
    ts = 1_700_000_000_000
    total = 0

    def lines() -> int:
        return sum(w.lines for w in writers.values())

    def rebalance(cause: str) -> None:
        nonlocal ts
        ctx = AssignmentContext({m: dict.fromkeys(topic_names, 1) for m in members}, parts)
        whole = assign("range", ctx)
        for m in members:
            w = writers[m]
            rebalance_no[m] = rebalance_no.get(m, 0) + 1
            r = rebalance_no[m]
            w.emit(ts, "rebalance_triggered", f',"cause":"{cause}"')
            w.emit(ts + 1, "attempt_started", f',"rebalance":{r},"attempt":1,"ids_cversion":{len(members)}')
            if owned.get(m):
                w.emit(ts + 2, "released", f',"rebalance":{r},"partitions":{_list(owned[m])}')
            share = {str(tp): tid for tp, tid in whole.for_consumer(m).items()}
            body = ",".join(f'"{k}":"{v}"' for k, v in sorted(share.items()))
            w.emit(ts + 3, "assigned", f',"rebalance":{r},"attempt":1,"assignment":{{{body}}},"strategy":"range"')
            w.emit(ts + 5 + rng.randrange(5), "claimed", f',"rebalance":{r},"attempt":1,"partitions":{{{body}}}')
            owned[m] = sorted(share)
            w.emit(ts + 12, "rebalance_done",
                   f',"rebalance":{r},"attempts":1,"duration_ms":11,"owned":{_list(owned[m])}')
        for tp in next_offset:  # new owners resume from the committed offset: at-least-once duplicates
            next_offset[tp] = committed[tp]
        ts += 20

    def join() -> None:
        cid = f"{group}_c{len(writers)}"
        writers[cid] = _Writer(out, group, cid)
        members.append(cid)
        subscription = ",".join(f'"{t}":1' for t in topic_names)
        writers[cid].emit(ts, "registered", f',"subscription":{{{subscription}}},"pattern":"static"')

    for _ in range(consumers):
        join()
    rebalance("startup")
    budget_per_phase = max(1, events // (changes + 1))
    for phase in range(changes + 1):
        target = min(events, (phase + 1) * budget_per_phase)
        while (total := lines()) < target:
            ts += 1
            for m in members:
                w = writers[m]
                for tp in owned[m]:
                    o = next_offset[tp]
                    next_offset[tp] = o + 1
                    topic, p = tp.rsplit("-", 1)
                    w.emit(ts, "record_delivered",
                           f',"topic":"{topic}","partition":{p},"offset":{o},"thread":"{m}-0"')
                    if (o + 1) % commit_every == 0:
                        committed[tp] = o + 1
                        w.emit(ts, "offset_committed", f',"topic":"{topic}","partition":{p},"offset":{o + 1}')
        if phase == changes:
            break
        if len(members) > 2 and rng.random() < 0.5:
            gone = members.pop(rng.randrange(len(members)))
            writers[gone].emit(ts, "released", f',"rebalance":{rebalance_no[gone]},"partitions":{_list(owned[gone])}')
            writers[gone].emit(ts, "shutdown", ',"committed":true')
            owned[gone] = []
            rebalance("ids_changed")
        else:
            join()
            rebalance("ids_changed")
    for m in members:
        writers[m].emit(ts + 1, "shutdown", ',"committed":true')
    total = lines()
    for w in writers.values():
        w.close()
    return total
