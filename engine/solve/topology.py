"""A gang's topology levels: where the greedy tries it, and what a plan's spans cost.

A gang may be held to one domain of a required level (`GangRow.partition`), prefer the fewest domains of some levels
(`GangRow.prefer`, the first first), and need at least N members in each domain of one level that holds any
(`GangRow.least`). The starting plans try the tightest preferred level first, one domain at a time, then the coarser
ones, then the fewest domains of the first preferred level, largest first (Kueue's topology-aware fallback); CP-SAT
then minimises the spans over the whole batch at once (the topology tier, `span_cost`), so one job's rack does not
strand the next.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

from .problem import NO_DOMAIN, GangRow, GangSet, Problem

if TYPE_CHECKING:
    from .greedy import GreedyState

Region = tuple[tuple[int, int], ...]  # (partition, domain) pairs a node must all be in; () is anywhere


def regions(problem: Problem, gang: GangRow, state: GreedyState | None = None,
            enough: int | None = None, outer: Region = ()) -> list[Region]:
    """Where to try the whole gang, in order: the domains of its tightest preferred level, then of the coarser ones,
    then those of its required level (or anywhere), each inside one required domain. With `state`, a region whose
    room cannot hold `enough` members (the gang's quorum unless said) is left out, and the tighter levels' domains
    go smallest room first (best fit: the big domains stay for the big jobs). `outer`: a region every one lies in
    (a CompositePodGroup's domain)."""
    if not gang.prefer:
        return _required_regions(problem, gang, outer)
    nodes = _nodes(problem, gang, outer)
    required = {n: outer + r for n, r in _required(problem, gang, nodes).items()}
    room = _room(problem, gang, state, nodes)
    enough = gang.need if enough is None else enough
    out: list[Region] = []
    for p in [lv.partition for lv in reversed(gang.prefer)]:
        part = problem.partitions[p]
        found: dict[Region, int] = defaultdict(int)
        for n in nodes:
            if part[n] != NO_DOMAIN and n in required:
                found[required[n] + ((p, part[n]),)] += room[n]
        out.extend(r for r in sorted(found, key=lambda r: (found[r], r)) if found[r] >= enough)
    whole: dict[Region, int] = defaultdict(int)
    for n in nodes:
        if n in required:
            whole[required[n]] += room[n]
    out.extend(r for r in sorted(whole) if whole[r] >= enough)
    return out


def _reached(problem: Problem, classes: Iterable[int], outer: Region = ()) -> set[int]:
    """The nodes some of `classes` may take, inside `outer`."""
    nodes = {n for c in classes for n in problem.classes[c].candidates}
    for p, d in outer:
        part = problem.partitions[p]
        nodes = {n for n in nodes if part[n] == d}
    return nodes


def _nodes(problem: Problem, gang: GangRow, outer: Region) -> list[int]:
    return sorted(_reached(problem, gang.classes, outer))


def _domains(problem: Problem, classes: Iterable[int], partition: int, allowed: frozenset[int] | None,
             outer: Region = ()) -> list[int]:
    """The domains of `partition` that `classes` reach inside `outer`, in order (only `allowed` ones, if given:
    where bound members are)."""
    part = problem.partitions[partition]
    found = {part[n] for n in _reached(problem, classes, outer)}
    found.discard(NO_DOMAIN)
    return sorted(found if allowed is None else found & allowed)


def _required_regions(problem: Problem, gang: GangRow, outer: Region) -> list[Region]:
    """A gang without preferred levels: each domain of its required level its members reach (where bound members
    are, if any), in order; or anywhere. Nothing weighed per node: most gangs are these, thousands a batch (2,250
    gangs of 4 on 5,000 nodes: 1.5 s of starting plans, not 12)."""
    if gang.partition is None:
        return [outer]
    return [(*outer, (gang.partition, d)) for d in _domains(problem, gang.classes, gang.partition, gang.domains, outer)]


def _room(problem: Problem, gang: GangRow, state: GreedyState | None, nodes: list[int]) -> dict[int, int]:
    """Per node, at most how many members fit on it now (each class's alone, summed: members of classes that ask
    for different resources share a node; unbounded without a state)."""
    if state is None or not nodes:
        return dict.fromkeys(nodes, 1 << 20)
    free = np.asarray([state.free[n] for n in nodes]).reshape(len(nodes), -1)
    room = np.zeros(len(nodes))
    for c in gang.classes:
        demand = np.asarray(problem.classes[c].demand[:free.shape[1]])
        asked = demand > 0
        room += np.maximum(0, (free[:, asked] // demand[asked]).min(axis=1)) if asked.any() else 1 << 20
    return dict(zip(nodes, room.astype(np.int64).tolist()))


def set_regions(problem: Problem, gang_set: GangSet) -> list[Region]:
    """Where to try a set of gangs together: each domain of its partition its members can reach, or anywhere."""
    if gang_set.partition is None:
        return [()]
    classes = [c for g in gang_set.gangs for c in problem.gangs[g].classes]
    return [((gang_set.partition, d),) for d in _domains(problem, classes, gang_set.partition, gang_set.domains)]


def _required(problem: Problem, gang: GangRow, nodes: list[int]) -> dict[int, Region]:
    """Node -> the required region it lies in (absent: a node in no domain, or outside the bound members')."""
    if gang.partition is None:
        return dict.fromkeys(nodes, ())
    part = problem.partitions[gang.partition]
    return {n: ((gang.partition, part[n]),) for n in nodes
            if part[n] != NO_DOMAIN and (gang.domains is None or part[n] in gang.domains)}


def fit_by_region(state: GreedyState, problem: Problem, gang: GangRow, regions: list[Region]) -> list[int]:
    """For each of `regions`, how many of the gang's pending members fit there one at a time (`fill_gang`);
    `state` is left as it was."""
    out = []
    for region in regions:
        mark = len(state.log)
        out.append(fill_gang(state, problem, gang, region))
        state.undo_to(mark)
    return out


def fill_gang(state: GreedyState, problem: Problem, gang: GangRow, region: Region) -> int:
    """Place what fits of the gang's members inside `region`; with a per-domain minimum or preferred levels, domain
    by domain, the largest first (fewest domains), taking back a domain's members when fewer than the minimum fit."""
    chunk = gang.least.partition if gang.least else (gang.prefer[0].partition if gang.prefer else None)
    if chunk is None:
        return sum(state.fill(m, problem.classes[m].count, region or None) for m in gang.classes)
    left = {m: problem.classes[m].count for m in gang.classes}
    placed = 0
    for d in _largest_first(state, problem, gang, region, chunk):
        mark = len(state.log)
        here = 0
        for m in gang.classes:
            k = state.fill(m, left[m], region + ((chunk, d),))
            left[m] -= k
            here += k
        if gang.least and here > 0 and here + gang.least.bound_in(d) < gang.least.count:
            for c, _ in state.log[mark:]:
                left[c] += 1
            state.undo_to(mark)
            here = 0
        placed += here
        if not any(left.values()):
            return placed
    if gang.least is None:  # preferred levels only: nodes in none of their domains still take the rest
        placed += sum(state.fill(m, left[m], region or None) for m in gang.classes)
    return placed


def _largest_first(state: GreedyState, problem: Problem, gang: GangRow, region: Region, chunk: int) -> list[int]:
    """The domains of partition `chunk` inside `region` by the gang's first member's room there, most first (ties:
    lowest id), each domain's room counted once per the first preferred level's domain it sits in, so that a
    coarse domain with room is filled before the next one."""
    part = problem.partitions[chunk]
    first = problem.classes[gang.classes[0]]
    coarse = problem.partitions[gang.prefer[0].partition] if gang.prefer else part
    room: dict[int, int] = defaultdict(int)
    coarse_room: dict[int, int] = defaultdict(int)
    outer: dict[int, int] = {}
    for n in first.candidates:
        if part[n] == NO_DOMAIN or any(problem.partitions[p][n] != d for p, d in region):
            continue
        k = _fits(state.free[n], first.demand)
        room[part[n]] += k
        coarse_room[coarse[n]] += k
        outer.setdefault(part[n], coarse[n])
    return sorted(room, key=lambda d: (-coarse_room[outer[d]], outer[d], -room[d], d))


def _fits(free: list[int], demand) -> int:
    """Pods of `demand` that fit in `free` (a large number when it asks for nothing)."""
    counts = [f // q for f, q in zip(free, demand) if q > 0]
    return max(0, min(counts)) if counts else 1 << 20


def span_weights(problem: Problem, gang: GangRow) -> tuple[int, ...]:
    """Per preferred level, what one more domain of it costs: lexicographic, the first level first (one more rack
    outweighs any number of extra nodes)."""
    members = sum(problem.classes[c].count for c in gang.classes)
    weights = [1] * len(gang.prefer)
    for i in range(len(gang.prefer) - 2, -1, -1):
        finer = gang.prefer[i + 1].partition
        domains = len({d for d in problem.partitions[finer] if d != NO_DOMAIN})
        weights[i] = weights[i + 1] * (min(members, domains) + 1)
    return tuple(weights)


def span_cost(problem: Problem, placed: dict[tuple[int, int], int]) -> int:
    """The topology tier of a placement (to minimise): per gang and preferred level, its weight times the new
    domains the gang's members occupy, counted exactly as the CP-SAT model counts them."""
    cost = 0
    for gang in problem.gangs:
        if not gang.prefer:
            continue
        members = set(gang.classes)
        nodes = {n for (c, n), k in placed.items() if k and c in members}
        for level, w in zip(gang.prefer, span_weights(problem, gang)):
            part = problem.partitions[level.partition]
            cost += w * len({part[n] for n in nodes if part[n] != NO_DOMAIN} - level.held)
    return cost


def span_floor(problem: Problem, placed: dict[tuple[int, int], int]) -> int:
    """No plan that starts the same gangs costs less: each started gang occupies at least one domain of every
    preferred level where no bound member holds one already."""
    started = {problem.classes[c].gang for (c, _), k in placed.items() if k}
    floor = 0
    for g, gang in enumerate(problem.gangs):
        if g in started and gang.prefer:
            floor += sum(w for level, w in zip(gang.prefer, span_weights(problem, gang)) if not level.held)
    return floor


def least_violations(problem: Problem, placed: dict[tuple[int, int], int]) -> list[str]:
    """Domains where a gang's placed members, with its bound ones, fall short of its per-domain minimum (a check of
    any plan: empty when it holds)."""
    out = []
    for g, gang in enumerate(problem.gangs):
        if gang.least is None:
            continue
        part = problem.partitions[gang.least.partition]
        count: dict[int, int] = defaultdict(int)
        for (c, n), k in placed.items():
            if k and c in gang.classes:
                count[part[n]] += k
        out += [f"gang {g}: {k} + {gang.least.bound_in(d)} bound member(s) in domain {d}, fewer than "
                f"{gang.least.count}" for d, k in sorted(count.items()) if k + gang.least.bound_in(d) < gang.least.count]
    return out
