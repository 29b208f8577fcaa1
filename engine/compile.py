"""Compile the cluster model plus rule IR into the solver's class-level problem, in named steps.

Pending pods become classes (`classes.py`); static filters pick each class's candidate nodes; then one
emitter per constraint kind turns the classes' rules into class-to-class constraints over topology
partitions, all appending to one `ProblemBuilder` (as DCM has one function per constraint kind).
"""

from __future__ import annotations

import gc
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from .classes import ClassInfo, PolicyRules, group_pods, priority_weights, queue_positions
from .filters import ClassFacts, Rejections, rejections
from .index import BoundState
from .ir import Constraint, CountLimit, GangRule, NodeOpening, PodProximity, PodTerm, SpreadRule
from .model import Cluster, Node, Pod, PodAffinityTerm, tolerated
from .scores import node_scores
from .solve.problem import NO_DOMAIN, Colocation, Gang, Limit, PodClass, Problem, Separation, Spread

SOFT_SPREAD_WEIGHT = 10  # per unit of skew, for ScheduleAnyway constraints

__all__ = ["compile_cluster", "Compiled", "ClassInfo", "Deadline", "GangInfo", "PolicyRules"]


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
    """Topology keys -> partition indices, each a domain id per node (NO_DOMAIN where the label is absent).

    A partition is the cluster index's label column (value codes, -1 = NO_DOMAIN for nodes without it)."""

    def __init__(self, bound: BoundState):
        self.bound = bound
        self.index: dict[str, int] = {}
        self.parts: list[list[int]] = []
        self.values: list[dict[str, int]] = []
        self._singleton: dict[int, bool] = {}

    def of(self, key: str) -> int:
        if key not in self.index:
            column = self.bound.label(key)
            self.index[key] = len(self.parts)
            self.parts.append(column.codes.tolist())
            self.values.append(column.values)
        return self.index[key]

    def ids(self, p: int, values) -> frozenset[int]:
        """Domain ids of partition p for label values (values no node carries are dropped)."""
        known = self.values[p]
        return frozenset(known[v] for v in values if v in known)

    def singleton(self, p: int) -> bool:
        """Every node carries the key, each with its own value (as kubernetes.io/hostname does)."""
        if p not in self._singleton:
            part = self.parts[p]
            self._singleton[p] = NO_DOMAIN not in part and len(self.values[p]) == len(part)
        return self._singleton[p]


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
        self._one: dict[object, list[int]] = {}
        self._in_namespace: dict[str, list[int]] = defaultdict(list)
        for j, sample in enumerate(samples):
            self._in_namespace[sample.namespace].append(j)

    def matching(self, term: PodTerm) -> list[int]:
        """Classes whose pods `term` matches (its topology key plays no part, so terms that differ only
        there share one answer)."""
        namespaces, selector = getattr(term, "namespaces", None), getattr(term, "selector", None)
        key = (namespaces, selector) if selector is not None else term
        if key not in self._one:
            scope = range(len(self.samples)) if namespaces is None else sorted(
                j for ns in namespaces for j in self._in_namespace.get(ns, ()))
            self._one[key] = [j for j in scope if term.matches(self.samples[j])]
        return self._one[key]

    def matching_all(self, terms: tuple[PodAffinityTerm, ...]) -> list[int]:
        if terms not in self._all:
            if not terms:
                self._all[terms] = list(range(len(self.samples)))
            else:
                rest = terms[1:]
                self._all[terms] = [j for j in self.matching(terms[0]) if all(t.matches(self.samples[j]) for t in rest)]
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
    spread_domains: dict[tuple, "SpreadDomains"] = field(default_factory=dict)  # shared by equal classes


@dataclass(frozen=True, slots=True)
class Deadline:
    """When compile stops checking more pod classes: `at` on `clock` (None: never)."""

    at: float | None = None
    clock: Callable[[], float] = time.perf_counter

    @classmethod
    def after(cls, seconds: float | None) -> "Deadline":
        """`seconds` from now (None: never)."""
        return cls(None if seconds is None else time.perf_counter() + seconds)

    def passed(self) -> bool:
        return self.at is not None and self.clock() >= self.at


@dataclass(frozen=True, slots=True)
class Candidates:
    """A class's candidate nodes (those passing every static filter) and one pod's soft score on each."""

    nodes: tuple[int, ...] = ()
    scores: tuple[int, ...] = ()  # () when every candidate scores 0


class NodeTuples:
    """Candidate node tuples, shared: classes with the same candidates get the same tuple, made of one
    set of int objects. At 20,000 nodes and hundreds of classes, a fresh tuple of fresh ints per class is
    millions of objects (memory, and time whenever the garbage collector walks them)."""

    def __init__(self, size: int):
        self.ints = list(range(size))
        self.known: dict[bytes, tuple[int, ...]] = {}

    def of(self, nodes: np.ndarray) -> tuple[int, ...]:
        key = nodes.tobytes()
        if key not in self.known:
            ints = self.ints
            self.known[key] = tuple([ints[i] for i in nodes.tolist()])
        return self.known[key]


@dataclass(slots=True)
class Checked:
    """The classes after the static filters: each class's facts, rejections and candidates, and which
    classes compile left unchecked because the time limit came first."""

    infos: list[ClassInfo]
    candidates: list[Candidates]
    unchecked: list[int]


def compile_cluster(cluster: Cluster, policy: PolicyRules | None = None, deadline: Deadline | None = None) -> Compiled:
    """The class-level problem of a cluster snapshot (and policies).

    Classes are checked (static filters, candidates, scores) highest priority first; once `deadline` has
    passed the rest are left unchecked — no candidates, every node rejected as not checked, and the
    solver's status and strategy say so — so compile cannot overrun a time limit on any input. The caller
    gives it the time limit of the whole solve (`Deadline.after(time_limit)`): the starting plans that
    follow cost a fraction of compile.
    """
    with collector_paused():
        return _compile(cluster, policy, deadline or Deadline())


@contextmanager
def collector_paused() -> Iterator[None]:
    """Compile builds hundreds of thousands of small containers (index entries, candidate tuples) and no
    reference cycles, while the snapshot holds millions of objects: each full pass of the cyclic collector
    would walk all of them again (seconds per compile at 20,000 nodes)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def _compile(cluster: Cluster, policy: PolicyRules | None, deadline: Deadline) -> Compiled:
    bound = BoundState.of(cluster.nodes, cluster.bound)
    grouped = group_pods(cluster, policy, bound)
    index = AffinityIndex([pods[0] for pods, _ in grouped], [rules for _, rules in grouped], bound)
    checked = _check_classes(grouped, index, bound, deadline)
    classes = checked.infos
    gangs = _gangs(cluster, bound, classes)
    notes: list[str] = []
    problem = _problem(bound, classes)
    build = ProblemBuilder(cluster, bound, classes, index, Partitions(bound), problem)
    problem.classes = _pod_classes(build, checked.candidates, gangs, notes)
    emit_gangs(build, gangs)
    emit_required_affinity(build)
    skip = set(checked.unchecked)
    for a, info in enumerate(classes):
        if a in skip:
            continue  # an unchecked class places no pod, so its own rules bind nothing
        for c in info.constraints:
            emitter = EMITTERS.get(type(c))
            if emitter is not None:
                emitter(build, a, c)
    emit_exclusive_ports(build)
    emit_openings(build)
    problem.partitions = build.partitions.parts
    problem.unchecked = tuple(checked.unchecked)
    if checked.unchecked:
        notes.append(f"compile reached the time limit: {len(classes) - len(skip)} of {len(classes)} pod classes "
                     f"checked (highest priority first); {sum(len(classes[a].pods) for a in skip)} pod(s) of "
                     "the rest are left unplaced")
    return Compiled(cluster, problem, classes, gangs, bound, notes)


# -- steps ----------------------------------------------------------------------------------------

def _check_classes(grouped: list[tuple[list[Pod], tuple]], index: AffinityIndex, bound: BoundState,
                   deadline: Deadline) -> Checked:
    """Static filter facts, rejected nodes, candidates and soft scores per class, highest priority first,
    while the deadline allows; classes after it are left unchecked (every node rejected as not checked)."""
    size = len(grouped)
    infos: list[ClassInfo | None] = [None] * size
    candidates = [Candidates()] * size
    shared = NodeTuples(len(bound.nodes))
    unchecked: list[int] = []
    for a in sorted(range(size), key=lambda a: -grouped[a][0][0].priority):
        pods, rules = grouped[a]
        if deadline.passed():
            infos[a] = ClassInfo(pods, rules, ClassFacts.unchecked(pods[0], rules), Rejections.unchecked(len(bound.nodes)))
            unchecked.append(a)
            continue
        facts = ClassFacts.of(pods[0], rules, bound, index.batch_can_support(a))
        info = infos[a] = ClassInfo(pods, rules, facts, rejections(facts, bound))
        nodes = info.rejected.passing_array()
        scores = node_scores(info, nodes, bound.nodes, bound)
        candidates[a] = Candidates(shared.of(nodes), scores if any(scores) else ())
    return Checked([info for info in infos if info is not None], candidates, sorted(unchecked))


def _problem(bound: BoundState, classes: list[ClassInfo]) -> Problem:
    """The empty problem: resources the batch asks for, free capacity and allocatable per node."""
    resources = tuple(sorted({r for info in classes for r in info.facts.requests}))
    capacity = np.array([[node.allocatable.get(r, 0) for r in resources] for node in bound.nodes], dtype=np.int64)
    return Problem(
        resources=resources,
        free=list(map(tuple, bound.free_of(resources).tolist())),
        capacity=list(map(tuple, capacity.reshape(len(bound.nodes), len(resources)).tolist())),
        empty=frozenset(np.flatnonzero(bound.empty()).tolist()),
    )


def _pod_classes(build: ProblemBuilder, candidates: list[Candidates], gangs: list[GangInfo],
                 notes: list[str]) -> list[PodClass]:
    """One solver class per pod class, complete when built (gang, greedy rank, per-node cap, queue)."""
    classes = build.classes
    weights = priority_weights(classes, notes)
    gang_of = {a: g for g, gi in enumerate(gangs) for a in gi.classes}
    age = {g: k for k, g in enumerate(sorted(range(len(gangs)), key=lambda g: (gangs[g].created, gangs[g].key)))}
    keys = [_rank_key(info, age.get(gang_of[a]) if a in gang_of else None, bool(build.index.affinity_sets[a]))
            for a, info in enumerate(classes)]
    rank = {k: r for r, k in enumerate(sorted(set(keys)))}
    queues = queue_positions(classes)
    return [PodClass(
        count=len(info.pods),
        demand=tuple(info.facts.requests.get(r, 0) for r in build.problem.resources),
        weight=weights[info.priority],
        candidates=candidates[a].nodes,
        scores=candidates[a].scores,
        max_per_node=1 if info.sample.host_ports or _one_per_node(build, a) else None,
        gang=gang_of.get(a),
        rank=rank[keys[a]],
        queue=queues[a],
    ) for a, info in enumerate(classes)]


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
    if not min_resources:
        return ()
    free = np.maximum(index.free_of(tuple(r for r, _ in min_resources)), 0).sum(axis=0).tolist()
    return tuple(f"{r} {want} > {room} free" for (r, want), room in zip(min_resources, free) if want > room)


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


@dataclass(frozen=True, slots=True)
class SpreadDomains:
    """A spread's eligible nodes per domain, and each eligible node's domain (the same for every class with
    the same key, node rules and tolerations)."""

    nodes: dict[int, tuple[int, ...]]
    domain_of: np.ndarray  # per node: its eligible domain, NO_DOMAIN if not eligible


def emit_spread(build: ProblemBuilder, a: int, c: SpreadRule) -> None:
    s, info = c.spread, build.classes[a]
    pod = info.sample
    domains = _spread_domains(build, info, c)
    term = PodAffinityTerm(s.selector, frozenset({pod.namespace}), s.topology_key)
    existing: dict[int, int] = defaultdict(int)
    for i, k in build.bound.node_counts(term).items():
        d = int(domains.domain_of[i])
        if d != NO_DOMAIN:
            existing[d] += k
    build.problem.spreads.append(
        Spread(a, tuple(build.index.matching(term)), domains.nodes, dict(existing), s.max_skew, s.min_domains,
               None if s.hard else SOFT_SPREAD_WEIGHT, describe(c))
    )


def _spread_domains(build: ProblemBuilder, info: ClassInfo, c: SpreadRule) -> SpreadDomains:
    """Eligible nodes per domain: nodes with the key, passing node affinity and (if asked) taints; the same
    for every class with the same node rules and tolerations, so computed once for them."""
    s = c.spread
    key = (s.topology_key, s.honor_affinity and info.facts.node_rules, s.honor_taints and info.facts.tolerations)
    if key not in build.spread_domains:
        build.spread_domains[key] = _eligible_by_domain(build, info, c)
    return build.spread_domains[key]


def _eligible_by_domain(build: ProblemBuilder, info: ClassInfo, c: SpreadRule) -> SpreadDomains:
    s, bound = c.spread, build.bound
    eligible = np.ones(len(bound.nodes), dtype=bool)
    if s.honor_affinity:
        for rule in info.facts.node_rules:
            eligible &= bound.matching_mask(rule.predicate)
    if s.honor_taints:
        for taints, members in bound.taint_groups().items():
            if any(t.effect in ("NoSchedule", "NoExecute") and not tolerated(info.facts.tolerations, t) for t in taints):
                eligible[members] = False
    domain_of = np.where(eligible, bound.label(s.topology_key).codes, NO_DOMAIN)
    order = np.argsort(domain_of, kind="stable")
    ids = domain_of[order]
    starts = np.searchsorted(ids, np.arange(ids.max() + 1 if len(ids) else 0))
    ends = [*starts[1:].tolist(), len(ids)]
    members = {d: order[lo:hi] for d, (lo, hi) in enumerate(zip(starts.tolist(), ends)) if hi > lo}
    by_first_node = sorted(members, key=lambda d: members[d][0])  # domains by their first eligible node
    return SpreadDomains({d: tuple(members[d].tolist()) for d in by_first_node}, domain_of)


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
