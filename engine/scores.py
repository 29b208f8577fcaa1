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
    """Per-pod soft score of each candidate: preferred node affinity, PreferNoSchedule taints, and
    preferred pod (anti-)affinity towards bound pods."""
    soft_rules = [c for c in info.constraints if isinstance(c, NodeRule) and c.weight is not None]
    proximity = []
    for c in info.constraints:
        if isinstance(c, PodProximity) and c.weight is not None:
            domains = bound.domains_with(c.term)
            if domains:
                proximity.append((c.term.topology_key, domains, -c.weight if c.anti else c.weight))
    tolerations = info.facts.tolerations
    costs = [c for c in info.constraints if isinstance(c, (NodeScore, PodCost))]
    soft_tainted = bound.soft_tainted
    if not soft_rules and not proximity and not costs and not (soft_tainted and any(i in soft_tainted for i in candidates)):
        return ()
    preferred = [(bound.matching_nodes(r.predicate), r.weight) for r in soft_rules]  # cached per rule
    scores = []
    for i in candidates:
        node = nodes[i]
        s = sum(w for members, w in preferred if i in members)
        if i in soft_tainted:
            s -= PREFER_NO_SCHEDULE_PENALTY * sum(
                1 for t in node.taints if t.effect == "PreferNoSchedule" and not tolerated(tolerations, t)
            )
        s += sum(w for key, domains, w in proximity if node.labels.get(key) in domains)
        scores.append(s)
    candidate_nodes = [nodes[i] for i in candidates]
    for cost in costs:
        if isinstance(cost, NodeScore):
            values = [_number(n.attribute(cost.attr, cost.key)) for n in candidate_nodes]
        else:
            values = [_request_cost(info.facts.requests, cost, n) for n in candidate_nodes]
        for k, penalty in enumerate(_cost_penalties(values, cost.weight)):
            scores[k] -= penalty
    return tuple(scores)


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
