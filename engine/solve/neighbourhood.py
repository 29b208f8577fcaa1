"""Smaller models for big problems: each class keeps its current nodes plus a window of k others.

A CP-SAT model over every (class, candidate node) pair grows with classes × nodes, far past what a time
limit of seconds can build. Restricting candidates keeps every constraint exact (the model only loses
options), keeps the current plan feasible (its nodes stay), and bounds the model by k per class. Windows
move from round to round (large-neighbourhood search), so repeated rounds see different nodes.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from dataclasses import replace

from .problem import PodClass, Problem


def per_pair(problem: Problem) -> int:
    """Model variables per (class, candidate node) pair, roughly: pairwise terms add presence variables."""
    return 2 if problem.separations or problem.colocations or problem.spreads or problem.limits else 1


def model_size(problem: Problem) -> int:
    """Variables a full model needs, roughly."""
    return per_pair(problem) * sum(len(c.candidates) for c in problem.classes)


def room_order(problem: Problem) -> list[int]:
    """Nodes by free room, most first (the sum of free shares of the largest free amount per resource):
    where a class left out by the current plan is likeliest to fit after some moves."""
    biggest = [max((f[r] for f in problem.free), default=0) or 1 for r in range(len(problem.resources))]
    return sorted(range(len(problem.free)), key=lambda n: -sum(f / b for f, b in zip(problem.free[n], biggest)))


def restrict(problem: Problem, placed: dict[tuple[int, int], int], k: int, round_: int,
             order: list[int]) -> Problem:
    """The problem with each class's candidates cut to its nodes in `placed` plus k more: the best by
    score, or the roomiest, starting `round_ * k` further down the list each round."""
    used: dict[int, set[int]] = defaultdict(set)
    for (c, n), count in placed.items():
        if count:
            used[c].add(n)
    position = {n: i for i, n in enumerate(order)}
    classes = [_cut(cls, used[c], k, round_, position) for c, cls in enumerate(problem.classes)]
    return replace(problem, classes=classes)


def _cut(cls: PodClass, keep: set[int], k: int, round_: int, position: dict[int, int]) -> PodClass:
    if len(cls.candidates) <= len(keep) + k:
        return cls
    if cls.scores:
        score = dict(zip(cls.candidates, cls.scores))
        ranked = sorted(cls.candidates, key=lambda n: (-score[n], position[n]))
    else:
        ranked = heapq.nsmallest(min(len(cls.candidates), k * (round_ + 1)), cls.candidates, key=position.__getitem__)
    offset = (round_ * k) % max(1, len(ranked))
    window = (ranked[offset:] + ranked[:offset])[:k]
    chosen = sorted(keep | set(window))
    if not cls.scores:
        return replace(cls, candidates=tuple(chosen))
    return replace(cls, candidates=tuple(chosen), scores=tuple(score[n] for n in chosen))
