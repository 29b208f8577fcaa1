"""Compile the cluster model plus rule IR into the solver's class-level problem.

Pending pods with identical scheduling-relevant facts form one class; static filters pick each class's
candidate nodes; pod-to-pod rules become class-to-class constraints over topology partitions.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from .filters import BoundState, ClassFacts, Rejections, rejections
from .ir import (
    Constraint,
    CountLimit,
    GangRule,
    NodeOpening,
    NodeRule,
    NodeScore,
    PodCost,
    PodProximity,
    SpreadRule,
)
from .model import Cluster, Node, Pod, PodAffinityTerm, tolerated
from .podspec import pod_constraints
from .solve.problem import NO_DOMAIN, Colocation, Gang, Limit, PodClass, Problem, Separation, Spread

PREFER_NO_SCHEDULE_PENALTY = 50  # per untolerated PreferNoSchedule taint, on the 1..100 preference scale
SOFT_SPREAD_WEIGHT = 10  # per unit of skew, for ScheduleAnyway constraints
MAX_WEIGHT = 1 << 60

PolicyRules = Callable[[Pod], tuple[Constraint, ...]]


@dataclass(slots=True)
class ClassInfo:
    """One pod class as the rest of the pipeline sees it (the solver only sees its index)."""

    pods: list[Pod]
    constraints: tuple[Constraint, ...]
    facts: ClassFacts
    rejected: Rejections  # nodes no pod of the class can use, and why

    @property
    def sample(self) -> Pod:
        return self.pods[0]

    @property
    def priority(self) -> int:
        return self.sample.priority


@dataclass(slots=True)
class GangInfo:
    key: str
    min_member: int
    bound: int
    pending: int
    classes: list[int] = field(default_factory=list)
    within: str | None = None
    bound_domains: frozenset[str] = frozenset()  # values of `within` where bound members run


@dataclass(slots=True)
class Compiled:
    cluster: Cluster
    problem: Problem
    classes: list[ClassInfo]
    gangs: list[GangInfo]
    bound: BoundState
    notes: list[str] = field(default_factory=list)


def _class_key(pod: Pod, constraints: tuple[Constraint, ...]) -> tuple:
    return (
        pod.namespace,
        tuple(sorted(pod.labels.items())),
        tuple(sorted(pod.requests.items())),
        pod.priority,
        pod.host_ports,
        constraints,
    )


def group_pods(pending: list[Pod], cluster: Cluster, policy: PolicyRules | None) -> list[tuple[list[Pod], tuple]]:
    groups: dict[tuple, list[Pod]] = {}
    rules: dict[tuple, tuple[Constraint, ...]] = {}
    for pod in pending:
        constraints = pod_constraints(pod, cluster.pod_groups) + (policy(pod) if policy else ())
        key = _class_key(pod, constraints)
        groups.setdefault(key, []).append(pod)
        rules[key] = constraints
    out = []
    for key, pods in groups.items():
        pods.sort(key=lambda p: (p.created, p.name))
        out.append((pods, rules[key]))
    return out


def _priority_weights(classes: list[ClassInfo], notes: list[str]) -> dict[int, int]:
    """Lexicographic weights: one pod of a higher priority outweighs every pod of all lower ones."""
    per_level: dict[int, int] = defaultdict(int)
    for info in classes:
        per_level[info.priority] += len(info.pods)
    weights: dict[int, int] = {}
    below = 0
    for level in sorted(per_level):
        weights[level] = below + 1
        below += weights[level] * per_level[level]
    if below > MAX_WEIGHT:
        notes.append("too many priority levels for exact lexicographic weights; priorities weighted by rank")
        weights = {level: i + 1 for i, level in enumerate(sorted(per_level))}
    return weights


class _Partitions:
    """Topology keys -> partition indices, each a domain id per node (NO_DOMAIN where the label is absent)."""

    def __init__(self, nodes: list[Node]):
        self.nodes = nodes
        self.index: dict[str, int] = {}
        self.parts: list[list[int]] = []
        self.values: list[dict[str, int]] = []

    def of(self, key: str) -> int:
        if key not in self.index:
            ids: dict[str, int] = {}
            part = [ids.setdefault(n.labels[key], len(ids)) if key in n.labels else NO_DOMAIN for n in self.nodes]
            self.index[key] = len(self.parts)
            self.parts.append(part)
            self.values.append(ids)
        return self.index[key]

    def ids(self, p: int, values) -> frozenset[int]:
        """Domain ids of partition p for label values (values no node carries are dropped)."""
        known = self.values[p]
        return frozenset(known[v] for v in values if v in known)

    def singleton(self, p: int) -> bool:
        """Every node carries the key, each with its own value (as kubernetes.io/hostname does)."""
        part = self.parts[p]
        return NO_DOMAIN not in part and len(set(part)) == len(part)


class _AffinityIndex:
    """Which classes match which pod-affinity terms, and who may support or start a required series.

    Upstream counts a pod as support for required affinity only if it matches all of the incoming pod's
    required terms, so classes are grouped by their whole term set.
    """

    def __init__(self, samples: list[Pod], rules: list[tuple[Constraint, ...]], bound: BoundState):
        self.samples = samples
        self.bound = bound
        self.affinity_sets = [
            tuple(c.term for c in rs if isinstance(c, PodProximity) and not c.anti and c.weight is None) for rs in rules
        ]
        self.carriers: dict[tuple[PodAffinityTerm, ...], list[int]] = defaultdict(list)
        for a, terms in enumerate(self.affinity_sets):
            if terms:
                self.carriers[terms].append(a)
        self._all: dict[tuple[PodAffinityTerm, ...], list[int]] = {}

    def matching(self, term: PodAffinityTerm) -> list[int]:
        return self.matching_all((term,))

    def matching_all(self, terms: tuple[PodAffinityTerm, ...]) -> list[int]:
        if terms not in self._all:
            self._all[terms] = [j for j, s in enumerate(self.samples) if all(t.matches(s) for t in terms)]
        return self._all[terms]

    def seeders(self, terms: tuple[PodAffinityTerm, ...]) -> list[int]:
        """Upstream: the first pod of a self-affine series may start anywhere while nothing matches yet."""
        if any(self.bound.domains_matching(terms, t.topology_key) for t in terms):
            return []
        return [j for j in self.matching_all(terms) if j in self.carriers[terms]]

    def batch_can_support(self, a: int) -> bool:
        """Can anything in the batch satisfy class a's required affinity (else only bound pods can)?"""
        terms = self.affinity_sets[a]
        return bool(set(self.matching_all(terms)) - {a} or self.seeders(terms))


def compile_cluster(cluster: Cluster, policy: PolicyRules | None = None) -> Compiled:
    nodes = cluster.nodes
    bound = BoundState.of(nodes, cluster.bound)
    notes: list[str] = []
    grouped = group_pods(cluster.pending, cluster, policy)
    index = _AffinityIndex([pods[0] for pods, _ in grouped], [rules for _, rules in grouped], bound)

    classes: list[ClassInfo] = []
    for a, (pods, rules) in enumerate(grouped):
        facts = ClassFacts.of(pods[0], rules, bound, index.batch_can_support(a))
        rejected = rejections(facts, bound)
        classes.append(ClassInfo(pods, rules, facts, rejected))

    weights = _priority_weights(classes, notes)
    resources = sorted({r for info in classes for r in info.facts.requests})
    problem = Problem(
        resources=tuple(resources),
        free=[tuple(bound.free(i, r) for r in resources) for i in range(len(nodes))],
    )
    partitions = _Partitions(nodes)
    gangs = _gangs(cluster, classes)

    for a, info in enumerate(classes):
        candidates = info.rejected.passing()
        scores = _node_scores(info, candidates, nodes, bound)
        problem.classes.append(
            PodClass(
                count=len(info.pods),
                demand=tuple(info.facts.requests.get(r, 0) for r in resources),
                weight=weights[info.priority],
                candidates=candidates,
                scores=scores if any(scores) else (),
                max_per_node=1 if info.sample.host_ports else None,
                gang=next((g for g, gi in enumerate(gangs) if a in gi.classes), None),
            )
        )
    for gi in gangs:
        gang = Gang(tuple(gi.classes), max(0, gi.min_member - gi.bound))
        if gi.within is not None:
            gang.partition = partitions.of(gi.within)
            if gi.bound_domains:
                gang.domains = partitions.ids(gang.partition, gi.bound_domains)
        problem.gangs.append(gang)

    seed_groups = _seed_groups({ts: index.matching_all(ts) for ts in index.carriers if index.seeders(ts)})
    for terms, members in index.carriers.items():
        sup, seed = index.matching_all(terms), index.seeders(terms)
        if set(sup) <= set(members) and len(members) == 1 and not seed:
            continue  # nothing in the batch can help: the static filter confined it to bound support
        chained = frozenset(j for j in sup if index.affinity_sets[j])
        for t in terms:
            p = partitions.of(t.topology_key)
            supported = partitions.ids(p, bound.domains_matching(terms, t.topology_key))
            problem.colocations.append(
                Colocation(p, tuple(members), tuple(sup), supported, tuple(seed), chained,
                           seed_group=seed_groups.get(terms, -1))
            )
    for a, info in enumerate(classes):
        for c in info.constraints:
            if isinstance(c, PodProximity) and (c.anti or c.weight is not None):
                _proximity(problem, partitions, a, c, index.matching)
            elif isinstance(c, SpreadRule):
                _spread(problem, partitions, a, info, c, classes, cluster, bound)
            elif isinstance(c, CountLimit):
                p = partitions.of(c.term.topology_key)
                ids = partitions.values[p]
                existing = {ids[v]: k for v, k in bound.domain_counts(c.term).items() if k and v in ids}
                problem.limits.append(Limit(p, a, tuple(index.matching(c.term)), existing, c.most))
    _exclusive_ports(problem, classes)
    problem.empty = frozenset(i for i in range(len(nodes)) if not bound.pods_on[i])
    by_cost: dict[int, list[int]] = defaultdict(list)
    for a, info in enumerate(classes):
        for cost in {c.weight for c in info.constraints if isinstance(c, NodeOpening)}:
            by_cost[cost].append(a)
    problem.openings = [(tuple(members), cost) for cost, members in sorted(by_cost.items())]
    problem.partitions = partitions.parts
    keys = [_rank_key(classes[a], problem.classes[a], bool(index.affinity_sets[a])) for a in range(len(classes))]
    dense = {k: r for r, k in enumerate(sorted(set(keys)))}
    for a, k in enumerate(keys):
        problem.classes[a].rank = dense[k]
    return Compiled(cluster, problem, classes, gangs, bound, notes)


def _seed_groups(matched: dict[tuple[PodAffinityTerm, ...], list[int]]) -> dict[tuple[PodAffinityTerm, ...], int]:
    """Term sets whose selectors match a common class share one seed (union-find over shared classes)."""
    parent = list(range(len(matched)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[int, int] = {}
    terms = list(matched)
    for i, t in enumerate(terms):
        for c in matched[t]:
            if c in owner:
                parent[root(i)] = root(owner[c])
            else:
                owner[c] = i
    return {t: root(i) for i, t in enumerate(terms)}


def _rank_key(info: ClassInfo, cls: PodClass, affine: bool) -> tuple:
    """Greedy order (ascending; the greedy takes the highest first): priority, gangs, supporters before
    followers. Within a rank the greedy itself orders by pod size."""
    return (info.priority, cls.gang is not None, not affine)


def _gangs(cluster: Cluster, classes: list[ClassInfo]) -> list[GangInfo]:
    by_key: dict[str, GangInfo] = {}
    for a, info in enumerate(classes):
        rules = [c for c in info.constraints if isinstance(c, GangRule)]
        if not rules:
            continue
        rule = rules[0]  # the pod's own PodGroup first, then the first policy
        within = next((r.within for r in rules if r.group == rule.group and r.within), None)
        if rule.group not in by_key:
            members = [p for p in cluster.bound if rule.member(p)]
            gang = GangInfo(rule.group, rule.min_member, len(members), 0, within=within)
            if within:
                labels = {n.name: n.labels for n in cluster.nodes}
                gang.bound_domains = frozenset(
                    labels[p.node_name][within] for p in members
                    if p.node_name in labels and within in labels[p.node_name]
                )
            by_key[rule.group] = gang
        by_key[rule.group].classes.append(a)
        by_key[rule.group].pending += len(info.pods)
    return [g for g in by_key.values() if g.min_member - g.bound > 0]


def _node_scores(info: ClassInfo, candidates: tuple[int, ...], nodes: list[Node], bound: BoundState) -> tuple[int, ...]:
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
    if not soft_rules and not proximity and not costs and not any(
        t.effect == "PreferNoSchedule" for i in candidates for t in nodes[i].taints
    ):
        return ()
    scores = []
    for i in candidates:
        node = nodes[i]
        s = sum(r.weight for r in soft_rules if r.predicate.matches(node))
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


def _proximity(problem, partitions, a, c: PodProximity, matching) -> None:
    """Anti-affinity (hard or soft) and soft affinity between classes; hard affinity is per term above."""
    p = partitions.of(c.term.topology_key)
    if c.anti:
        others = tuple(matching(c.term))
        if not others:
            return
        cls = problem.classes[a]
        if c.weight is None and a in others and partitions.singleton(p):
            cls.max_per_node = 1  # one per domain, and every domain is a single node
            others = tuple(o for o in others if o != a)
            if not others:
                return
        problem.separations.append(Separation(p, a, others, c.weight))
    else:
        sup = tuple(j for j in matching(c.term) if j != a)
        if sup:
            problem.colocations.append(Colocation(p, (a,), sup, weight=c.weight))


def _spread(problem, partitions, a, info: ClassInfo, c: SpreadRule, classes, cluster, bound: BoundState) -> None:
    s = c.spread
    pod = info.sample
    p = partitions.of(s.topology_key)
    part = partitions.parts[p]
    hard_rules = info.facts.node_rules
    domain_nodes: dict[int, list[int]] = defaultdict(list)
    for i, node in enumerate(cluster.nodes):
        if part[i] == NO_DOMAIN:
            continue
        if s.honor_affinity and not all(r.predicate.matches(node) for r in hard_rules):
            continue
        if s.honor_taints and any(
            t.effect in ("NoSchedule", "NoExecute") and not tolerated(info.facts.tolerations, t) for t in node.taints
        ):
            continue
        domain_nodes[part[i]].append(i)
    existing: dict[int, int] = {}
    for d, members in domain_nodes.items():
        k = sum(1 for i in members for q in bound.pods_on[i] if q.namespace == pod.namespace and s.selector.matches(q.labels))
        if k:
            existing[d] = k
    counted = tuple(
        j for j, other in enumerate(classes)
        if other.sample.namespace == pod.namespace and s.selector.matches(other.sample.labels)
    )
    problem.spreads.append(
        Spread(a, counted, {d: tuple(v) for d, v in domain_nodes.items()}, existing, s.max_skew, s.min_domains,
               None if s.hard else SOFT_SPREAD_WEIGHT)
    )


def _exclusive_ports(problem: Problem, classes: list[ClassInfo]) -> None:
    by_port: dict[tuple[str, int], list[int]] = defaultdict(list)
    for a, info in enumerate(classes):
        for hp in {(hp.protocol, hp.port) for hp in info.sample.host_ports}:
            by_port[hp].append(a)
    for members in by_port.values():
        if len(members) > 1:
            problem.exclusive.append(tuple(members))
