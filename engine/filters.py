"""Static filters: can a pod of this class go on this node at all, given only the bound pods?

One function per kube-scheduler Filter plugin, in upstream order; a node's rejection is the first
failing filter's reasons (as upstream stops at the first failing plugin). The compiler uses these to
choose candidate nodes; `explain` prints them per node.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from .index import BoundState
from .ir import Constraint, CountLimit, NodeRule, PodProximity, SpreadRule, Tolerations
from .model import (
    HARD_EFFECTS,
    UNSCHEDULABLE_TAINT_KEY,
    HostPort,
    Node,
    Pod,
    PodAffinityTerm,
    Taint,
    Toleration,
    tolerated,
)

ANTI_EXISTING = "node(s) didn't satisfy existing pods anti-affinity rules"
ANTI_OWN = "node(s) didn't match pod anti-affinity rules"
AFFINITY_OWN = "node(s) didn't match pod affinity rules"
SPREAD_LABEL = "node(s) didn't match pod topology spread constraints (missing required label)"
PORTS = "node(s) didn't have free ports for the requested pod ports"
UNSCHEDULABLE = "node(s) were unschedulable"
UNCHECKED = "node(s) not checked: compile reached the time limit before this pod's class"


@dataclass(slots=True)
class ClassFacts:
    """Everything the static filters need to know about one pod class."""

    sample: Pod
    requests: dict[str, int]
    tolerations: tuple[Toleration, ...]
    node_rules: tuple[NodeRule, ...]
    host_ports: tuple[HostPort, ...]
    anti_blocked: dict[str, set[str]]  # topology key -> domains barred by bound pods (either direction)
    anti_own_blocked: dict[tuple[str, str], set[str]]  # (topology key, policy citation or "") -> domains
    affinity_terms: tuple[PodAffinityTerm, ...]
    affinity_ok: list[frozenset[str] | None]  # per required affinity term: allowed domains (None = any with key)
    spread_keys: tuple[str, ...]
    # (topology key, limit, where the rule came from) -> domains already holding the limit
    limit_blocked: dict[tuple[str, int, str], set[str]] = field(default_factory=dict)
    affinity_cites: tuple[str, ...] = ()  # per required affinity term: its policy citation, or ""

    @classmethod
    def of(cls, pod: Pod, constraints: tuple[Constraint, ...], bound: BoundState,
           batch_support: bool) -> "ClassFacts":
        """`batch_support`: pods of the batch may satisfy the class's required affinity, so the static
        filter only asks for the topology labels; otherwise only domains with bound support pass."""
        tolerations: tuple[Toleration, ...] = ()
        for c in constraints:
            if isinstance(c, Tolerations):
                tolerations += c.tolerations
        node_rules = tuple(c for c in constraints if isinstance(c, NodeRule) and c.weight is None)
        hard = [c for c in constraints if isinstance(c, PodProximity) and c.weight is None]
        anti_own: dict[tuple[str, str], set[str]] = defaultdict(set)
        for c in hard:
            if c.anti:
                anti_own[(c.term.topology_key, c.source.cite)] |= bound.domains_with(c.term)
        anti_existing: dict[str, set[str]] = defaultdict(set)
        for term, held in bound.anti_domains():
            if held and term.matches(pod):
                anti_existing[term.topology_key] |= held
        affinity_terms = tuple(c.term for c in hard if not c.anti)
        affinity_cites = tuple(c.source.cite for c in hard if not c.anti)
        affinity_ok = [None if batch_support else bound.domains_matching(affinity_terms, t.topology_key)
                       for t in affinity_terms]
        spread_keys = tuple(c.spread.topology_key for c in constraints if isinstance(c, SpreadRule) and c.spread.hard)
        limit_blocked: dict[tuple[str, int, str], set[str]] = defaultdict(set)
        for c in constraints:
            if isinstance(c, CountLimit):
                me = 1 if c.term.matches(pod) else 0
                full = {v for v, k in bound.domain_counts(c.term).items() if k + me > c.most}
                if full:
                    limit_blocked[(c.term.topology_key, c.most, str(c.source))] |= full
        return cls(pod, pod.requests, tolerations, node_rules, pod.host_ports, dict(anti_existing), dict(anti_own),
                   affinity_terms, affinity_ok, spread_keys, dict(limit_blocked), affinity_cites)

    @classmethod
    def unchecked(cls, pod: Pod, constraints: tuple[Constraint, ...]) -> "ClassFacts":
        """The facts of a class compile had no time to check: what the pod asks for, none of what the bound
        pods hold (every node is rejected as unchecked anyway)."""
        tolerations = tuple(t for c in constraints if isinstance(c, Tolerations) for t in c.tolerations)
        node_rules = tuple(c for c in constraints if isinstance(c, NodeRule) and c.weight is None)
        return cls(pod, pod.requests, tolerations, node_rules, pod.host_ports, {}, {}, (), [], ())


def node_unschedulable(f: ClassFacts, node: Node, i: int, bound: BoundState) -> list[str]:
    taint = Taint(UNSCHEDULABLE_TAINT_KEY, "", "NoSchedule")
    return [UNSCHEDULABLE] if node.unschedulable and not tolerated(f.tolerations, taint) else []


def taint_toleration(f: ClassFacts, node: Node, i: int, bound: BoundState) -> list[str]:
    for taint in node.taints:
        if taint.effect in HARD_EFFECTS and not tolerated(f.tolerations, taint):
            return [f"node(s) had untolerated taint {taint}"]
    return []


def node_affinity(f: ClassFacts, node: Node, i: int, bound: BoundState) -> list[str]:
    for rule in f.node_rules:
        if not rule.predicate.matches(node):
            return [rule.reason + rule.source.cite]
    return []


def node_ports(f: ClassFacts, node: Node, i: int, bound: BoundState) -> list[str]:
    if any(p.conflicts(q) for p in f.host_ports for q in bound.ports[i]):
        return [PORTS]
    return []


def shortages(requests: dict[str, int], free) -> list[str]:
    """Upstream's NodeResourcesFit reasons for the requests that exceed `free(resource)`."""
    return ["Too many pods" if r == "pods" else f"Insufficient {r}" for r, want in requests.items() if want > free(r)]


def resources_fit(f: ClassFacts, node: Node, i: int, bound: BoundState) -> list[str]:
    return shortages(f.requests, lambda r: bound.free(i, r))


def inter_pod_affinity(f: ClassFacts, node: Node, i: int, bound: BoundState) -> list[str]:
    labels = node.labels
    for key, values in f.anti_blocked.items():
        if labels.get(key) in values:
            return [ANTI_EXISTING]
    for (key, cite), values in f.anti_own_blocked.items():
        if labels.get(key) in values:
            return [ANTI_OWN + cite]
    for term, ok, cite in zip(f.affinity_terms, f.affinity_ok, f.affinity_cites or ("",) * len(f.affinity_terms)):
        value = labels.get(term.topology_key)
        if value is None or (ok is not None and value not in ok):
            return [AFFINITY_OWN + cite]
    return []


def count_limit(f: ClassFacts, node: Node, i: int, bound: BoundState) -> list[str]:
    for (key, most, source), full in f.limit_blocked.items():
        if node.labels.get(key) in full:
            return count_limit_reason(key, most, source)
    return []


def count_limit_reason(key: str, most: int, source: str) -> list[str]:
    return [f"node(s) are in a {key} domain that already holds the limit of {most} pod(s) ({source})"]


def topology_spread(f: ClassFacts, node: Node, i: int, bound: BoundState) -> list[str]:
    return [SPREAD_LABEL] if any(k not in node.labels for k in f.spread_keys) else []


FILTERS = (
    ("NodeUnschedulable", node_unschedulable),
    ("TaintToleration", taint_toleration),
    ("NodeAffinity", node_affinity),
    ("NodePorts", node_ports),
    ("NodeResourcesFit", resources_fit),
    ("InterPodAffinity", inter_pod_affinity),
    ("PodTopologySpread", topology_spread),
    ("CountLimit", count_limit),
)


def rejection(f: ClassFacts, i: int, bound: BoundState) -> tuple[str, list[str]] | None:
    """(plugin, reasons) of the first filter that rejects node i, or None if the node passes."""
    node = bound.nodes[i]
    for name, check in FILTERS:
        reasons = check(f, node, i, bound)
        if reasons:
            return name, reasons
    return None


class Rejections:
    """Which nodes a class cannot use, and why: each node's first rejecting (filter, reasons), or none.

    One small integer per node (an index into the distinct reasons) keeps memory at one array per class
    and lets a filter reject thousands of nodes in one numpy operation; the reasons are few.
    """

    def __init__(self, size: int):
        self.size = size
        self.code = np.full(size, -1, dtype=np.int32)  # per node: index into `keys`, -1 while it passes
        self.keys: list[tuple[str, tuple[str, ...]]] = []
        self._known: dict[tuple[str, tuple[str, ...]], int] = {}

    @classmethod
    def unchecked(cls, size: int) -> "Rejections":
        """Every node rejected as not checked: a class compile left out at the time limit."""
        out = cls(size)
        out.add("TimeLimit", [UNCHECKED], np.ones(size, dtype=bool))
        return out

    def add(self, plugin: str, reasons: list[str], nodes) -> None:
        """Reject `nodes` (indices, or a boolean mask over all nodes) for these reasons, unless an earlier
        filter already rejected them."""
        index = _indices(nodes)
        new = index[self.code[index] < 0]
        if not new.size:
            return
        key = (plugin, tuple(reasons))
        if key not in self._known:
            self._known[key] = len(self.keys)
            self.keys.append(key)
        self.code[new] = self._known[key]

    @property
    def groups(self) -> dict[tuple[str, tuple[str, ...]], np.ndarray]:
        """(filter, reasons) -> the nodes it rejected first."""
        return {key: np.flatnonzero(self.code == k) for k, key in enumerate(self.keys)}

    def get(self, i: int) -> tuple[str, list[str]] | None:
        k = int(self.code[i])
        if k < 0:
            return None
        plugin, reasons = self.keys[k]
        return plugin, list(reasons)

    def __contains__(self, i: int) -> bool:
        return bool(self.code[i] >= 0)

    def passing(self) -> tuple[int, ...]:
        return tuple(self.passing_array().tolist())

    def passing_array(self) -> np.ndarray:
        return np.flatnonzero(self.code < 0)

    def reason_counts(self) -> dict[str, int]:
        per_key = np.bincount(self.code[self.code >= 0], minlength=len(self.keys)) if self.keys else []
        counts: dict[str, int] = defaultdict(int)
        for (_, reasons), n in zip(self.keys, per_key):
            for r in reasons:
                counts[r] += int(n)
        return dict(counts)

    def as_dict(self) -> dict[int, tuple[str, list[str]]]:
        return {i: (plugin, list(reasons)) for (plugin, reasons), members in self.groups.items()
                for i in members.tolist()}


def _indices(nodes) -> np.ndarray:
    """Node indices from a boolean mask, an index array or any iterable of indices."""
    if isinstance(nodes, np.ndarray):
        return np.flatnonzero(nodes) if nodes.dtype == bool else nodes
    return np.fromiter(nodes, dtype=np.int64)


def rejections(f: ClassFacts, bound: BoundState) -> Rejections:
    """`rejection` for every node at once, the same answers, without a Python loop per filter per node.

    Each filter only visits the nodes it could reject (tainted, cordoned, outside a cached rule's node
    set, a capacity group that does not fit…); filters run in upstream order and a node keeps the first.
    """
    out = Rejections(len(bound.nodes))
    nodes = bound.nodes

    def visit(name: str, check, indices) -> None:
        found: dict[tuple[str, ...], list[int]] = defaultdict(list)
        for i in indices:
            if i not in out:
                reasons = check(f, nodes[i], i, bound)
                if reasons:
                    found[tuple(reasons)].append(i)
        for reasons, members in found.items():
            out.add(name, list(reasons), members)

    visit("NodeUnschedulable", node_unschedulable, bound.cordoned)
    for taints, members in bound.taint_groups().items():  # nodes with equal taints answer alike
        reasons = taint_toleration(f, nodes[members[0]], members[0], bound)
        if reasons:
            out.add("TaintToleration", reasons, members)
    for rule in f.node_rules:
        out.add("NodeAffinity", [rule.reason + rule.source.cite], ~bound.matching_mask(rule.predicate))
    if f.host_ports:
        visit("NodePorts", node_ports, bound.with_ports)
    for short, members in bound.short_of(f.requests).items():
        out.add("NodeResourcesFit", ["Too many pods" if r == "pods" else f"Insufficient {r}" for r in short], members)
    # label checks select whole groups of nodes; added in each filter's own order, so the first failing
    # check of a node gives its reason, as in the per-node functions above
    for key, values in f.anti_blocked.items():
        out.add("InterPodAffinity", [ANTI_EXISTING], bound.nodes_with(key, values))
    for (key, cite), values in f.anti_own_blocked.items():
        out.add("InterPodAffinity", [ANTI_OWN + cite], bound.nodes_with(key, values))
    for term, ok, cite in zip(f.affinity_terms, f.affinity_ok, f.affinity_cites or ("",) * len(f.affinity_terms)):
        key = term.topology_key
        out.add("InterPodAffinity", [AFFINITY_OWN + cite],
                bound.nodes_with(key, [None]) if ok is None else bound.nodes_outside(key, ok))
    for key in f.spread_keys:
        out.add("PodTopologySpread", [SPREAD_LABEL], bound.nodes_with(key, [None]))
    for (key, most, source), full in f.limit_blocked.items():
        out.add("CountLimit", count_limit_reason(key, most, source), bound.nodes_with(key, full))
    return out
