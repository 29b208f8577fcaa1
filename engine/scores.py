"""Soft node scores: what one pod of a class gains or loses on each candidate node.

Preferred node affinity (and policy prefer/avoid), untolerated PreferNoSchedule taints, preferred pod
(anti-)affinity towards bound pods, and node prices; per pod, so the solver multiplies by pods placed.
"""

from __future__ import annotations

from .classes import ClassInfo
from .index import BoundState
from .ir import NodeRule, NodeScore, PodCost, PodProximity
from .model import Node, tolerated

PREFER_NO_SCHEDULE_PENALTY = 50  # per untolerated PreferNoSchedule taint, on the 1..100 preference scale


def node_scores(info: ClassInfo, candidates: tuple[int, ...], nodes: list[Node], bound: BoundState) -> tuple[int, ...]:
    """Per-pod soft score of each candidate (the sum of `score_parts`); () when nothing scores."""
    parts = score_parts(info, candidates, nodes, bound)
    if not parts:
        return ()
    return tuple(sum(values) for values in zip(*(values for _, values in parts)))


def score_parts(info: ClassInfo, candidates: tuple[int, ...], nodes: list[Node],
                bound: BoundState) -> list[tuple[str, list[int]]]:
    """Each soft term in words with its points on every candidate: preferred node affinity (and policy
    prefer/avoid), untolerated PreferNoSchedule taints, preferred pod (anti-)affinity towards bound pods,
    and node prices. Kept apart so `explain` can say why a node won."""
    parts: list[tuple[str, list[int]]] = []
    for rule in (c for c in info.constraints if isinstance(c, NodeRule) and c.weight is not None):
        members = bound.matching_nodes(rule.predicate)  # cached per rule
        what = rule.reason if rule.source.policy else "preferred node affinity"  # a pod's reason reads as a rejection
        parts.append((f"{what} [{rule.source}]", [rule.weight if i in members else 0 for i in candidates]))
    soft_tainted = bound.soft_tainted
    if soft_tainted and any(i in soft_tainted for i in candidates):
        tolerations = info.facts.tolerations
        parts.append(("untolerated PreferNoSchedule taint(s)", [
            -PREFER_NO_SCHEDULE_PENALTY * sum(1 for t in nodes[i].taints
                                              if t.effect == "PreferNoSchedule" and not tolerated(tolerations, t))
            if i in soft_tainted else 0 for i in candidates]))
    for c in info.constraints:
        if isinstance(c, PodProximity) and c.weight is not None and (domains := bound.domains_with(c.term)):
            kind = "anti-affinity" if c.anti else "affinity"
            points = -c.weight if c.anti else c.weight
            key = c.term.topology_key
            parts.append((f"preferred pod {kind} to running pods {c.term.selector} per {key} [{c.source}]",
                          [points if nodes[i].labels.get(key) in domains else 0 for i in candidates]))
    candidate_nodes = [nodes[i] for i in candidates]
    for cost in (c for c in info.constraints if isinstance(c, (NodeScore, PodCost))):
        if isinstance(cost, NodeScore):
            values = [_number(n.attribute(cost.attr, cost.key)) for n in candidate_nodes]
            what = f"lowest {cost.attr} {cost.key}"
        else:
            values = [_request_cost(info.facts.requests, cost, n) for n in candidate_nodes]
            what = "lowest cost of the requests"
        parts.append((f"{what} [{cost.source}]", [-p for p in _cost_penalties(values, cost.weight)]))
    return [(label, values) for label, values in parts if any(values)]


UNIT = {"cpu": 1000, "memory": 2**30, "ephemeral-storage": 2**30}  # model units per priced unit


def _number(raw: object) -> float | None:
    try:
        return None if raw is None else float(raw)  # type: ignore[arg-type]
    except ValueError:
        return None


def _request_cost(requests: dict[str, int], cost: PodCost, node: Node) -> float | None:
    """What the pod's requests cost on this node at its per-unit prices (None: a price is missing)."""
    total = 0.0
    for resource, attr, key in cost.prices:
        amount = requests.get(resource, 0)
        if not amount:
            continue
        price = _number(node.attribute(attr, key))
        if price is None:
            return None
        unit = UNIT.get(resource, 2**30 if resource.startswith("hugepages-") else 1)
        total += amount / unit * price
    return total


def _cost_penalties(values: list[float | None], weight: int) -> list[int]:
    """0 for the cheapest node, `weight` for the dearest (and for nodes without a numeric value)."""
    known = [v for v in values if v is not None]
    if not known:
        return [0] * len(values)
    lo, hi = min(known), max(known)
    span = hi - lo
    return [weight if v is None else (round(weight * (v - lo) / span) if span else 0) for v in values]
