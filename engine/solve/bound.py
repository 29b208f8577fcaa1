"""A tier-1 bound that knows capacity: the batch with node boundaries relaxed into pools of free room.

Why: the plain bound (`Problem.upper_bound`: every placeable pod placed) is never reached by a batch that
does not fit, so CP-SAT ran to the cycle's time limit trying to prove the starting plan best: 3.5 s on 606
gang pods asking for 150% of a cluster's cpu, where the greedy start held the optimum from the first
millisecond and every pod of the batch waited for the proof. CP-SAT's own bound (its LP over the full
model) cannot see that a gang is all or nothing once the pods are fractional.

The relaxation keeps what is cheap and sound: each class at most the pods its candidate nodes can take one
node at a time (resources, one per node, one per domain of a hard self-separation), each resource's demand
within the free room of every candidate set (for the classes whose candidates lie inside it), exclusive
groups, plain budgets, and gangs all or nothing. It drops which node a pod lands on, so any plan's value is
at most this program's, and a small CP-SAT model proves it in milliseconds. Interchangeable classes, and
interchangeable gangs, are one variable each (how many pods, how many gangs started): a batch of 1,875 equal
gangs is then a one-variable knapsack rather than a search over which of them start.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .cpsat import cp_model
from .problem import NO_DOMAIN, PodClass, Problem

MAX_POOLS = 128  # distinct candidate sets compared pairwise (subset rows); beyond it, each set's own classes only


@dataclass(slots=True)
class _Item:
    """Pods of one shape in the relaxation: interchangeable classes (or the members of that shape of
    interchangeable gangs), at most `cap` of them in all."""

    demand: tuple[int, ...]
    candidates: tuple[int, ...]
    weight: int
    cap: int
    var: Any = None  # its CP-SAT variable, once the model is built


@dataclass(slots=True)
class _Relaxation:
    items: list[_Item] = field(default_factory=list)
    of_class: dict[int, int] = field(default_factory=dict)  # a class kept apart (a row names it) -> its item
    gangs: list[tuple[int, int, list[tuple[int, int]]]] = field(default_factory=list)  # (how many, need, [(item, per gang cap)])


def capacity_bound(problem: Problem, seconds: float) -> int:
    """An upper bound on the tier-1 value of every plan of `problem`, found within about `seconds`."""
    pools = _pool_ids(problem)
    caps = class_caps(problem, pools)
    if not any(caps):
        return 0
    relaxed = _relax(problem, caps, pools)
    m = cp_model.CpModel()
    for item in relaxed.items:
        item.var = m.new_int_var(0, item.cap, "x")
    _pool_rows(m, problem, relaxed.items)
    _gang_rows(m, relaxed)
    for group in problem.exclusive:
        nodes = set().union(*(problem.classes[c].candidates for c in group))
        m.add(sum(relaxed.items[relaxed.of_class[c]].var for c in group if c in relaxed.of_class) <= len(nodes))
    for budget in problem.budgets:
        if not budget.groups:
            m.add(sum(w * relaxed.items[relaxed.of_class[c]].var for c, w in zip(budget.classes, budget.weights)
                      if c in relaxed.of_class) <= budget.most)
    m.maximize(sum(item.weight * item.var for item in relaxed.items))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(0.01, seconds)
    solver.parameters.num_workers = 1
    status = solver.solve(m)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return problem.upper_bound()
    return min(problem.upper_bound(), math.floor(solver.best_objective_bound + 1e-6))


def _pool_ids(problem: Problem) -> list[int]:
    """Per class, a number for its candidate set (equal sets, equal numbers): a set of 5,000 nodes is hashed once
    per class here rather than in every key that names it."""
    ids: dict[tuple[int, ...], int] = {}
    return [ids.setdefault(cls.candidates, len(ids)) for cls in problem.classes]


def class_caps(problem: Problem, pools: list[int] | None = None) -> list[int]:
    """Per class, the most pods any plan places: what its candidate nodes take one node at a time (free room,
    max per node, one per domain of a hard self-separation), none for a gang that cannot reach its quorum."""
    pools = pools if pools is not None else _pool_ids(problem)
    free = np.asarray(problem.free, dtype=np.int64).reshape(len(problem.free), len(problem.resources))
    placeable = problem.placeable()
    per_domain = _one_per_domain(problem)
    fits: dict[tuple, int] = {}  # classes alike in what bounds them per node share one count
    rooms: dict[int, np.ndarray] = {}
    caps = []
    for c, cls in enumerate(problem.classes):
        if not placeable[c] or not cls.candidates:
            caps.append(0)
            continue
        key = (pools[c], cls.demand, cls.max_per_node, cls.count)
        if key not in fits:
            room = rooms.get(pools[c])
            if room is None:
                room = rooms[pools[c]] = free[np.fromiter(cls.candidates, dtype=np.int64)]
            fits[key] = _fit(room, cls)
        cap = fits[key]
        for partition in per_domain.get(c, ()):
            domains = {problem.partitions[partition][n] for n in cls.candidates}
            if NO_DOMAIN not in domains:
                cap = min(cap, len(domains))
        caps.append(cap)
    return caps


def _fit(room: np.ndarray, cls: PodClass) -> int:
    fit = np.full(len(room), cls.count, dtype=np.int64)
    for r, d in enumerate(cls.demand):
        if d > 0:
            np.minimum(fit, room[:, r] // d, out=fit)
    if cls.max_per_node is not None:
        np.minimum(fit, cls.max_per_node, out=fit)
    return min(cls.count, int(fit.clip(min=0).sum()))


def _one_per_domain(problem: Problem) -> dict[int, list[int]]:
    """Class -> partitions in which a hard separation allows one of its pods per domain."""
    out: dict[int, list[int]] = defaultdict(list)
    for sep in problem.separations:
        if sep.weight is None and sep.subject in sep.others:
            out[sep.subject].append(sep.partition)
    return out


def _relax(problem: Problem, caps: list[int], pools: list[int]) -> _Relaxation:
    """The relaxation's items: classes a row names (exclusive groups, budgets) each their own; the others merged
    by shape (demand, candidates, weight) apart from gang members, and gangs alike (the same shapes of members and
    caps, the same need) merged into one count of gangs started, each group of them with items of its own."""
    named = {c for group in problem.exclusive for c in group} | {c for b in problem.budgets for c in b.classes}
    out = _Relaxation()
    index: dict[tuple, int] = {}

    def key_of(c: int, tag: tuple) -> tuple:
        cls = problem.classes[c]
        return (tag, c) if c in named else (tag, cls.demand, pools[c], cls.weight)

    def add(c: int, tag: tuple) -> int:
        cls, key = problem.classes[c], key_of(c, tag)
        if key not in index:
            index[key] = len(out.items)
            out.items.append(_Item(cls.demand, cls.candidates, cls.weight, 0))
        out.items[index[key]].cap += caps[c]
        if c in named:
            out.of_class[c] = index[key]
        return index[key]

    in_gang = {c for gang in problem.gangs for c in gang.classes}
    for c, cap in enumerate(caps):
        if cap and c not in in_gang:
            add(c, ("solo",))
    groups: dict[tuple, list[list[int]]] = defaultdict(list)
    for g, gang in enumerate(problem.gangs):
        members = [c for c in gang.classes if caps[c]]
        if not members:
            continue
        shape = tuple(sorted((problem.classes[c].demand, pools[c], problem.classes[c].weight, caps[c])
                             for c in members))
        groups[("gang", gang.need, g) if named.intersection(members) else ("alike", gang.need, shape)].append(members)
    for tag, gangs in groups.items():
        for members in gangs:
            for c in members:
                add(c, tag)
        per_gang: dict[int, int] = defaultdict(int)
        for c in gangs[0]:
            per_gang[index[key_of(c, tag)]] += caps[c]
        out.gangs.append((len(gangs), tag[1], list(per_gang.items())))
    return out


def _pool_rows(m, problem: Problem, items: list[_Item]) -> None:
    """Per resource: the items whose candidates lie inside a candidate set use at most its free room."""
    pools: dict[tuple[int, ...], list[_Item]] = defaultdict(list)
    for item in items:
        pools[item.candidates].append(item)
    keys = list(pools)
    members = {k: list(v) for k, v in pools.items()}
    if 1 < len(keys) <= MAX_POOLS:
        for k in keys:
            inside = set(k)
            for other in keys:
                if other is not k and len(other) <= len(k) and inside.issuperset(other):
                    members[k].extend(pools[other])
    union = tuple(sorted(set().union(*keys)))
    if union not in members:
        members[union] = list(items)
    free = np.asarray(problem.free, dtype=np.int64).reshape(len(problem.free), len(problem.resources))
    for nodes, inside_items in members.items():
        room = free[np.fromiter(nodes, dtype=np.int64)].sum(axis=0).tolist()
        for r in range(len(problem.resources)):
            demand = [(item.demand[r], item) for item in inside_items if item.demand[r] > 0]
            if sum(d * item.cap for d, item in demand) > room[r]:
                m.add(sum(d * item.var for d, item in demand) <= room[r])


def _gang_rows(m, relaxed: _Relaxation) -> None:
    """Alike gangs: `started` of them at most; each started one places its members (at least `need`, at most
    what its members take), an unstarted one none. Members of gangs are nothing else, so an item that holds
    gang members holds those of one group of gangs only (the shapes include the gang's members' caps)."""
    for count, need, per_item in relaxed.gangs:
        started = m.new_int_var(0, count, "started")
        items = [(relaxed.items[i], cap) for i, cap in per_item]
        m.add(sum(item.var for item, _ in items) >= need * started)
        for item, cap in items:
            m.add(item.var <= cap * started)
