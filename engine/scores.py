"""Soft node scores: what one pod of a class gains or loses on each candidate node.

Preferred node affinity (and policy prefer/avoid), untolerated PreferNoSchedule taints, preferred pod
(anti-)affinity towards bound pods, and node prices; per pod, so the solver multiplies by pods placed.
"""

from __future__ import annotations

import numpy as np

from .classes import ClassInfo
from .index import BoundState
from .ir import NodeRule, NodeScore, PodCost, PodProximity
from .model import Node, tolerated

PREFER_NO_SCHEDULE_PENALTY = 50  # per untolerated PreferNoSchedule taint, on the 1..100 preference scale


def node_scores(info: ClassInfo, candidates: np.ndarray, nodes: list[Node], bound: BoundState) -> tuple[int, ...]:
    """Per-pod soft score of each candidate node index (the sum of `score_parts`); () when nothing scores."""
    parts = _score_arrays(info, candidates, nodes, bound)
    if not parts:
        return ()
    return tuple(sum(values for _, values in parts).tolist())


def score_parts(info: ClassInfo, candidates: tuple[int, ...], nodes: list[Node],
                bound: BoundState) -> list[tuple[str, list[int]]]:
    """Each soft term in words with its points on every candidate: preferred node affinity (and policy
    prefer/avoid), untolerated PreferNoSchedule taints, preferred pod (anti-)affinity towards bound pods,
    and node prices. Kept apart so `explain` can say why a node won."""
    parts = _score_arrays(info, np.asarray(candidates, dtype=np.int64), nodes, bound)
    return [(label, values.tolist()) for label, values in parts]


def _score_arrays(info: ClassInfo, candidates: np.ndarray, nodes: list[Node],
                  bound: BoundState) -> list[tuple[str, np.ndarray]]:
    """`score_parts` as numpy arrays over the candidates: each term is a few array operations on the
    cluster index's per-node columns, not a Python loop over nodes per class."""
    parts: list[tuple[str, np.ndarray]] = []
    for rule in (c for c in info.constraints if isinstance(c, NodeRule) and c.weight is not None):
        members = bound.matching_mask(rule.predicate)[candidates]  # cached per rule
        what = rule.reason if rule.source.policy else "preferred node affinity"  # a pod's reason reads as a rejection
        parts.append((f"{what} [{rule.source}]", np.where(members, rule.weight, 0)))
    if bound.soft_tainted:
        penalty = _prefer_no_schedule(info, bound)[candidates]
        parts.append(("untolerated PreferNoSchedule taint(s)", penalty))
    for c in info.constraints:
        if isinstance(c, PodProximity) and c.weight is not None and (domains := bound.domains_with(c.term)):
            kind = "anti-affinity" if c.anti else "affinity"
            points = -c.weight if c.anti else c.weight
            key = c.term.topology_key
            parts.append((f"preferred pod {kind} to running pods {c.term.selector} per {key} [{c.source}]",
                          np.where(bound.label(key).mask(domains)[candidates], points, 0)))
    for cost in (c for c in info.constraints if isinstance(c, (NodeScore, PodCost))):
        if isinstance(cost, NodeScore):
            values = bound.node_numbers(cost.attr, cost.key)[candidates]
            what = f"lowest {cost.attr} {cost.key}"
        else:
            values = _request_costs(info.facts.requests, cost, bound)[candidates]
            what = "lowest cost of the requests"
        parts.append((f"{what} [{cost.source}]", -_cost_penalties(values, cost.weight)))
    return [(label, np.asarray(values, dtype=np.int64)) for label, values in parts if values.any()]


def _prefer_no_schedule(info: ClassInfo, bound: BoundState) -> np.ndarray:
    """Per node: the penalty of its PreferNoSchedule taints the class does not tolerate (one check per
    distinct taint set)."""
    out = np.zeros(len(bound.nodes), dtype=np.int64)
    tolerations = info.facts.tolerations
    for taints, members in bound.taint_groups().items():
        untolerated = sum(1 for t in taints if t.effect == "PreferNoSchedule" and not tolerated(tolerations, t))
        if untolerated:
            out[members] = -PREFER_NO_SCHEDULE_PENALTY * untolerated
    return out


UNIT = {"cpu": 1000, "memory": 2**30, "ephemeral-storage": 2**30}  # model units per priced unit


def _request_costs(requests: dict[str, int], cost: PodCost, bound: BoundState) -> np.ndarray:
    """Per node, what the pod's requests cost at its per-unit prices (nan: a price is missing)."""
    total = np.zeros(len(bound.nodes), dtype=np.float64)
    for resource, attr, key in cost.prices:
        amount = requests.get(resource, 0)
        if not amount:
            continue
        unit = UNIT.get(resource, 2**30 if resource.startswith("hugepages-") else 1)
        total += amount / unit * bound.node_numbers(attr, key)  # nan stays nan: the price is missing
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
