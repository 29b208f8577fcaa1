"""A kube-scheduler-like baseline: one pod at a time, in queue order, on the best-scoring node.

Queue by priority, then creation time; Filter (every hard constraint on the state so far), then score
(LeastAllocated plus the class's own node score); place, update, next. Gangs go as Coscheduling does them:
when a gang's first pod comes up its members are placed one by one, and rolled back unless the quorum is
reached. A pod (or gang) that some node blocks only for now — its affinity's support comes later in the
queue, or it would tip another pod's spread until the counts even out — waits and is tried again once pods
have landed, as kube-scheduler moves it back to its queue when a pod is added (`greedy.requeue`). The engine
starts from this plan too, so it never places fewer pods than a one-at-a-time scheduler working on the same
filters.
"""

from __future__ import annotations

import heapq
from collections import defaultdict

from .greedy import GreedyState, Stop, attempt_gang, requeue, unit_of
from .problem import Problem

LEAST_ALLOCATED_MAX = 100


class _Scorer:
    """LeastAllocated (kube-scheduler's default: mean free share of cpu and memory after placing),
    plus the class's own soft node score; scores of a node change only when a pod lands on it."""

    def __init__(self, problem: Problem, state: GreedyState):
        self.p = problem
        self.state = state
        scored = [r for r, name in enumerate(problem.resources) if name in ("cpu", "memory")]
        self.resources = scored or list(range(len(problem.resources)))
        self.static = [dict(zip(c.candidates, c.scores)) if c.scores else {} for c in problem.classes]

    def __call__(self, c: int, n: int) -> float:
        demand = self.p.classes[c].demand
        free = self.state.free[n]
        capacity = self.p.capacity[n] if self.p.capacity else self.p.free[n]
        shares = [(free[r] - demand[r]) / capacity[r] for r in self.resources if capacity[r] > 0]
        least = LEAST_ALLOCATED_MAX * sum(shares) / len(shares) if shares else 0.0
        return least + self.static[c].get(n, 0)


class _Queue:
    """Per class, candidate nodes by score, recomputed lazily when a node's load changed."""

    def __init__(self, problem: Problem, state: GreedyState):
        self.p = problem
        self.state = state
        self.score = _Scorer(problem, state)
        self.version: dict[int, int] = defaultdict(int)
        self.heaps: dict[int, list[tuple[float, int, int]]] = {}
        self.dead: dict[int, set[int]] = defaultdict(set)

    def _heap(self, c: int) -> list[tuple[float, int, int]]:
        if c not in self.heaps:
            heap = [(-self.score(c, n), n, self.version[n]) for n in self.p.classes[c].candidates]
            heapq.heapify(heap)
            self.heaps[c] = heap
        return self.heaps[c]

    def best(self, c: int) -> int | None:
        """The best-scoring node that takes one more pod of c now, or None."""
        heap, aside, chosen = self._heap(c), [], None
        while heap:
            entry = heapq.heappop(heap)
            _, n, seen = entry
            if seen != self.version[n]:
                heapq.heappush(heap, (-self.score(c, n), n, self.version[n]))
                continue
            if self.state.permanently_blocked(c, n):
                continue  # dropped for good: capacity, ports and separations only get worse
            aside.append(entry)
            if not self.state.currently_blocked(c, n):
                chosen = n
                break
        for entry in aside:
            heapq.heappush(heap, entry)
        return chosen

    def waits(self, c: int) -> bool:
        """After `best(c)` found nothing: some node blocked c only for now (those are the nodes left in its heap;
        the ones blocked for good were dropped)."""
        return bool(self.heaps.get(c))

    def place(self, c: int, n: int) -> None:
        self.state.place(c, n)
        self.version[n] += 1

    def moved(self, mark: int) -> None:
        """The nodes of the placements after `mark` in the state's log changed (before they are undone)."""
        for _, n in self.state.log[mark:]:
            self.version[n] += 1


def _units(problem: Problem) -> list[tuple[int, int | None]]:
    """The queue as units: (class, None) for each pod, in its place; (class, gang) once per gang, at its first
    pod's place."""
    entries: list[tuple[int, int]] = []
    for c, cls in enumerate(problem.classes):
        positions = cls.queue or tuple(range(cls.count))
        entries.extend((q, c) for q in positions[: cls.count])
    units: list[tuple[int, int | None]] = []
    gangs: set[tuple[str, int]] = set()
    for _, c in sorted(entries):
        gang = problem.classes[c].gang
        unit = None if gang is None else unit_of(problem, gang)
        if unit is None or unit not in gangs:
            units.append((c, gang))
        if unit is not None:
            gangs.add(unit)
    return units


def _gang(problem: Problem, queue: _Queue, g: int) -> tuple[int, bool]:
    """A gang as Coscheduling places it: its members one by one, rolled back unless the quorum is reached (one
    domain for the whole gang: the greedy's search); pods placed, and whether a gang that did not start waits."""
    state, gang = queue.state, problem.gangs[g]
    mark = len(state.log)
    if gang.partition is not None or gang.prefer or gang.least or gang.in_set is not None:
        placed, waits = attempt_gang(state, problem, gang)
        queue.moved(mark)
        return placed, waits
    for m in gang.classes:
        for _ in range(problem.classes[m].count):
            if state.stop():  # stopped mid-gang: too few placed, taken back below
                break
            n = queue.best(m)
            if n is not None:
                queue.place(m, n)
    if len(state.log) - mark >= gang.need:
        return len(state.log) - mark, False
    queue.moved(mark)
    state.undo_to(mark)
    return 0, any(state.waits(m) for m in gang.classes)


def sequential(problem: Problem, stop: Stop | None = None) -> dict[tuple[int, int], int]:
    """The one-at-a-time plan (complete gangs only); once `stop()` says the time is up, the pods placed so far."""
    state = GreedyState(problem, stop)
    queue = _Queue(problem, state)

    def attempt(unit: tuple[int, int | None]) -> tuple[int, bool]:
        c, gang = unit
        if gang is not None:
            return _gang(problem, queue, gang)
        n = queue.best(c)
        if n is None:
            return 0, queue.waits(c)
        queue.place(c, n)
        return 1, False

    requeue(_units(problem), attempt, state.stop)
    out: dict[tuple[int, int], int] = defaultdict(int)
    for c, n in state.log:
        out[(c, n)] += 1
    return dict(out)
