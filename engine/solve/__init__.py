"""Solve a placement problem: greedy warm start, then CP-SAT in two lexicographic tiers.

Tier 1 maximises pods placed (weighted by priority, gangs all-or-nothing); tier 2, with tier 1 fixed at
its best value, maximises soft preferences. The greedy plan is always kept as the fallback, so a plan
exists whatever the time limit.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from .cpsat import ClassModel
from .greedy import greedy
from .problem import Colocation, Gang, PodClass, Problem, Separation, Solution, Spread

__all__ = ["solve", "Problem", "PodClass", "Gang", "Separation", "Colocation", "Spread", "Solution"]

Progress = Callable[[str], None]


def _value(problem: Problem, placed: dict[tuple[int, int], int]) -> int:
    return sum(problem.classes[c].weight * k for (c, _), k in placed.items())


def solve(
    problem: Problem,
    time_limit: float = 10.0,
    workers: int = 2,
    seed: int = 0,
    progress: Progress | None = None,
) -> Solution:
    say = progress or (lambda _msg: None)
    start = time.perf_counter()
    bound = problem.upper_bound()
    best = greedy(problem)
    value = _value(problem, best)
    if value < bound:
        other = greedy(problem, largest_first=False)
        other_value = _value(problem, other)
        if other_value > value:
            best, value = other, other_value
    pods = sum(c.count for c in problem.classes)
    say(f"greedy placed {sum(best.values())}/{pods} pods in {time.perf_counter() - start:.2f}s")
    soft = problem.has_soft_terms()
    if value == bound and not soft:
        return Solution(best, "OPTIMAL", value, 0, bound, time.perf_counter() - start)
    if value == bound and problem.score_only():
        # every pod placed on its best-scoring candidate is optimal in both tiers
        score = problem.score(best)
        if score == problem.score_bound():
            return Solution(best, "OPTIMAL", value, score, bound, time.perf_counter() - start)

    model = ClassModel(problem)
    say(f"CP-SAT model: {len(model.y)} variables over {len(problem.classes)} pod classes")
    status = "OPTIMAL" if value == bound else "FEASIBLE"
    tier1 = model.tier1()
    if value < bound:
        model.hint(best)
        left = time_limit - (time.perf_counter() - start)
        budget = left * (0.6 if soft else 1.0)
        report = lambda v, b: say(f"placement: value {v:.0f}, bound {b:.0f}")  # noqa: E731
        st, placed, v, b = model.solve_tier(tier1, budget, workers, seed, report)
        if st in ("OPTIMAL", "FEASIBLE") and v >= value:
            best, value, status = placed, v, st
            bound = v if st == "OPTIMAL" else min(bound, b)
        elif st in ("OPTIMAL", "FEASIBLE"):
            bound = min(bound, b)
        elif st == "INFEASIBLE":  # cannot happen with a correct model: the greedy plan is feasible
            return Solution(best, "GREEDY", value, 0, bound, time.perf_counter() - start,
                            ["CP-SAT reported the model infeasible; kept the greedy plan"])
        if status == "FEASIBLE" and bound == value:
            status = "OPTIMAL"

    soft_value = 0
    if soft:
        model.fix_at_least(tier1, value)
        model.hint(best)
        left = max(0.1, time_limit - (time.perf_counter() - start))
        report = lambda v, b: say(f"preferences: score {v:.0f}, bound {b:.0f}")  # noqa: E731
        st, placed, v, _ = model.solve_tier(model.tier2(), left, workers, seed, report)
        if st in ("OPTIMAL", "FEASIBLE"):
            best, soft_value = placed, v
            if st == "FEASIBLE" and status == "OPTIMAL":
                status = "FEASIBLE"  # placement optimal, preferences within the time limit
    return Solution(best, status, value, soft_value, bound, time.perf_counter() - start)
