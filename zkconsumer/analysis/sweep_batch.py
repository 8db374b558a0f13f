"""Range, RoundRobin, RoundRobin-relaxed and sticky over whole batches of sweep scenarios, with numpy.

The per-scenario Python loop (:func:`zkconsumer.analysis.scenarios.run_scenario`, which calls the assignors in
:mod:`zkconsumer.assignment.assignors`) is the sweep's oracle; this module computes the same rows for many scenarios at
once, and the tests check it against that loop row for row (hypothesis included). The scenarios of a batch
are split by (topics, partitions), so each shape's arrays carry no padding.

Layout: every (scenario, step) is a *row*. A scenario's threads (all members that ever appear, each with its
``streams`` threads) are numbered by their position ``k`` in Java's ``String`` order of the thread ids, so the
order of any step's live threads is the order of their ``k``. Partition ``p`` of the ``t``-th topic (topics in
name order) is the flat index ``t * P + p`` with ``P`` the shape's partition count; an owner array holds
``k`` per partition, or -1 (not assigned: the topic has no subscriber, or the partition does not exist).

* Range is arithmetic: with ``C`` subscribed threads (sorted) and ``P`` partitions, thread ``i`` takes
  ``P div C`` partitions, one more while ``i < P mod C``, in partition order.
* RoundRobin is the group's partitions in the Java hash order of ``"[topic,partition]"`` dealt cyclically; the
  hash order of every topic of a shape is computed once (by
  :func:`zkconsumer.assignment.assignors.hash_ordered_partitions`) and a step's order is that order restricted
  to its subscribed topics (the restriction of a stable sort).
* RoundRobin-relaxed is the same deal skipping threads that do not subscribe to the partition's topic: a scan
  with state (the position in the thread list), run over all rows at once, one partition position at a time,
  with a table "next subscribed thread at or after position u" per row and topic.
* Sticky needs the previous step's result: steps run in order, every scenario of the batch at once
  (:func:`sticky_owners`).

Scenarios this layout does not cover (a member id drawn twice, a strategy it does not know) fall back to the
scalar loop, so the output is always the oracle's.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import pyarrow as pa

from zkconsumer.analysis.scenarios import ARROW_SCHEMA, INT_COLS, Scenario, arrow_batch, make_scenario, run_scenario
from zkconsumer.assignment.assignors import ROUND_ROBIN_MESSAGE, hash_ordered_partitions
from zkconsumer.javacompat import java_order_key

#: Strategies this module computes; anything else in a config runs through the scalar loop.
BATCHED = ("range", "roundrobin", "roundrobin-relaxed", "sticky")
#: ``error`` of a RoundRobin precondition row: the first line of Kafka's message, as the scalar loop cuts it.
PRECONDITION_ERROR = ("requirement failed: " + ROUND_ROBIN_MESSAGE)[:120]


@lru_cache(maxsize=256)
def _hash_order(topics: int, partitions: int, width: int) -> np.ndarray:
    """Flat indices (``t * width + p``) of a shape's partitions in RoundRobin's order, all topics subscribed."""
    names = sorted((f"t{i}" for i in range(topics)), key=java_order_key)  # AssignmentContext's topic order
    index = {name: i for i, name in enumerate(names)}
    order = hash_ordered_partitions(names, {n: range(partitions) for n in names})
    return np.fromiter((index[tp.topic] * width + tp.partition for tp in order), dtype=np.int64,
                       count=len(order))


@lru_cache(maxsize=64)
def _topic_bits(topics: int) -> dict[str, int]:
    """Topic name → its bit: topics are numbered in name order (AssignmentContext's order)."""
    names = sorted((f"t{i}" for i in range(topics)), key=java_order_key)
    return {name: 1 << i for i, name in enumerate(names)}


class _Plan:
    """A batch's scenarios flattened into rows (one per scenario step), built in one Python pass."""

    def __init__(self, scenarios: Sequence[Scenario]) -> None:
        self.scenarios = list(scenarios)
        self.topics = max((sc.topics for sc in scenarios), default=1)
        self.width = max((sc.partitions for sc in scenarios), default=1)
        members = max((len(sc.members) + len(sc.changes) for sc in scenarios), default=1)
        self.threads = max((sc.streams * (len(sc.members) + len(sc.changes)) for sc in scenarios), default=1)
        row_scenario: list[int] = []  # position of the row's scenario in the batch
        row_step: list[int] = []
        alive_at: list[int] = []  # (row, member) pairs, flattened: members alive at the row's step
        kmem: list[int] = []  # thread position → member, per scenario, padded to self.threads
        bits: list[int] = []  # member → subscribed topics (bit t), per scenario, padded to ``members``
        row = 0
        for s, sc in enumerate(scenarios):
            ids = [*sc.members, *(cid for kind, cid, _ in sc.changes if kind == "join")]
            index = {cid: m for m, cid in enumerate(ids)}
            topic_bit = _topic_bits(sc.topics)
            bits += [sum(map(topic_bit.__getitem__, sub)) for sub in sc.members.values()]
            bits += [sum(map(topic_bit.__getitem__, sub)) for kind, _, sub in sc.changes if kind == "join"]
            bits += [0] * (members - len(ids))
            names = [(f"{cid}-{j}", m) for m, cid in enumerate(ids) for j in range(sc.streams)]
            if all(cid.isascii() for cid in ids):
                names.sort()  # ids are distinct, so the names decide
            else:
                names.sort(key=lambda pair: java_order_key(pair[0]))
            kmem += [m for _, m in names]
            kmem += [-1] * (self.threads - len(names))
            alive = list(range(len(sc.members)))
            for step, (kind, cid, _) in enumerate([("initial", "", None), *sc.changes]):
                if kind == "join":
                    alive.append(index[cid])
                elif kind in ("leave", "crash"):
                    alive.remove(index[cid])
                row_scenario.append(s)
                row_step.append(step)
                for m in alive:
                    alive_at += (row, m)
                row += 1
        n_rows = row
        self.kmem = np.asarray(kmem, dtype=np.int64).reshape(len(scenarios), self.threads)
        self.bits = np.asarray(bits, dtype=np.int64).reshape(len(scenarios), members)
        self.row_scenario = np.asarray(row_scenario, dtype=np.int64)
        self.row_step = np.asarray(row_step, dtype=np.int64)
        alive = np.zeros((n_rows, members), dtype=bool)
        pairs = np.asarray(alive_at, dtype=np.int64).reshape(-1, 2)
        alive[pairs[:, 0], pairs[:, 1]] = True
        self.alive_members = alive
        per_scenario = np.asarray([(sc.partitions, sc.topics) for sc in scenarios], dtype=np.int64).reshape(-1, 2)
        self.partitions = per_scenario[self.row_scenario, 0]
        self.topic_count = per_scenario[self.row_scenario, 1]
        self._subscriptions()

    def _subscriptions(self) -> None:
        """``sub[r, t, k]``: thread at position k is alive at row r and subscribes to topic t."""
        kmem = self.kmem[self.row_scenario]  # [R, K]
        valid = kmem >= 0
        safe = np.where(valid, kmem, 0)
        rows = np.arange(len(self.row_scenario))[:, None]
        alive = valid & self.alive_members[rows, safe]
        bits = self.bits[self.row_scenario[:, None], safe]  # [R, K]
        topics = np.arange(self.topics)
        self.kmem_rows = kmem
        self.sub = alive[:, None, :] & ((bits[:, None, :] >> topics[None, :, None]) & 1).astype(bool)
        self.live = self.sub.any(axis=1)  # [R, K]: the row's threads (every member subscribes to something)
        self.subscribers = self.sub.sum(axis=2)  # [R, T]
        self.active = self.subscribers > 0
        # per (row, topic): subscribed thread positions first, in Java order
        self.order = np.argsort(~self.sub, axis=2, kind="stable")

    def hash_orders(self) -> np.ndarray:
        """[R, F] flat partition indices in RoundRobin order (the row's shape, all topics), -1 padded."""
        f = self.topics * self.width
        out = np.full((len(self.row_scenario), f), -1, dtype=np.int64)
        for (t, p), rows in _group_rows(self.topic_count, self.partitions).items():
            order = _hash_order(int(t), int(p), self.width)
            out[np.ix_(rows, np.arange(len(order)))] = order
        return out


def _group_rows(*keys: np.ndarray) -> dict[tuple[int, ...], np.ndarray]:
    stacked = np.stack(keys, axis=1)
    uniq, inverse = np.unique(stacked, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    return {tuple(int(v) for v in u): np.flatnonzero(inverse == i) for i, u in enumerate(uniq)}


def range_owners(plan: _Plan) -> np.ndarray:
    """[R, F] owner positions under Range."""
    c = np.maximum(plan.subscribers, 1)[:, :, None]  # [R, T, 1]
    parts = plan.partitions[:, None, None]
    n, extra = parts // c, parts % c
    p = np.arange(plan.width)[None, None, :]
    big = extra * (n + 1)  # partitions taken by the threads that get one more
    i = np.where(p < big, p // (n + 1), extra + (p - big) // np.maximum(n, 1))
    i = np.minimum(i, plan.threads - 1)
    owner = np.take_along_axis(plan.order, i, axis=2)
    valid = plan.active[:, :, None] & (p < parts)
    return np.where(valid, owner, -1).reshape(len(plan.row_scenario), -1)


def _dealt(plan: _Plan, hord: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(act, topic) per hash-order position: the partition exists and its topic has a subscriber."""
    topic = np.where(hord >= 0, hord // plan.width, 0)
    act = (hord >= 0) & np.take_along_axis(plan.active, topic, axis=1)
    return act, topic


def roundrobin_owners(plan: _Plan, hord: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """([R, F] owners, [R] precondition held) under Kafka 0.8.2's RoundRobin."""
    rows = np.arange(len(plan.row_scenario))
    head = np.argmax(plan.active, axis=1)  # first subscribed topic in name order
    head_sub = plan.sub[rows, head]  # [R, K]
    same = (plan.sub == head_sub[:, None, :]).all(axis=2) | ~plan.active
    ok = same.all(axis=1)
    n = np.maximum(plan.subscribers[rows, head], 1)
    act, _ = _dealt(plan, hord)
    i = np.cumsum(act, axis=1) - 1
    thread = plan.order[rows, head][rows[:, None], i % n[:, None]]
    owners = np.full((len(rows), plan.topics * plan.width), -1, dtype=np.int64)
    act &= ok[:, None]
    r_idx = np.broadcast_to(rows[:, None], act.shape)
    owners[r_idx[act], hord[act]] = thread[act]
    return owners, ok


def roundrobin_relaxed_owners(plan: _Plan, hord: np.ndarray) -> np.ndarray:
    """[R, F] owners under Kafka 0.10.2's relaxed RoundRobin (a scan over hash-order positions, all rows at once)."""
    rows = np.arange(len(plan.row_scenario))
    live = plan.live
    n = np.maximum(live.sum(axis=1), 1)  # [R]
    u_order = np.argsort(~live, axis=1, kind="stable")  # [R, K]: the live threads first, in Java order
    k = plan.threads
    sub_u = np.take_along_axis(plan.sub, np.broadcast_to(u_order[:, None, :], plan.sub.shape), axis=2)
    u = np.arange(k)
    sub_u &= u[None, None, :] < n[:, None, None]
    big = np.iinfo(np.int64).max
    nxt = np.where(sub_u, u[None, None, :], big)
    nxt = np.minimum.accumulate(nxt[:, :, ::-1], axis=2)[:, :, ::-1]  # next subscribed at or after u
    nxt = np.where(nxt == big, nxt[:, :, :1], nxt)  # none after u: wrap to the first (unused if inactive)
    nxt = np.where(nxt == big, 0, nxt)
    act, topic = _dealt(plan, hord)
    owners = np.full((len(rows), plan.topics * plan.width), -1, dtype=np.int64)
    pos = np.zeros(len(rows), dtype=np.int64)
    last = int(act.sum(axis=1).max(initial=0))
    # compact each row's dealt positions to the front, so the scan runs as long as the longest row only
    order = np.argsort(~act, axis=1, kind="stable")[:, :last]
    act_c = np.take_along_axis(act, order, axis=1)
    topic_c = np.take_along_axis(topic, order, axis=1)
    hord_c = np.take_along_axis(hord, order, axis=1)
    for q in range(last):
        a = act_c[:, q]
        chosen = nxt[rows, topic_c[:, q], pos]
        owners[rows[a], hord_c[a, q]] = u_order[rows[a], chosen[a]]
        pos = np.where(a, (chosen + 1) % n, pos)
    return owners


def sticky_owners(plan: _Plan) -> np.ndarray:
    """[R, F] owners under :func:`~zkconsumer.assignment.assignors.sticky_assign`, each step given the previous
    one's result.

    Steps run in order (a step needs its predecessor), every scenario at once. The same three phases as the
    scalar assignor: keep what a thread still subscribed to owned; give each topic's free partitions, ascending,
    to its threads by "least loaded, ties by id" (the picks come level by level: at level L every thread whose
    load is at most L, in id order); then move one partition per round and row until balanced.
    """
    n_rows, k = plan.live.shape
    t_count, width = plan.topics, plan.width
    topic_of = np.repeat(np.arange(t_count), width)  # [F]
    exists = np.tile(np.arange(width), t_count)[None, :] < plan.partitions[:, None]  # [R, F]
    out = np.full((n_rows, t_count * width), -1, dtype=np.int64)
    for step in range(int(plan.row_step.max(initial=-1)) + 1):
        rows = np.flatnonzero(plan.row_step == step)
        n = len(rows)
        ar = np.arange(n)
        sub, live = plan.sub[rows], plan.live[rows]
        own = np.full((n, t_count * width), -1, dtype=np.int64)
        if step:
            prev = out[rows - 1]
            held = prev >= 0
            still = sub[ar[:, None], topic_of[None, :], np.where(held, prev, 0)]
            own = np.where(held & still, prev, -1)
        load = _loads(own, k)
        for t in range(t_count):
            sub_t = sub[:, t, :]  # [n, K]
            free = exists[rows, t * width:(t + 1) * width] & (own[:, t * width:(t + 1) * width] < 0)
            free &= plan.active[rows, t][:, None]
            some = np.flatnonzero(free.any(axis=1))  # rows with free partitions (so with subscribers) only
            if not len(some):
                continue
            free, sub_t, load_t = free[some], sub_t[some], load[some]
            floor = np.where(sub_t, load_t, np.iinfo(np.int64).max).min(axis=1)
            levels = floor[:, None] + np.arange(width)[None, :]  # width levels give at least width picks
            eligible = (sub_t[:, None, :] & (load_t[:, None, :] <= levels[:, :, None])).reshape(len(some), -1)
            # the first ``width`` eligible (level, thread) pairs of each row, level-major then thread order
            _, cols = np.nonzero(eligible)
            starts = np.concatenate(([0], np.cumsum(eligible.sum(axis=1))[:-1]))
            picks = cols[starts[:, None] + np.arange(width)[None, :]] % k
            rank = np.cumsum(free, axis=1) - 1
            chosen = np.where(free, np.take_along_axis(picks, np.maximum(rank, 0), axis=1), -1)
            block = own[some, t * width:(t + 1) * width]
            own[some, t * width:(t + 1) * width] = np.where(free, chosen, block)
            load[some] += _loads(chosen, k)
        _balance(own, load, sub, live, width)
        out[rows] = own
    return out


def _loads(owners: np.ndarray, k: int) -> np.ndarray:
    n = len(owners)
    held = owners >= 0
    return np.bincount((np.arange(n)[:, None] * k + owners)[held], minlength=n * k).reshape(n, k)


def _balance(own: np.ndarray, load: np.ndarray, sub: np.ndarray, live: np.ndarray, width: int) -> None:
    """Sticky's balancing, one move per round for every unbalanced row: the most loaded thread (ties: largest
    id) gives its largest partition of the largest topic whose lightest thread (ties: smallest id) carries at
    least two fewer, to that thread. In place."""
    n, t_count, k = sub.shape
    big = np.iinfo(np.int64).max
    todo = np.arange(n)
    while len(todo):
        ld, lv, sb = load[todo], live[todo], sub[todo]
        m = len(todo)
        ar = np.arange(m)
        weights = np.where(lv, ld, -1)
        heavy = k - 1 - np.argmax(weights[:, ::-1], axis=1)
        top = weights[ar, heavy]
        low = np.where(lv, ld, big).min(axis=1)
        light = np.argmin(np.where(sb, ld[:, None, :], big), axis=2)  # [m, T]
        light_load = np.take_along_axis(ld, light, axis=1)
        candidate = sb[ar, :, heavy] & (top[:, None] - light_load > 1) & (top - low > 1)[:, None]
        owned = (own[todo].reshape(m, t_count, width) == heavy[:, None, None]) & candidate[:, :, None]
        has = owned.any(axis=2)
        moving = has.any(axis=1)
        topic = t_count - 1 - np.argmax(has[:, ::-1], axis=1)
        part = width - 1 - np.argmax(owned[ar, topic][:, ::-1], axis=1)
        r, a = todo[moving], ar[moving]
        to = light[a, topic[a]]
        own[r, topic[a] * width + part[a]] = to
        load[r, heavy[a]] -= 1
        load[r, to] += 1
        todo = r


def _metrics(plan: _Plan, owners: np.ndarray, ok: np.ndarray) -> dict[str, np.ndarray]:
    """Per row: assigned, balance, max, min, and the moves against the scenario's previous step (mask = null)."""
    n_rows, k = plan.live.shape
    held = owners >= 0
    flat = (np.arange(n_rows)[:, None] * k + owners)[held]
    counts = np.bincount(flat, minlength=n_rows * k).reshape(n_rows, k)
    top = counts.max(axis=1)
    low = np.where(plan.live, counts, np.iinfo(np.int64).max).min(axis=1)
    low = np.where(plan.live.any(axis=1), low, 0)
    prev = np.roll(owners, 1, axis=0)
    has_prev = (plan.row_step > 0) & np.roll(ok, 1) & ok
    prev_held = prev >= 0
    moved = (prev_held & (owners != prev)).sum(axis=1)
    safe_prev = np.where(prev_held, prev, 0)
    rows = np.arange(n_rows)[:, None]
    forced = (prev_held & ~plan.live[rows, safe_prev]).sum(axis=1)
    kmem = plan.kmem_rows
    member_now = np.where(held, kmem[rows, np.where(held, owners, 0)], -1)
    member_before = kmem[rows, safe_prev]
    moved_consumer = (prev_held & (member_now != member_before)).sum(axis=1)
    return {"assigned": np.where(ok, held.sum(axis=1), 0), "balance": top - low, "max_per_thread": top,
            "min_per_thread": low, "moved": moved, "moved_forced": forced, "moved_consumer": moved_consumer,
            "has_prev": has_prev}


def batch_rows(scenarios: Sequence[Scenario], strategies: tuple[str, ...], seed: int) -> pa.RecordBatch:
    """The sweep's result rows for ``scenarios`` (``ARROW_SCHEMA``, same rows and order as the scalar loop)."""
    fast = [sc for sc in scenarios if _batchable(sc)]
    batched = [s for s in strategies if s in BATCHED]
    scalar = tuple(s for s in strategies if s not in BATCHED)
    tables = []
    keys: list[np.ndarray] = []  # (scenario position, step, strategy position) of every row, to restore order
    position = {id(sc): i for i, sc in enumerate(scenarios)}
    if batched:
        # one plan per (topics, partitions): arrays without padding; a few thousand scenarios make each one big
        # enough for numpy's per-call cost not to matter
        shapes: dict[tuple[int, int], list[Scenario]] = {}
        for sc in fast:
            shapes.setdefault((sc.topics, sc.partitions), []).append(sc)
        for group in shapes.values():
            tables.append(_batched_table(_Plan(group), batched, strategies, seed, position, keys))
    slow_rows: list[tuple] = []
    slow_keys: list[tuple[int, int, int]] = []
    strategy_pos = {s: i for i, s in enumerate(strategies)}
    fast_ids = {id(sc) for sc in fast}
    for sc in scenarios:
        todo = scalar if id(sc) in fast_ids and batched else strategies
        if not todo:
            continue
        for row in run_scenario(sc, todo, seed):
            slow_rows.append(row)
            slow_keys.append((position[id(sc)], row[8], strategy_pos[row[7]]))
    if slow_rows:
        tables.append(pa.Table.from_batches([arrow_batch(slow_rows)]))
        keys.append(np.asarray(slow_keys, dtype=np.int64).reshape(-1, 3))
    if not tables:
        return pa.RecordBatch.from_pylist([], schema=ARROW_SCHEMA)
    table = pa.concat_tables(tables)
    key = np.concatenate(keys)
    perm = np.lexsort((key[:, 2], key[:, 1], key[:, 0]))
    return table.take(pa.array(perm)).combine_chunks().to_batches()[0]


def _batchable(sc: Scenario) -> bool:
    """Every member id distinct (a 32-bit id drawn twice merges members in the scalar loop) and one stream
    count per member."""
    ids = [*sc.members, *(cid for kind, cid, _ in sc.changes if kind == "join")]
    if len(set(ids)) != len(ids) or len(ids) != len(sc.members) + sum(k == "join" for k, _, _ in sc.changes):
        return False
    subs = [*sc.members.values(), *(sub for kind, _, sub in sc.changes if kind == "join")]
    return all(sub and set(sub.values()) == {sc.streams} for sub in subs)


def _batched_table(plan: _Plan, batched: list[str], strategies: tuple[str, ...], seed: int,
                   position: dict[int, int], keys: list[np.ndarray]) -> pa.Table:
    n_rows = len(plan.row_scenario)
    hord = plan.hash_orders() if any(s.startswith("roundrobin") for s in batched) else None
    results: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    everyone = np.ones(n_rows, dtype=bool)
    for s in batched:
        if s == "range":
            results[s] = (range_owners(plan), everyone)
        elif s == "roundrobin":
            results[s] = roundrobin_owners(plan, hord)
        elif s == "sticky":
            results[s] = (sticky_owners(plan), everyone)
        else:
            results[s] = (roundrobin_relaxed_owners(plan, hord), everyone)
    scs = plan.scenarios
    sc_of = pa.array(plan.row_scenario)
    step = plan.row_step
    members = plan.alive_members.sum(axis=1)
    streams = np.asarray([sc.streams for sc in scs], dtype=np.int64)[plan.row_scenario]
    change: list[str] = []
    member: list[str] = []
    for sc in scs:
        change.append("initial")
        member.append("")
        for kind, cid, _ in sc.changes:
            change.append(kind)
            member.append(cid)
    common = {  # the same for every strategy
        "scenario_id": pa.array([sc.scenario_id for sc in scs], pa.int64()).take(sc_of),
        "seed": pa.array(np.full(n_rows, seed), pa.int64()),
        "consumers": pa.array([sc.consumers for sc in scs], pa.int32()).take(sc_of),
        "streams": pa.array(streams, pa.int32()),
        "topics": pa.array(plan.topic_count, pa.int32()),
        "partitions_per_topic": pa.array(plan.partitions, pa.int32()),
        "pattern": pa.array([sc.pattern for sc in scs], pa.string()).take(sc_of),
        "step": pa.array(step, pa.int32()),
        "change": pa.array(change, pa.string()),
        "member": pa.array(member, pa.string()),
        "members": pa.array(members, pa.int32()),
        "threads": pa.array(members * streams, pa.int32()),
        "partitions": pa.array(plan.active.sum(axis=1) * plan.partitions, pa.int32()),
    }
    strategy_pos = {s: i for i, s in enumerate(strategies)}
    position_of = np.asarray([position[id(sc)] for sc in scs], dtype=np.int64)[plan.row_scenario]
    status = pa.array(["ok", "precondition_failed"], pa.string())
    error = pa.array([None, PRECONDITION_ERROR], pa.string())
    parts = []
    for s in batched:
        owners, ok = results[s]
        m = _metrics(plan, owners, ok)
        failed = pa.array((~ok).astype(np.int8))
        null_metric = ~ok
        null_move = ~m["has_prev"]
        cols = {
            **common,
            "strategy": pa.array([s] * n_rows, pa.string()),
            "assigned": pa.array(m["assigned"], pa.int32()),
            "status": status.take(failed),
            "balance": pa.array(m["balance"], pa.int32(), mask=null_metric),
            "max_per_thread": pa.array(m["max_per_thread"], pa.int32(), mask=null_metric),
            "min_per_thread": pa.array(m["min_per_thread"], pa.int32(), mask=null_metric),
            "moved": pa.array(m["moved"], pa.int32(), mask=null_move),
            "moved_forced": pa.array(m["moved_forced"], pa.int32(), mask=null_move),
            "moved_consumer": pa.array(m["moved_consumer"], pa.int32(), mask=null_move),
            "error": error.take(failed),
        }
        parts.append(pa.table({f.name: cols[f.name] for f in ARROW_SCHEMA}, schema=ARROW_SCHEMA))
        keys.append(np.stack([position_of, step, np.full(n_rows, strategy_pos[s])], axis=1))
    return pa.concat_tables(parts)


def run_batched(cfg, n: int, start: int = 0, chunk: int = 1000):  # -> pandas.DataFrame
    """Like :func:`zkconsumer.analysis.sweep.run_local`, batched: the benchmark's single-core batched rate."""

    cells = cfg.cells
    batches = [batch_rows([make_scenario(cfg, i, cells) for i in range(lo, min(lo + chunk, start + n))],
                          cfg.strategies, cfg.seed) for lo in range(start, start + n, chunk)]
    frame = pa.Table.from_batches(batches, schema=ARROW_SCHEMA).to_pandas()
    return frame.astype(dict.fromkeys(INT_COLS, "Int32"))
