"""InterPodAffinity: required and preferred pod affinity and anti-affinity within topology domains (and a
policy's `keep with` / `separate from`), against bound pods (static filter, scores) and within the batch
(colocation and separation rows).

Anti-affinity is checked both ways (incoming against existing, existing pods' terms against incoming) and
among the batch; affinity is satisfied by another matching pod in the same domain or, while nothing anywhere
matches yet, by the pod matching its own term (upstream's first pod of a self-affine series).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..ir import Constraint, PodProximity, PodTerm, Source
from ..model import Pod
from ..rejections import Rejection, Rejections
from ..solve.problem import Blocker, Check, Colocation, Separation
from .base import Action, ClusterEvent, Kind, ModelChange, Moves, Resource, ScorePart, Spot, Waiting
from .context import domain_net, label_of, matched_by, one_node_domains

if TYPE_CHECKING:
    from ..classes import ClassInfo
    from ..index import BoundState
    from .context import Batch, ClassMatcher, ClassSpec, ProblemBuilder

ERR_REASON_EXISTING = "node(s) didn't satisfy existing pods anti-affinity rules"
ERR_REASON_ANTI = "node(s) didn't match pod anti-affinity rules"
ERR_REASON_AFFINITY = "node(s) didn't match pod affinity rules"

Terms = tuple[PodTerm, ...]


def required(constraints: tuple[Constraint, ...], anti: bool) -> list[PodProximity]:
    return [c for c in constraints if isinstance(c, PodProximity) and c.weight is None and c.anti == anti]


def describe(rule: PodProximity) -> str:
    """The rule in words, with where it came from: what explanations say blocked a pod."""
    kind = ("preferred " if rule.weight is not None else "required ") + ("anti-affinity" if rule.anti else "affinity")
    return f"pod {kind} to pods {rule.term.selector} per {rule.term.topology_key} [{rule.source}]"


def _policy(source: Source) -> Source | None:
    return source if source.policy else None


@dataclass(slots=True)
class Series:
    """The batch's required affinity: each class's term set, the classes carrying each set, and who may
    support or start a series. Upstream counts a pod as support only if it matches all of the incoming
    pod's required terms, so classes are grouped by their whole term set."""

    matcher: ClassMatcher
    index: BoundState
    sets: list[Terms]
    carriers: dict[Terms, list[int]] = field(default_factory=lambda: defaultdict(list))

    @classmethod
    def of(cls, batch: Batch) -> Series:
        memo = batch.memo
        if InterPodAffinity.name not in memo:
            sets = [tuple(c.term for c in required(rules, anti=False)) for rules in batch.rules]
            series = cls(batch.matcher, batch.index, sets)
            for a, terms in enumerate(sets):
                if terms:
                    series.carriers[terms].append(a)
            memo[InterPodAffinity.name] = series
        return memo[InterPodAffinity.name]

    def seeders(self, terms: Terms) -> list[int]:
        """Upstream: the first pod of a self-affine series may start anywhere while nothing matches yet."""
        if any(self.index.domains_matching(terms, t.topology_key) for t in terms):
            return []
        return [j for j in self.matcher.matching_all(terms) if j in self.carriers.get(terms, ())]

    def batch_can_support(self, a: int) -> bool:
        """Can anything in the batch satisfy class a's required affinity (else only bound pods can)?"""
        terms = self.sets[a]
        return bool(set(self.matcher.matching_all(terms)) - {a} or self.seeders(terms))


class InterPodAffinity(Kind):
    name = "InterPodAffinity"
    events = (ClusterEvent(Resource.POD, Action.ADD | Action.UPDATE_POD_LABEL | Action.DELETE),
              ClusterEvent(Resource.NODE, Action.ADD | Action.UPDATE_NODE_LABEL),
              ClusterEvent(Resource.NAMESPACE, Action.ADD | Action.UPDATE))
    checks = (Check.SEPARATION, Check.AFFINITY, Check.ONE_PER_NODE)

    def label_keys(self, rule_sets: list[tuple[Constraint, ...]], index: BoundState) -> Iterable[frozenset[str] | None]:
        """The batch's pod terms, and bound pods' anti-affinity terms (checked against incoming pods)."""
        terms: set[PodTerm] = {term for term, _ in index.anti_domains()}  # (each distinct term once)
        terms.update(c.term for rules in rule_sets for c in rules if isinstance(c, PodProximity))
        return (t.label_keys() for t in terms)

    def filter(self, spec: ClassSpec, batch: Batch, out: Rejections) -> None:
        """Existing pods' anti-affinity, then the class's own anti-affinity, then its affinity (only domains
        with bound support pass, unless the batch itself may support it: then only the label is asked)."""
        index, pod = batch.index, spec.sample
        existing: dict[str, set[str]] = defaultdict(set)
        for term, held in index.anti_domains():
            if held and term.matches(pod):
                existing[term.topology_key] |= held
        for key, values in existing.items():
            out.add(Rejection(self.name, (ERR_REASON_EXISTING,)), index.nodes_with(key, values))
        own: dict[tuple[str, Source | None], set[str]] = defaultdict(set)
        for c in required(spec.constraints, anti=True):
            own[(c.term.topology_key, _policy(c.source))] |= index.domains_with(c.term)
        for (key, source), values in own.items():
            reason = ERR_REASON_ANTI + (source.cite if source else "")
            out.add(Rejection(self.name, (reason,), source=source), index.nodes_with(key, values))
        rules = required(spec.constraints, anti=False)
        terms = tuple(c.term for c in rules)
        supported = Series.of(batch).batch_can_support(spec.a) if terms else False
        for c in rules:
            key = c.term.topology_key
            nodes = index.nodes_with(key, [None]) if supported else index.nodes_outside(
                key, index.domains_matching(terms, key))
            out.add(Rejection(self.name, (ERR_REASON_AFFINITY + c.source.cite,), resolvable=False,
                              source=_policy(c.source)), nodes)

    def after(self, spec: ClassSpec, batch: Batch, i: int, moves: Moves) -> Rejection | None:
        """Upstream's Filter after RemovePod/AddPod: the three checks of `filter` on node i, with the pods' counts per
        domain moved by `moves` (a victim gone may clear anti-affinity, or take away the support affinity needs)."""
        counts = AfterCounts.of(batch)
        rules = counts.rules_of(spec)
        return (_existing_after(counts, rules, spec, i, moves) or _anti_after(counts, rules, i, moves)
                or _affinity_after(counts, rules, spec, i, moves))

    def wide(self, spec: ClassSpec, batch: Batch, moves: Moves) -> bool:
        """The class has required affinity (support anywhere counts: upstream's first pod of a series), or an
        anti-affinity term of its own, of a bound pod or of an arriving one that repels it is over a domain wider than
        one node."""
        counts = AfterCounts.of(batch)
        rules = counts.rules_of(spec)
        if rules.affinity:
            return True
        terms = [*(c.term for c in rules.anti), *rules.repelled_by, *(t for t in moves.come_terms() if counts.repels(t, spec))]
        return any(not one_node_domains(batch.index, t.topology_key) for t in terms)

    def sways(self, spec: ClassSpec, batch: Batch, pod: Pod) -> bool:
        """Its anti-affinity may repel the class's pods, or one of the class's required terms counts it."""
        rules = AfterCounts.of(batch).rules_of(spec)
        return (any(t.matches(spec.sample) for t in pod.anti_affinity_required)
                or any(c.term.matches(pod) for c in (*rules.anti, *rules.affinity)))

    def hint(self, waiting: Waiting, change: ModelChange) -> bool:
        """A pod appearing, leaving or relabelled helps only if one of the pod's required terms counts it (support
        arriving, a blocker leaving) or its own anti-affinity barred the pod; nodes and namespaces may always."""
        changed = [p for p in (change.old, change.new) if isinstance(p, Pod)]
        if not changed:
            return True
        pod, terms = waiting.pod, [c.term for c in waiting.constraints if isinstance(c, PodProximity) and c.weight is None]
        return any(t.matches(p) for p in changed for t in terms) or any(
            t.matches(pod) for p in changed for t in p.anti_affinity_required)

    def score(self, info: ClassInfo, candidates: np.ndarray, batch: Batch) -> list[ScorePart]:
        """Preferred (anti-)affinity towards bound pods: points per candidate in a domain hosting them."""
        index = batch.index
        parts = []
        for c in info.constraints:
            if isinstance(c, PodProximity) and c.weight is not None and (domains := index.domains_with(c.term)):
                kind = "anti-affinity" if c.anti else "affinity"
                key = c.term.topology_key
                parts.append(ScorePart(f"preferred pod {kind} to running pods {c.term.selector} per {key} [{c.source}]",
                                       np.where(index.label(key).mask(domains)[candidates],
                                                -c.weight if c.anti else c.weight, 0)))
        return parts

    def emit(self, build: ProblemBuilder) -> None:
        series = Series.of(build.batch)
        for a, terms in enumerate(series.sets):
            if terms:
                build.followers.add(a)  # placed after their supporters by the starting plans
            cls = build.problem.classes[a]
            if cls.max_per_node is None and _one_per_node(build, a):
                cls.max_per_node = 1
        _emit_required(build, series)
        for a, info in build.checked():
            for c in info.constraints:
                if isinstance(c, PodProximity):
                    _emit_proximity(build, a, c)

    def explain(self, blocker: Blocker, spot: Spot) -> str:
        if blocker.check is Check.ONE_PER_NODE:
            return "node(s) already run a pod of this batch that its own required anti-affinity excludes (one per node)"
        rule = blocker.rule
        if blocker.check is Check.AFFINITY:
            return f"node(s) had no pod in their domain that its {rule.why} needs"  # type: ignore[attr-defined]
        if rule.a == spot.c:  # type: ignore[attr-defined]
            return f"node(s) are in a domain holding pods of this batch that its {rule.why} excludes"  # type: ignore[attr-defined]
        return f"node(s) are in a domain holding pods of this batch whose {rule.why} excludes it"  # type: ignore[attr-defined]


@dataclass(slots=True)
class AfterCounts:
    """What `after` counts of the bound pods, per batch and built as asked: holders of each anti-affinity term per
    domain, pods matching a term set per domain, and per class the bound pods' anti terms that match its pods."""

    index: BoundState
    holders: dict[tuple[PodTerm, str], int]
    matching: dict[tuple[Terms, str], dict[str, int]] = field(default_factory=dict)
    rules: dict[int, ClassRules] = field(default_factory=dict)
    repelling: dict[tuple[int, PodTerm], bool] = field(default_factory=dict)

    @classmethod
    def of(cls, batch: Batch) -> AfterCounts:
        key = InterPodAffinity.name + ":after"
        if key not in batch.memo:
            holders: dict[tuple[PodTerm, str], int] = defaultdict(int)
            for term, i in batch.index.anti_terms:
                value = label_of(batch.index, i, term.topology_key)
                if value is not None:
                    holders[(term, value)] += 1
            batch.memo[key] = cls(batch.index, dict(holders))
        return batch.memo[key]

    def repels(self, term: PodTerm, spec: ClassSpec) -> bool:
        """Whether `term` (an arriving pod's anti-affinity) matches the class's pods, asked once."""
        if (spec.a, term) not in self.repelling:
            self.repelling[(spec.a, term)] = term.matches(spec.sample)
        return self.repelling[(spec.a, term)]

    def rules_of(self, spec: ClassSpec) -> ClassRules:
        if spec.a not in self.rules:
            self.rules[spec.a] = ClassRules([t for t, _ in self.index.anti_domains() if t.matches(spec.sample)],
                                            required(spec.constraints, anti=True), required(spec.constraints, anti=False))
        return self.rules[spec.a]

    def per_domain(self, terms: Terms, key: str) -> dict[str, int]:
        """Bound pods matching every one of `terms`, per value of `key`."""
        if (terms, key) not in self.matching:
            out: dict[str, int] = defaultdict(int)
            for i, p in self.index.matching(terms[0]):
                value = label_of(self.index, i, key)
                if value is not None and all(t.matches(p) for t in terms[1:]):
                    out[value] += 1
            self.matching[(terms, key)] = dict(out)
        return self.matching[(terms, key)]


@dataclass(frozen=True, slots=True)
class ClassRules:
    """One class's part in `after`: the bound pods' anti-affinity terms that match its pods, its own required
    anti-affinity and affinity."""

    repelled_by: list[PodTerm]
    anti: list[PodProximity]
    affinity: list[PodProximity]


def _existing_after(counts: AfterCounts, rules: ClassRules, spec: ClassSpec, i: int, moves: Moves) -> Rejection | None:
    """Some pod in node i's domain, bound and staying or arriving, has a required anti-affinity term the pod matches."""
    index = counts.index
    arriving = [t for t in moves.come_terms() if t not in rules.repelled_by and counts.repels(t, spec)]
    for term in [*rules.repelled_by, *arriving]:
        value = label_of(index, i, term.topology_key)
        if value is None:
            continue
        held = counts.holders.get((term, value), 0) + domain_net(index, moves, term.topology_key, i, _holding(term))
        if held > 0:
            return Rejection(InterPodAffinity.name, (ERR_REASON_EXISTING,))
    return None


def _holding(term: PodTerm) -> Callable[[Pod], int]:
    return lambda pod: pod.anti_affinity_required.count(term)


def _anti_after(counts: AfterCounts, rules: ClassRules, i: int, moves: Moves) -> Rejection | None:
    """The pod's own required anti-affinity: no pod it repels in node i's domain, once the moves happened."""
    index = counts.index
    for c in rules.anti:
        key = c.term.topology_key
        value = label_of(index, i, key)
        if value is None:
            continue
        there = counts.per_domain((c.term,), key).get(value, 0) + domain_net(index, moves, key, i, matched_by(c.term))
        if there > 0:
            source = _policy(c.source)
            return Rejection(InterPodAffinity.name, (ERR_REASON_ANTI + (source.cite if source else ""),), source=source)
    return None


def _affinity_after(counts: AfterCounts, rules: ClassRules, spec: ClassSpec, i: int, moves: Moves) -> Rejection | None:
    """The pod's required affinity: support in node i's domain of each term once the moves happened, or (upstream's
    first pod of a series) nothing matching anywhere and the pod matching its own terms."""
    if not rules.affinity:
        return None
    index, terms = counts.index, tuple(c.term for c in rules.affinity)

    def matches(p: Pod) -> int:
        return int(all(t.matches(p) for t in terms))

    for c in rules.affinity:
        key = c.term.topology_key
        value = label_of(index, i, key)
        there = 0 if value is None else counts.per_domain(terms, key).get(value, 0) + domain_net(
            index, moves, key, i, matches)
        if there > 0:
            continue
        keyed = [(j, p, -1) for j, p in moves.gone_pods()] + [(j, p, 1) for j, p in moves.come_pods()]
        anywhere = sum(counts.per_domain(terms, key).values()) + sum(
            sign * matches(p) for j, p, sign in keyed if label_of(index, j, key) is not None)
        if value is None or anywhere > 0 or not matches(spec.sample):
            return Rejection(InterPodAffinity.name, (ERR_REASON_AFFINITY + c.source.cite,), resolvable=False,
                             source=_policy(c.source))
    return None


def _self_anti_per_node(build: ProblemBuilder, a: int, c: PodProximity) -> bool:
    """A hard anti-affinity term that matches its own class on a one-node-per-domain key (hostname):
    simply at most one such pod per node."""
    if not (c.anti and c.weight is None) or a not in build.matcher.matching(c.term):
        return False
    return build.partitions.singleton(build.partitions.of(c.term.topology_key))


def _one_per_node(build: ProblemBuilder, a: int) -> bool:
    return any(isinstance(c, PodProximity) and _self_anti_per_node(build, a, c) for c in build.classes[a].constraints)


def _seed_groups(matched: dict[Terms, list[int]]) -> dict[Terms, int]:
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


def _emit_required(build: ProblemBuilder, series: Series) -> None:
    """Required pod affinity, per term set: carriers need support in each of their terms' domains."""
    matcher, partitions = build.matcher, build.partitions
    seed_groups = _seed_groups({ts: matcher.matching_all(ts) for ts in series.carriers if series.seeders(ts)})
    for terms, members in series.carriers.items():
        sup, seed = matcher.matching_all(terms), series.seeders(terms)
        if set(sup) <= set(members) and len(members) == 1 and not seed:
            continue  # nothing in the batch can help: the static filter confined it to bound support
        chained = frozenset(j for j in sup if series.sets[j])
        rules = {c.term: c for c in required(build.classes[members[0]].constraints, anti=False)}
        for t in terms:
            p = partitions.of(t.topology_key)
            supported = partitions.ids(p, build.index.domains_matching(terms, t.topology_key))
            build.problem.colocations.append(
                Colocation(p, tuple(members), tuple(sup), supported, tuple(seed), chained,
                           seed_group=seed_groups.get(terms, -1), why=describe(rules[t]))
            )


def _emit_proximity(build: ProblemBuilder, a: int, c: PodProximity) -> None:
    """Anti-affinity (hard or soft) and soft affinity between classes; hard affinity is per term set."""
    if not c.anti and c.weight is None:
        return  # _emit_required
    p = build.partitions.of(c.term.topology_key)
    matching = build.matcher.matching(c.term)
    if not c.anti:
        sup = tuple(j for j in matching if j != a)
        if sup:
            build.problem.colocations.append(Colocation(p, (a,), sup, weight=c.weight, why=describe(c)))
        return
    others = tuple(o for o in matching if not (o == a and _self_anti_per_node(build, a, c)))
    if others:
        build.problem.separations.append(Separation(p, a, others, c.weight, describe(c)))


KIND = InterPodAffinity()
