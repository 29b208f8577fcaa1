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

from ..model.cluster import Pod
from ..model.ir import Constraint, PodProximity, PodTerm, Source
from ..model.reasons import Code
from ..model.rejections import Rejection, Rejections
from ..solve.problem import Blocker, Check, Colocation, Separation
from .base import (
    Action,
    ClassLabels,
    ClusterEvent,
    Emit,
    Explain,
    ModelChange,
    ReadsPods,
    Requeue,
    Resource,
    Score,
    ScorePart,
    Spot,
    Waiting,
)

if TYPE_CHECKING:
    from ..model.view import Counts, View
    from ..planning.classes import ClassInfo
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
    view: View
    sets: list[Terms]
    carriers: dict[Terms, list[int]] = field(default_factory=lambda: defaultdict(list))

    @classmethod
    def of(cls, batch: Batch) -> Series:
        memo = batch.memo
        if InterPodAffinity.name not in memo:
            sets = [tuple(c.term for c in required(rules, anti=False)) for rules in batch.rules]
            series = cls(batch.matcher, batch.view, sets)
            for a, terms in enumerate(sets):
                if terms:
                    series.carriers[terms].append(a)
            memo[InterPodAffinity.name] = series
        return memo[InterPodAffinity.name]

    def seeders(self, terms: Terms) -> list[int]:
        """Upstream: the first pod of a self-affine series may start anywhere while nothing matches yet."""
        if any(self.view.domains_matching(terms, t.topology_key) for t in terms):
            return []
        return [j for j in self.matcher.matching_all(terms) if j in self.carriers.get(terms, ())]

    def batch_can_support(self, a: int) -> bool:
        """Can anything in the batch satisfy class a's required affinity (else only bound pods can)?"""
        terms = self.sets[a]
        return bool(set(self.matcher.matching_all(terms)) - {a} or self.seeders(terms))


class InterPodAffinity(ClassLabels, ReadsPods, Score, Emit, Explain, Requeue):
    name, code = "InterPodAffinity", Code.TOPOLOGY
    events = (ClusterEvent(Resource.POD, Action.ADD | Action.UPDATE_POD_LABEL | Action.DELETE),
              ClusterEvent(Resource.NODE, Action.ADD | Action.UPDATE_NODE_LABEL),
              ClusterEvent(Resource.NAMESPACE, Action.ADD | Action.UPDATE))
    checks = (Check.SEPARATION, Check.AFFINITY, Check.ONE_PER_NODE)

    def label_keys(self, rule_sets: list[tuple[Constraint, ...]], view: View) -> Iterable[frozenset[str] | None]:
        """The batch's pod terms, and bound pods' anti-affinity terms (checked against incoming pods)."""
        terms: set[PodTerm] = {term for term, _ in view.anti_domains()}  # (each distinct term once)
        terms.update(c.term for rules in rule_sets for c in rules if isinstance(c, PodProximity))
        return (t.label_keys() for t in terms)

    def filter(self, spec: ClassSpec, batch: Batch, out: Rejections) -> None:
        """Upstream's Filter on the view (its pods gone and added counted): existing pods' anti-affinity, then the
        class's own anti-affinity, then its affinity. Affinity passes only in domains with support, unless the batch
        itself may support it (then only the label is asked; the solver's rows decide) or, for a pod asked about
        alone, nothing anywhere matches and the pod matches its own terms (upstream's first pod of a series)."""
        view, pod, asked = batch.view, spec.sample, out.asked
        for key, repelled in _repelled(batch, spec).items():
            out.add(Rejection(self.name, (ERR_REASON_EXISTING,)),
                    view.nodes_where(key, asked, repelled.holds, repelled.among))
        own: dict[tuple[str, Source | None], list[Counts]] = defaultdict(list)
        for c in required(spec.constraints, anti=True):
            own[(c.term.topology_key, _policy(c.source))].append(view.domain_counts(c.term))
        for (key, source), counted in own.items():
            reason = ERR_REASON_ANTI + (source.cite if source else "")
            out.add(Rejection(self.name, (reason,), source=source),
                    view.nodes_where(key, asked, _any_positive(counted), _keys(counted)))
        rules = required(spec.constraints, anti=False)
        terms = tuple(c.term for c in rules)
        supported = bool(terms) and (_first_of_series(view, pod, terms) if batch.alone
                                     else Series.of(batch).batch_can_support(spec.index))
        for c in rules:
            key = c.term.topology_key
            rejection = Rejection(self.name, (ERR_REASON_AFFINITY + c.source.cite,), resolvable=False,
                                  source=_policy(c.source))
            out.add(rejection, view.nodes_with(key, [None]))
            if not supported:
                out.add(rejection, view.nodes_where(key, asked, _unsupported(view.counts_per(key, terms))))

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
        view = batch.view
        parts = []
        for c in info.constraints:
            if isinstance(c, PodProximity) and c.weight is not None and (domains := view.domains_with(c.term)):
                kind = "anti-affinity" if c.anti else "affinity"
                key = c.term.topology_key
                parts.append(ScorePart(f"preferred pod {kind} to running pods {c.term.selector} per {key} [{c.source}]",
                                       np.where(view.label(key).mask(domains)[candidates],
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
        if rule.subject == spot.class_index:  # type: ignore[attr-defined]
            return f"node(s) are in a domain holding pods of this batch that its {rule.why} excludes"  # type: ignore[attr-defined]
        return f"node(s) are in a domain holding pods of this batch whose {rule.why} excludes it"  # type: ignore[attr-defined]


def _repelled(batch: Batch, spec: ClassSpec) -> dict[str, Repelled]:
    """Per topology key, the pods' required anti-affinity terms the class's pods match (the table's, asked once per
    class, and those of pods the view adds), with how many pods hold each per domain."""
    view, pod = batch.view, spec.sample
    memo = batch.memo.setdefault(InterPodAffinity.name + ":repelled", {})
    if spec.index not in memo:
        memo[spec.index] = [(t, held) for t, held in view.base().anti_domains() if t.matches(pod)]
    terms: dict[str, dict[PodTerm, frozenset[str]]] = defaultdict(dict)
    for t, held in memo[spec.index]:
        terms[t.topology_key][t] = held
    arriving = view.arriving_terms()
    if view.far_terms():  # pods added elsewhere in a domain may repel it
        view.reaching()
    for t in arriving:
        if t.matches(pod):
            terms[t.topology_key].setdefault(t, frozenset())
    if not terms:
        return {}
    holders = view.anti_holders()
    for key in terms:
        view.reaching(key)
    return {key: Repelled(held, holders) for key, held in terms.items()}


@dataclass(frozen=True, slots=True)
class Repelled:
    """One topology key's anti-affinity terms a class's pods match, each with the domains its table's holders are
    in, and how many pods hold each term per domain in the view."""

    terms: dict[PodTerm, frozenset[str]]
    holders: Counts

    def holds(self, value: str) -> bool:
        return any(self.holders.get((t, value), 0) > 0 for t in self.terms)

    def among(self) -> set[str]:
        """The domains that may hold one: the table's and those the view's changes touch."""
        return {v for values in self.terms.values() for v in values} | {v for t, v in self.holders.touched()
                                                                         if t in self.terms}


def _any_positive(counted: list[Counts]) -> Callable[[str], bool]:
    return lambda value: any(counts.get(value, 0) > 0 for counts in counted)


def _unsupported(support: Counts) -> Callable[[str], bool]:
    return lambda value: support.get(value, 0) <= 0


def _keys(counted: list[Counts]) -> Callable[[], set[str]]:
    return lambda: {k for counts in counted for k in counts}


def _first_of_series(view: View, pod: Pod, terms: Terms) -> bool:
    """Upstream's exception for a pod asked about alone: no pod anywhere matches all of its terms (on a node with one
    of their keys), and it matches them itself: it may start the series wherever the keys are."""
    view.reaching()  # anywhere
    return all(t.matches(pod) for t in terms) and not any(view.counts_per(t.topology_key, terms).positive()
                                                           for t in terms)


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
            supported = partitions.ids(p, build.view.domains_matching(terms, t.topology_key))
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
