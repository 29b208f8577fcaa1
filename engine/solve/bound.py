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
at most this program's, and a small CP-SAT model proves it in milliseconds.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

from .cpsat import cp_model
from .problem import NO_DOMAIN, Problem

MAX_POOLS = 128  # distinct candidate sets compared pairwise (subset rows); beyond it, each set's own classes only


def capacity_bound(problem: Problem, seconds: float) -> int:
    """An upper bound on the tier-1 value of every plan of `problem`, found within about `seconds`."""
    caps = class_caps(problem)
    if not any(caps):
        return 0
    m = cp_model.CpModel()
    x = [m.new_int_var(0, cap, f"x{c}") if cap else 0 for c, cap in enumerate(caps)]
    _pool_rows(m, problem, x, caps)
    _gang_rows(m, problem, x, caps)
    for group in problem.exclusive:
        nodes = set().union(*(problem.classes[c].candidates for c in group))
        m.add(sum(x[c] for c in group) <= len(nodes))
    for budget in problem.budgets:
        if not budget.groups:
            m.add(sum(w * x[c] for c, w in zip(budget.classes, budget.weights)) <= budget.most)
    m.maximize(sum(cls.weight * x[c] for c, cls in enumerate(problem.classes) if caps[c]))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(0.01, seconds)
    solver.parameters.num_workers = 1
    status = solver.solve(m)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return problem.upper_bound()
    return min(problem.upper_bound(), math.floor(solver.best_objective_bound + 1e-6))


def class_caps(problem: Problem) -> list[int]:
    """Per class, the most pods any plan places: what its candidate nodes take one node at a time (free room,
    max per node, one per domain of a hard self-separation), none for a gang that cannot reach its quorum."""
    free = np.asarray(problem.free, dtype=np.int64).reshape(len(problem.free), len(problem.resources))
    placeable = problem.placeable()
    per_domain = _one_per_domain(problem)
    caps = []
    for c, cls in enumerate(problem.classes):
        if not placeable[c] or not cls.candidates:
            caps.append(0)
            continue
        fit = np.full(len(cls.candidates), cls.count, dtype=np.int64)
        room = free[list(cls.candidates)]
        for r, d in enumerate(cls.demand):
            if d > 0:
                np.minimum(fit, room[:, r] // d, out=fit)
        if cls.max_per_node is not None:
            np.minimum(fit, cls.max_per_node, out=fit)
        cap = min(cls.count, int(fit.clip(min=0).sum()))
        for partition in per_domain.get(c, ()):
            domains = {problem.partitions[partition][n] for n in cls.candidates}
            if NO_DOMAIN not in domains:
                cap = min(cap, len(domains))
        caps.append(cap)
    return caps


def _one_per_domain(problem: Problem) -> dict[int, list[int]]:
    """Class -> partitions in which a hard separation allows one of its pods per domain."""
    out: dict[int, list[int]] = defaultdict(list)
    for sep in problem.separations:
        if sep.weight is None and sep.a in sep.others:
            out[sep.a].append(sep.partition)
    return out


def _pool_rows(m, problem: Problem, x: list, caps: list[int]) -> None:
    """Per resource: the classes whose candidates lie inside a candidate set use at most its free room."""
    live = [c for c, cap in enumerate(caps) if cap]
    pools: dict[tuple[int, ...], list[int]] = defaultdict(list)
    for c in live:
        pools[problem.classes[c].candidates].append(c)
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
        members[union] = live
    free = problem.free
    for nodes, classes in members.items():
        for r in range(len(problem.resources)):
            demand = [(problem.classes[c].demand[r], c) for c in classes if problem.classes[c].demand[r] > 0]
            room = sum(free[n][r] for n in nodes)
            if sum(d * caps[c] for d, c in demand) > room:
                m.add(sum(d * x[c] for d, c in demand) <= room)


def _gang_rows(m, problem: Problem, x: list, caps: list[int]) -> None:
    """A gang's members are placed only when at least `need` of them are."""
    for gang in problem.gangs:
        members = [c for c in gang.classes if caps[c]]
        if not members:
            continue
        on = m.new_bool_var("gang")
        m.add(sum(x[c] for c in members) >= gang.need * on)
        for c in members:
            m.add(x[c] <= caps[c] * on)
