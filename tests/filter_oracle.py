"""The static filters node by node, written plainly: a test oracle for the bulk filters of engine.kinds.

One function per kube-scheduler Filter plugin, in upstream order, each asking one node about one pod class;
a node's rejection is the first failing filter's. The bulk filters answer for every node at once with numpy
and caches; they must give exactly these answers (tests/test_filters.py). Reason texts come from the kinds
(written once there), so this checks which nodes are rejected and by whom, not the spelling.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from engine.kinds import count_limit, gangs, node_affinity, pod_affinity, ports, resources, spread, taints, unschedulable
from engine.kinds.gangs import GangInfo
from engine.model.cluster import HARD_EFFECTS, Cluster, Node, Pod, PodAffinityTerm, Toleration, tolerated
from engine.model.ir import Constraint, CountLimit, NodeRule, PodProximity, Source, SpreadRule, Tolerations
from engine.model.rejections import Rejection
from engine.model.view import View


@dataclass(slots=True)
class ClassFacts:
    """Everything the per-node filters need to know about one pod class."""

    sample: Pod
    tolerations: tuple[Toleration, ...]
    node_rules: tuple[NodeRule, ...]
    anti_blocked: dict[str, set[str]]  # topology key -> domains barred by existing pods' anti-affinity
    anti_own_blocked: dict[tuple[str, Source | None], set[str]]  # (key, policy rule or None) -> domains
    affinity: list[tuple[PodAffinityTerm, frozenset[str] | None, Source]]  # term, allowed domains (None: any), rule
    spread_keys: tuple[str, ...]
    limit_blocked: dict[tuple[str, int, Source], set[str]]

    @classmethod
    def of(cls, pod: Pod, constraints: tuple[Constraint, ...], bound: View, batch_support: bool) -> ClassFacts:
        tolerations = tuple(t for c in constraints if isinstance(c, Tolerations) for t in c.tolerations)
        node_rules = tuple(c for c in constraints if isinstance(c, NodeRule) and c.weight is None)
        hard = [c for c in constraints if isinstance(c, PodProximity) and c.weight is None]
        anti_own: dict[tuple[str, Source | None], set[str]] = defaultdict(set)
        for c in hard:
            if c.anti:
                anti_own[(c.term.topology_key, c.source if c.source.policy else None)] |= bound.domains_with(c.term)
        anti_existing: dict[str, set[str]] = defaultdict(set)
        for term, i in bound.anti_terms():
            value = bound.nodes[i].labels.get(term.topology_key)
            if value is not None and term.matches(pod):
                anti_existing[term.topology_key].add(value)
        terms = tuple(c.term for c in hard if not c.anti)
        affinity = [(c.term, None if batch_support else bound.domains_matching(terms, c.term.topology_key), c.source)
                    for c in hard if not c.anti]
        spread_keys = tuple(c.spread.topology_key for c in constraints if isinstance(c, SpreadRule) and c.spread.hard)
        limit_blocked: dict[tuple[str, int, Source], set[str]] = defaultdict(set)
        for c in constraints:
            if isinstance(c, CountLimit):
                me = 1 if c.term.matches(pod) else 0
                held = {v for v, k in bound.domain_counts(c.term).items() if k + me > c.most}
                if held:
                    limit_blocked[(c.term.topology_key, c.most, c.source)] |= held
        return cls(pod, tolerations, node_rules, dict(anti_existing), dict(anti_own), affinity, spread_keys,
                   dict(limit_blocked))


def node_unschedulable(f: ClassFacts, node: Node, i: int, bound: View) -> Rejection | None:
    if node.unschedulable and not tolerated(f.tolerations, unschedulable.CORDON):
        return Rejection("NodeUnschedulable", (unschedulable.ERR_REASON,), resolvable=False)
    return None


def taint_toleration(f: ClassFacts, node: Node, i: int, bound: View) -> Rejection | None:
    for taint in node.taints:
        if taint.effect in HARD_EFFECTS and not tolerated(f.tolerations, taint):
            return Rejection("TaintToleration", (taints.untolerated(taint),), resolvable=False)
    return None


def node_affinity_filter(f: ClassFacts, node: Node, i: int, bound: View) -> Rejection | None:
    for rule in f.node_rules:
        if not rule.predicate.matches(node):
            return node_affinity.rejection(rule)
    return None


def node_ports(f: ClassFacts, node: Node, i: int, bound: View) -> Rejection | None:
    if any(p.conflicts(q) for p in f.sample.host_ports for q in bound.ports_on(i)):
        return Rejection("NodePorts", (ports.ERR_REASON,))
    return None


def resources_fit(f: ClassFacts, node: Node, i: int, bound: View) -> Rejection | None:
    short = resources.shortages(f.sample.requests, lambda r: bound.free(i, r))
    if not short:
        return None
    hopeless = any(v > node.allocatable.get(r, 0) for r, v in f.sample.requests.items() if r != "pods")
    return Rejection("NodeResourcesFit", tuple(short), resolvable=not hopeless)


def inter_pod_affinity(f: ClassFacts, node: Node, i: int, bound: View) -> Rejection | None:
    labels = node.labels
    for key, values in f.anti_blocked.items():
        if labels.get(key) in values:
            return Rejection("InterPodAffinity", (pod_affinity.ERR_REASON_EXISTING,))
    for (key, source), values in f.anti_own_blocked.items():
        if labels.get(key) in values:
            return Rejection("InterPodAffinity", (pod_affinity.ERR_REASON_ANTI + (source.cite if source else ""),),
                             source=source)
    for term, ok, source in f.affinity:
        value = labels.get(term.topology_key)
        if value is None or (ok is not None and value not in ok):
            return Rejection("InterPodAffinity", (pod_affinity.ERR_REASON_AFFINITY + source.cite,), resolvable=False,
                             source=source if source.policy else None)
    return None


def topology_spread(f: ClassFacts, node: Node, i: int, bound: View) -> Rejection | None:
    if any(k not in node.labels for k in f.spread_keys):
        return Rejection("PodTopologySpread", (spread.ERR_REASON_LABEL,), resolvable=False)
    return None


def count_limit_filter(f: ClassFacts, node: Node, i: int, bound: View) -> Rejection | None:
    for (key, most, source), held in f.limit_blocked.items():
        if node.labels.get(key) in held:
            return Rejection("CountLimit", (count_limit.full(key, most, str(source)),), source=source)
    return None


FILTERS = (node_unschedulable, taint_toleration, node_affinity_filter, node_ports, resources_fit, inter_pod_affinity,
           topology_spread, count_limit_filter)


def gang_pre_filter(pod: Pod, cluster: Cluster) -> Rejection | None:
    """Coscheduling's PreFilter, plainly: the pod's gang has fewer members pending (in the batch) than its quorum
    needs beyond those bound; every node is rejected for it, before any filter."""
    gang = cluster.gangs.get(pod.gang) if pod.gang is not None else None
    if gang is None:
        return None
    bound = sum(1 for p in cluster.bound if p.gang == gang.key)
    pending = sum(1 for p in cluster.pending if p.gang == gang.key)
    if pending >= gang.min_member - bound:
        return None
    reason = gangs.waiting_for_members(GangInfo(gang.key, gang.min_member, bound, pending,
                                                quorum=gangs.quorum_name(gang)))
    return Rejection("Coscheduling", (str(reason),), resolvable=False, pre_filter=True)


def rejection(f: ClassFacts, i: int, bound: View) -> Rejection | None:
    """The first filter's rejection of node i, or None if the node passes."""
    node = bound.nodes[i]
    for check in FILTERS:
        found = check(f, node, i, bound)
        if found is not None:
            return found
    return None


# --- upstream's Filter for one pod given the bound pods alone (what preemption asks after its moves) ---------------

def _value(bound: View, i: int, key: str) -> str | None:
    return bound.nodes[i].labels.get(key)


def spread_filter(pod: Pod, constraints: tuple[Constraint, ...], bound: View, i: int) -> Rejection | None:
    """PodTopologySpread's Filter: a node without a hard constraint's key is rejected; else the skew of node i's domain
    (its matching pods in the pod's namespace, plus the pod if it matches, less the fewest of any eligible domain, or
    0 with fewer domains than minDomains) must not exceed maxSkew. Eligible nodes pass the pod's node affinity (and
    its taints when asked); a node outside them is left to those filters."""
    tolerations = tuple(t for c in constraints if isinstance(c, Tolerations) for t in c.tolerations)
    node_rules = [c for c in constraints if isinstance(c, NodeRule) and c.weight is None]
    for c in constraints:
        if not (isinstance(c, SpreadRule) and c.spread.hard):
            continue
        s = c.spread
        if _value(bound, i, s.topology_key) is None:
            return Rejection("PodTopologySpread", (spread.ERR_REASON_LABEL,), resolvable=False)
        eligible = [j for j, n in enumerate(bound.nodes)
                    if s.topology_key in n.labels
                    and (not s.honor_affinity or all(r.predicate.matches(n) for r in node_rules))
                    and (not s.honor_taints or all(t.effect not in HARD_EFFECTS or tolerated(tolerations, t)
                                                   for t in n.taints))]
        if i not in eligible:
            continue
        counts: dict[str, int] = defaultdict(int)
        for j in eligible:
            value = _value(bound, j, s.topology_key)
            assert value is not None
            counts[value] += sum(1 for p in bound.pods_on(j) if p.namespace == pod.namespace and s.selector.matches(p.labels))
        fewest = 0 if len(counts) < (s.min_domains or 1) else min(counts.values())
        here = counts[_value(bound, i, s.topology_key) or ""] + int(s.selector.matches(pod.labels))
        if here - fewest > s.max_skew:
            return Rejection("PodTopologySpread", (spread.ERR_REASON_SKEW,))
    return None


def pod_affinity_filter(pod: Pod, constraints: tuple[Constraint, ...], bound: View, i: int) -> Rejection | None:
    """InterPodAffinity's Filter: no bound pod in node i's domain whose required anti-affinity matches the pod, none the
    pod's own required anti-affinity matches, and for its required affinity a bound pod matching every term in node
    i's domain of each — or, upstream's first pod of a series, no such pod anywhere, the pod matching its own terms
    and node i carrying every term's key."""
    placed = [(j, p) for j in range(len(bound.nodes)) for p in bound.pods_on(j)]
    for j, p in placed:
        for t in p.anti_affinity_required:
            v = _value(bound, j, t.topology_key)
            if v is not None and v == _value(bound, i, t.topology_key) and t.matches(pod):
                return Rejection("InterPodAffinity", (pod_affinity.ERR_REASON_EXISTING,))
    hard = [c for c in constraints if isinstance(c, PodProximity) and c.weight is None]
    for c in (c for c in hard if c.anti):
        v = _value(bound, i, c.term.topology_key)
        if v is not None and any(_value(bound, j, c.term.topology_key) == v and c.term.matches(p) for j, p in placed):
            return Rejection("InterPodAffinity", (pod_affinity.ERR_REASON_ANTI,))
    terms = [c.term for c in hard if not c.anti]
    if not terms:
        return None
    if any(_value(bound, i, t.topology_key) is None for t in terms):
        return Rejection("InterPodAffinity", (pod_affinity.ERR_REASON_AFFINITY,), resolvable=False)
    support = [(j, p) for j, p in placed if all(t.matches(p) for t in terms)]
    if all(any(_value(bound, j, t.topology_key) == _value(bound, i, t.topology_key) for j, _ in support) for t in terms):
        return None
    anywhere = any(_value(bound, j, t.topology_key) is not None for j, _ in support for t in terms)
    if not anywhere and all(t.matches(pod) for t in terms):
        return None
    return Rejection("InterPodAffinity", (pod_affinity.ERR_REASON_AFFINITY,), resolvable=False)
