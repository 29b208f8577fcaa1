"""Cost and packing preferences (ours, from policies): `minimize node <attribute>`, `minimize cost` of the
requests at per-node prices, and `pack` / `spread` nodes (a cost or a reward per empty node the batch opens).
Soft only: they order equally good plans and never cost a pod its place."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

import numpy as np

from ..model.ir import NodeOpening, NodeScore, PodCost
from ..model.reasons import Code
from .base import Emit, Score, ScorePart

if TYPE_CHECKING:
    from ..model.view import View
    from ..planning.classes import ClassInfo
    from .context import Batch, ProblemBuilder

UNIT = {"cpu": 1000, "memory": 2**30, "ephemeral-storage": 2**30}  # model units per priced unit


class CostPreferences(Score, Emit):
    name, code = "CostPreferences", Code.POLICY

    def score(self, info: ClassInfo, candidates: np.ndarray, batch: Batch) -> list[ScorePart]:
        view = batch.view
        parts = []
        for cost in (c for c in info.constraints if isinstance(c, (NodeScore, PodCost))):
            if isinstance(cost, NodeScore):
                values = view.node_numbers(cost.attr, cost.key)[candidates]
                what = f"lowest {cost.attr} {cost.key}"
            else:
                values = _request_costs(info.requests, cost, view)[candidates]
                what = "lowest cost of the requests"
            parts.append(ScorePart(f"{what} [{cost.source}]", -_cost_penalties(values, cost.weight)))
        return parts

    def emit(self, build: ProblemBuilder) -> None:
        """Pack / spread nodes: classes grouped by their cost per empty node opened."""
        build.problem.empty = frozenset(np.flatnonzero(build.view.empty()).tolist())
        by_cost: dict[int, list[int]] = defaultdict(list)
        for a, info in enumerate(build.classes):
            for cost in {c.weight for c in info.constraints if isinstance(c, NodeOpening)}:
                by_cost[cost].append(a)
        build.problem.openings = [(tuple(members), cost) for cost, members in sorted(by_cost.items())]


def _request_costs(requests: dict[str, int], cost: PodCost, view: View) -> np.ndarray:
    """Per node, what the pod's requests cost at its per-unit prices (nan: a price is missing)."""
    total = np.zeros(len(view.nodes), dtype=np.float64)
    for resource, attr, key in cost.prices:
        amount = requests.get(resource, 0)
        if not amount:
            continue
        unit = UNIT.get(resource, 2**30 if resource.startswith("hugepages-") else 1)
        total += amount / unit * view.node_numbers(attr, key)  # nan stays nan: the price is missing
    return total


def _cost_penalties(values: np.ndarray, weight: int) -> np.ndarray:
    """0 for the cheapest node, `weight` for the dearest (and for nodes without a finite numeric value)."""
    known = np.isfinite(values)
    if not known.any():
        return np.zeros(len(values), dtype=np.int64)
    lo, hi = values[known].min(), values[known].max()
    span = hi - lo
    scaled = np.round(weight * (values - lo) / span) if span else np.zeros(len(values))
    return np.where(known, scaled, weight).astype(np.int64)


KIND = CostPreferences()
