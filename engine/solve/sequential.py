"""A kube-scheduler-like baseline: one pod at a time, in queue order, on the best-scoring node.

Queue by priority, then creation time; Filter (every hard constraint on the state so far), then score
(LeastAllocated plus the class's own node score); place, update, next. Gangs go as Coscheduling does them:
when a gang's first pod comes up its members are placed one by one, and rolled back unless the quorum is
reached. The engine starts from this plan too, so it never places fewer pods than a one-at-a-time
scheduler working on the same filters.
"""

from __future__ import annotations

import heapq
from collections import defaultdict

from .greedy import GreedyState, Stop, place_gang
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

    def place(self, c: int, n: int) -> None:
        self.state.place(c, n)
        self.version[n] += 1


def _pod_queue(problem: Problem) -> list[int]:
    """Classes in pod order: one entry per pod, by its queue position."""
    entries: list[tuple[int, int]] = []
    for c, cls in enumerate(problem.classes):
        positions = cls.queue or tuple(range(cls.count))
        entries.extend((q, c) for q in positions[: cls.count])
    return [c for _, c in sorted(entries)]


def sequential(problem: Problem, stop: Stop | None = None) -> dict[tuple[int, int], int]:
    """The one-at-a-time plan (complete gangs only); once `stop()` says the time is up, the pods placed so far."""
    state = GreedyState(problem, stop)
    queue = _Queue(problem, state)
    left = [cls.count for cls in problem.classes]
    for c in _pod_queue(problem):
        if state.stop():
            break
        gang = problem.classes[c].gang
        if left[c] == 0:
            continue
        if gang is None:
            left[c] -= 1
            n = queue.best(c)
            if n is not None:
                queue.place(c, n)
            continue
        members = problem.gangs[gang].classes
        mark, placed = len(state.log), 0
        if problem.gangs[gang].partition is not None:  # one domain for the whole gang: the greedy's search
            place_gang(state, problem, problem.gangs[gang])
            for m in members:
                left[m] = 0
            for _, n in state.log[mark:]:
                queue.version[n] += 1
            continue
        for m in members:
            while left[m] and not state.stop():  # stopped mid-gang: too few placed, taken back below
                left[m] -= 1
                n = queue.best(m)
                if n is not None:
                    queue.place(m, n)
                    placed += 1
        if placed < problem.gangs[gang].need:
            for _, n in state.log[mark:]:
                queue.version[n] += 1
            state.undo_to(mark)
    out: dict[tuple[int, int], int] = defaultdict(int)
    for c, n in state.log:
        out[(c, n)] += 1
    return dict(out)
