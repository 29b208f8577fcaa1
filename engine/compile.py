"""Compile the cluster model plus rule IR into the solver's class-level problem, in named steps.

Pending pods become classes (`classes.py`); static filters pick each class's candidate nodes; then one
emitter per constraint kind turns the classes' rules into class-to-class constraints over topology
partitions, all appending to one `ProblemBuilder` (as DCM has one function per constraint kind).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from .classes import ClassInfo, PolicyRules, group_pods, priority_weights, queue_positions
from .filters import ClassFacts, rejections
from .index import BoundState
from .ir import Constraint, CountLimit, GangRule, NodeOpening, PodProximity, SpreadRule
from .model import Cluster, Node, Pod, PodAffinityTerm, tolerated
from .scores import node_scores
from .solve.problem import NO_DOMAIN, Colocation, Gang, Limit, PodClass, Problem, Separation, Spread

SOFT_SPREAD_WEIGHT = 10  # per unit of skew, for ScheduleAnyway constraints

__all__ = ["compile_cluster", "Compiled", "ClassInfo", "GangInfo", "PolicyRules"]


@dataclass(slots=True)
class GangInfo:
    key: str
    min_member: int
    bound: int
    pending: int
    classes: list[int] = field(default_factory=list)
    within: str | None = None
    bound_domains: frozenset[str] = frozenset()  # values of `within` where bound members run
    short_of: tuple[str, ...] = ()  # minResources the cluster's free room cannot cover (Coscheduling PreFilter)
    created: str = ""  # the PodGroup's creation time


@dataclass(slots=True)
class Compiled:
    cluster: Cluster
    problem: Problem
    classes: list[ClassInfo]
    gangs: list[GangInfo]
    bound: BoundState
    notes: list[str] = field(default_factory=list)


class Partitions:
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


class AffinityIndex:
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
        return [j for j in self.matching_all(terms) if j in self.carriers.get(terms, ())]

    def batch_can_support(self, a: int) -> bool:
        """Can anything in the batch satisfy class a's required affinity (else only bound pods can)?"""
        terms = self.affinity_sets[a]
        return bool(set(self.matching_all(terms)) - {a} or self.seeders(terms))




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




@dataclass(slots=True)
class ProblemBuilder:
    """What every constraint emitter reads, and the one Problem they all append to."""

    cluster: Cluster
    bound: BoundState
    classes: list[ClassInfo]
    index: AffinityIndex
    partitions: Partitions
    problem: Problem
    spread_domains: dict[tuple, dict[int, list[int]]] = field(default_factory=dict)  # shared by equal classes


def compile_cluster(cluster: Cluster, policy: PolicyRules | None = None) -> Compiled:
    bound = BoundState.of(cluster.nodes, cluster.bound)
    grouped = group_pods(cluster, policy, bound)
    index = AffinityIndex([pods[0] for pods, _ in grouped], [rules for _, rules in grouped], bound)
    classes = _class_infos(grouped, index, bound)
    gangs = _gangs(cluster, bound, classes)
    partitions = Partitions(cluster.nodes)
    notes: list[str] = []
    problem = _problem(cluster.nodes, bound, classes)
    build = ProblemBuilder(cluster, bound, classes, index, partitions, problem)
    problem.classes = _pod_classes(build, gangs, notes)
    emit_gangs(build, gangs)
    emit_required_affinity(build)
    for a, info in enumerate(classes):
        for c in info.constraints:
            emitter = EMITTERS.get(type(c))
            if emitter is not None:
                emitter(build, a, c)
    emit_exclusive_ports(build)
    emit_openings(build)
    problem.partitions = partitions.parts
    return Compiled(cluster, problem, classes, gangs, bound, notes)


# -- steps ----------------------------------------------------------------------------------------

def _class_infos(grouped: list[tuple[list[Pod], tuple]], index: AffinityIndex, bound: BoundState) -> list[ClassInfo]:
    """Static filter facts and rejected nodes per class."""
    out = []
    for a, (pods, rules) in enumerate(grouped):
        facts = ClassFacts.of(pods[0], rules, bound, index.batch_can_support(a))
        out.append(ClassInfo(pods, rules, facts, rejections(facts, bound)))
    return out


def _problem(nodes: list[Node], bound: BoundState, classes: list[ClassInfo]) -> Problem:
    """The empty problem: resources the batch asks for, free capacity and allocatable per node."""
    resources = tuple(sorted({r for info in classes for r in info.facts.requests}))
    return Problem(
        resources=resources,
        free=[tuple(bound.free(i, r) for r in resources) for i in range(len(nodes))],
        capacity=[tuple(node.allocatable.get(r, 0) for r in resources) for node in nodes],
        empty=frozenset(i for i in range(len(nodes)) if not bound.pods_on[i]),
    )


def _pod_classes(build: ProblemBuilder, gangs: list[GangInfo], notes: list[str]) -> list[PodClass]:
    """One solver class per pod class, complete when built (gang, greedy rank, per-node cap, queue)."""
    classes, nodes = build.classes, build.cluster.nodes
    weights = priority_weights(classes, notes)
    gang_of = {a: g for g, gi in enumerate(gangs) for a in gi.classes}
    age = {g: k for k, g in enumerate(sorted(range(len(gangs)), key=lambda g: (gangs[g].created, gangs[g].key)))}
    keys = [_rank_key(info, age.get(gang_of[a]) if a in gang_of else None, bool(build.index.affinity_sets[a]))
            for a, info in enumerate(classes)]
    rank = {k: r for r, k in enumerate(sorted(set(keys)))}
    queues = queue_positions(classes)
    out = []
    for a, info in enumerate(classes):
        candidates = info.rejected.passing()
        scores = node_scores(info, candidates, nodes, build.bound)
        out.append(PodClass(
            count=len(info.pods),
            demand=tuple(info.facts.requests.get(r, 0) for r in build.problem.resources),
            weight=weights[info.priority],
            candidates=candidates,
            scores=scores if any(scores) else (),
            max_per_node=1 if info.sample.host_ports or _one_per_node(build, a) else None,
            gang=gang_of.get(a),
            rank=rank[keys[a]],
            queue=queues[a],
        ))
    return out


def _rank_key(info: ClassInfo, gang_age: int | None, affine: bool) -> tuple:
    """Greedy order (ascending; the greedy takes the highest first): priority, gangs (the oldest PodGroup
    first, as Coscheduling's queue sort), supporters before followers. Within a rank the greedy itself
    orders by pod size."""
    return (info.priority, gang_age is not None, -(gang_age or 0), not affine)


def _self_anti_per_node(build: ProblemBuilder, a: int, c: PodProximity) -> bool:
    """A hard anti-affinity term that matches its own class on a one-node-per-domain key (hostname):
    simply at most one such pod per node."""
    if not (c.anti and c.weight is None) or a not in build.index.matching(c.term):
        return False
    return build.partitions.singleton(build.partitions.of(c.term.topology_key))


def _one_per_node(build: ProblemBuilder, a: int) -> bool:
    return any(isinstance(c, PodProximity) and _self_anti_per_node(build, a, c) for c in build.classes[a].constraints)


def _short_of(index: BoundState, min_resources: tuple[tuple[str, int], ...]) -> tuple[str, ...]:
    """Resources of a PodGroup's minResources beyond the cluster's total free room: Coscheduling's
    PreFilter rejects such a gang before trying any member."""
    return tuple(
        f"{r} {want} > {free} free" for r, want in min_resources
        if want > (free := sum(max(0, index.free(i, r)) for i in range(len(index.nodes))))
    )


def _gangs(cluster: Cluster, index: BoundState, classes: list[ClassInfo]) -> list[GangInfo]:
    rules: dict[str, tuple[GangRule, str | None]] = {}
    members: dict[str, list[int]] = defaultdict(list)
    for a, info in enumerate(classes):
        own = [c for c in info.constraints if isinstance(c, GangRule)]
        if own:
            rule = own[0]  # the pod's own PodGroup first, then the first policy
            within = next((r.within for r in own if r.group == rule.group and r.within), None)
            rules.setdefault(rule.group, (rule, within))
            members[rule.group].append(a)
    bound = _bound_members(cluster, [rule for rule, _ in rules.values()])
    gangs = []
    for group, (rule, within) in rules.items():
        gang = _gang_info(cluster, rule, within, bound.get(group, []))
        gang.short_of = _short_of(index, rule.min_resources)
        gang.created = rule.created
        gang.classes = members[group]
        gang.pending = sum(len(classes[a].pods) for a in members[group])
        if gang.min_member - gang.bound > 0:
            gangs.append(gang)
    return gangs


def _bound_members(cluster: Cluster, rules: list[GangRule]) -> dict[str, list[Pod]]:
    """Bound pods per gang, in one pass over the bound pods (a gang is found by its label's value)."""
    wanted = {(r.namespace, r.label, r.value): r.group for r in rules}
    labels = {r.label for r in rules}
    out: dict[str, list[Pod]] = defaultdict(list)
    for pod in cluster.bound:
        for label in labels:
            group = wanted.get((pod.namespace, label, pod.labels.get(label)))
            if group is not None:
                out[group].append(pod)
    return out


def _gang_info(cluster: Cluster, rule: GangRule, within: str | None, members: list[Pod]) -> GangInfo:
    gang = GangInfo(rule.group, rule.min_member, len(members), 0, within=within)
    if within:
        labels = {n.name: n.labels for n in cluster.nodes}
        gang.bound_domains = frozenset(
            labels[p.node_name][within] for p in members if p.node_name in labels and within in labels[p.node_name]
        )
    return gang


# -- one emitter per constraint kind ---------------------------------------------------------------

def describe(rule: Constraint) -> str:
    """A batch rule in words, with where it came from: what explanations say blocked a pod."""
    if isinstance(rule, PodProximity):
        kind = ("preferred " if rule.weight is not None else "required ") + ("anti-affinity" if rule.anti else "affinity")
        return f"pod {kind} to pods {rule.term.selector} per {rule.term.topology_key} [{rule.source}]"
    if isinstance(rule, SpreadRule):
        s = rule.spread
        return f"topology spread maxSkew {s.max_skew} per {s.topology_key} over pods {s.selector} [{rule.source}]"
    if isinstance(rule, CountLimit):
        return f"at most {rule.most} per {rule.term.topology_key} of pods {rule.term.selector} [{rule.source}]"
    return str(rule)


def emit_gangs(build: ProblemBuilder, gangs: list[GangInfo]) -> None:
    for gi in gangs:
        partition = domains = None
        if gi.within is not None:
            partition = build.partitions.of(gi.within)
            if gi.bound_domains:
                domains = build.partitions.ids(partition, gi.bound_domains)
        need = max(0, gi.min_member - gi.bound)
        if gi.short_of:
            need = gi.pending + 1  # cannot start: the cluster lacks the room its minResources asks for
        build.problem.gangs.append(Gang(tuple(gi.classes), need, partition, domains))


def emit_required_affinity(build: ProblemBuilder) -> None:
    """Required pod affinity, per term set: carriers need support in each of their terms' domains."""
    index, partitions = build.index, build.partitions
    seed_groups = _seed_groups({ts: index.matching_all(ts) for ts in index.carriers if index.seeders(ts)})
    for terms, members in index.carriers.items():
        sup, seed = index.matching_all(terms), index.seeders(terms)
        if set(sup) <= set(members) and len(members) == 1 and not seed:
            continue  # nothing in the batch can help: the static filter confined it to bound support
        chained = frozenset(j for j in sup if index.affinity_sets[j])
        rules = {c.term: c for c in build.classes[members[0]].constraints
                 if isinstance(c, PodProximity) and not c.anti and c.weight is None}
        for t in terms:
            p = partitions.of(t.topology_key)
            supported = partitions.ids(p, build.bound.domains_matching(terms, t.topology_key))
            build.problem.colocations.append(
                Colocation(p, tuple(members), tuple(sup), supported, tuple(seed), chained,
                           seed_group=seed_groups.get(terms, -1), why=describe(rules[t]))
            )


def emit_proximity(build: ProblemBuilder, a: int, c: PodProximity) -> None:
    """Anti-affinity (hard or soft) and soft affinity between classes; hard affinity is per term set."""
    if not c.anti and c.weight is None:
        return  # emit_required_affinity
    p = build.partitions.of(c.term.topology_key)
    matching = build.index.matching(c.term)
    if not c.anti:
        sup = tuple(j for j in matching if j != a)
        if sup:
            build.problem.colocations.append(Colocation(p, (a,), sup, weight=c.weight, why=describe(c)))
        return
    others = tuple(o for o in matching if not (o == a and _self_anti_per_node(build, a, c)))
    if others:
        build.problem.separations.append(Separation(p, a, others, c.weight, describe(c)))


def emit_spread(build: ProblemBuilder, a: int, c: SpreadRule) -> None:
    s, info = c.spread, build.classes[a]
    pod = info.sample
    p = build.partitions.of(s.topology_key)
    domain_nodes = _spread_domains(build, info, c, build.partitions.parts[p])
    on_node = build.bound.node_counts(PodAffinityTerm(s.selector, frozenset({pod.namespace}), s.topology_key))
    domain_of = {i: d for d, members in domain_nodes.items() for i in members} if on_node else {}
    existing: dict[int, int] = defaultdict(int)
    for i, k in on_node.items():
        if i in domain_of:
            existing[domain_of[i]] += k
    counted = tuple(
        j for j, other in enumerate(build.classes)
        if other.sample.namespace == pod.namespace and s.selector.matches(other.sample.labels)
    )
    build.problem.spreads.append(
        Spread(a, counted, {d: tuple(v) for d, v in domain_nodes.items()}, dict(existing), s.max_skew, s.min_domains,
               None if s.hard else SOFT_SPREAD_WEIGHT, describe(c))
    )


def _spread_domains(build: ProblemBuilder, info: ClassInfo, c: SpreadRule, part: list[int]) -> dict[int, list[int]]:
    """Eligible nodes per domain: nodes with the key, passing node affinity and (if asked) taints; the same
    for every class with the same node rules and tolerations, so computed once for them."""
    s = c.spread
    key = (s.topology_key, s.honor_affinity and info.facts.node_rules, s.honor_taints and info.facts.tolerations)
    if key not in build.spread_domains:
        build.spread_domains[key] = _eligible_by_domain(build, info, c, part)
    return build.spread_domains[key]


def _eligible_by_domain(build: ProblemBuilder, info: ClassInfo, c: SpreadRule, part: list[int]) -> dict[int, list[int]]:
    s, bound = c.spread, build.bound
    eligible = set(bound.everything)
    if s.honor_affinity:
        for rule in info.facts.node_rules:
            eligible &= bound.matching_nodes(rule.predicate)
    if s.honor_taints:
        for taints, members in bound.taint_groups().items():
            if any(t.effect in ("NoSchedule", "NoExecute") and not tolerated(info.facts.tolerations, t) for t in taints):
                eligible.difference_update(members)
    out: dict[int, list[int]] = defaultdict(list)
    for i in sorted(eligible):
        if part[i] != NO_DOMAIN:
            out[part[i]].append(i)
    return out


def emit_limit(build: ProblemBuilder, a: int, c: CountLimit) -> None:
    p = build.partitions.of(c.term.topology_key)
    ids = build.partitions.values[p]
    existing = {ids[v]: k for v, k in build.bound.domain_counts(c.term).items() if k and v in ids}
    build.problem.limits.append(Limit(p, a, tuple(build.index.matching(c.term)), existing, c.most, describe(c)))


def emit_exclusive_ports(build: ProblemBuilder) -> None:
    """Classes sharing a host port: a node takes at most one pod of all of them."""
    by_port: dict[tuple[str, int], list[int]] = defaultdict(list)
    for a, info in enumerate(build.classes):
        for hp in {(hp.protocol, hp.port) for hp in info.sample.host_ports}:
            by_port[hp].append(a)
    build.problem.exclusive.extend(tuple(m) for m in by_port.values() if len(m) > 1)


def emit_openings(build: ProblemBuilder) -> None:
    """Pack / spread nodes: classes grouped by their cost per empty node opened."""
    by_cost: dict[int, list[int]] = defaultdict(list)
    for a, info in enumerate(build.classes):
        for cost in {c.weight for c in info.constraints if isinstance(c, NodeOpening)}:
            by_cost[cost].append(a)
    build.problem.openings = [(tuple(members), cost) for cost, members in sorted(by_cost.items())]


EMITTERS: dict[type, Callable[[ProblemBuilder, int, Constraint], None]] = {
    PodProximity: emit_proximity,  # type: ignore[dict-item]
    SpreadRule: emit_spread,  # type: ignore[dict-item]
    CountLimit: emit_limit,  # type: ignore[dict-item]
}
