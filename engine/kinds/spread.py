"""PodTopologySpread: `maxSkew` over the eligible domains of a topology key (DoNotSchedule hard,
ScheduleAnyway soft), eligible nodes honouring the pod's node affinity and, if asked, its taints."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..classes import ClassInfo
from ..ir import Constraint, SpreadRule
from ..model import HARD_EFFECTS, Pod, PodAffinityTerm, tolerated
from ..rejections import Rejection, Rejections
from ..solve.problem import NO_DOMAIN, Blocker, Check, Spread
from .base import Action, ClusterEvent, Kind, ModelChange, Moves, Resource, Spot, Waiting
from .node_affinity import hard_rules
from .taints import tolerations

if TYPE_CHECKING:
    from ..index import BoundState
    from .context import Batch, ClassSpec, ProblemBuilder

ERR_REASON_SKEW = "node(s) didn't match pod topology spread constraints"
ERR_REASON_LABEL = "node(s) didn't match pod topology spread constraints (missing required label)"
SOFT_SPREAD_WEIGHT = 10  # per unit of skew, for ScheduleAnyway constraints


def describe(rule: SpreadRule) -> str:
    s = rule.spread
    return f"topology spread maxSkew {s.max_skew} per {s.topology_key} over pods {s.selector} [{rule.source}]"


@dataclass(frozen=True, slots=True)
class SpreadDomains:
    """A spread's eligible nodes per domain, and each eligible node's domain (the same for every class with
    the same key, node rules and tolerations)."""

    nodes: dict[int, tuple[int, ...]]
    domain_of: np.ndarray  # per node: its eligible domain, NO_DOMAIN if not eligible


class PodTopologySpread(Kind):
    name = "PodTopologySpread"
    events = (ClusterEvent(Resource.POD, Action.ADD | Action.UPDATE_POD_LABEL | Action.UPDATE_POD_TOLERATION
                           | Action.DELETE),
              ClusterEvent(Resource.NODE, Action.ADD | Action.DELETE | Action.UPDATE_NODE_LABEL
                           | Action.UPDATE_NODE_TAINT))
    checks = (Check.SPREAD,)

    def label_keys(self, rule_sets: list[tuple[Constraint, ...]], index: BoundState) -> Iterable[frozenset[str] | None]:
        return (c.spread.selector.label_keys() for rules in rule_sets for c in rules if isinstance(c, SpreadRule))

    def filter(self, spec: ClassSpec, batch: Batch, out: Rejections) -> None:
        """Nodes without a hard constraint's key can never count in its domains (UnschedulableAndUnresolvable)."""
        for c in spec.constraints:
            if isinstance(c, SpreadRule) and c.spread.hard:
                out.add(Rejection(self.name, (ERR_REASON_LABEL,), resolvable=False),
                        batch.index.nodes_with(c.spread.topology_key, [None]))

    def after(self, spec: ClassSpec, batch: Batch, i: int, moves: Moves) -> Rejection | None:
        """Upstream's Filter after RemovePod/AddPod: every hard spread's skew on node i, with the leaving and arriving
        pods the spread counts moved out of and into their domains."""
        for c in spec.constraints:
            if isinstance(c, SpreadRule) and c.spread.hard:
                s = c.spread
                skew = Counted.of(batch, spec, c).skew(i, moves, int(s.selector.matches(spec.sample.labels)),
                                                        s.min_domains)
                if skew is not None and skew > s.max_skew:
                    return Rejection(self.name, (ERR_REASON_SKEW,))
        return None

    def wide(self, spec: ClassSpec, batch: Batch, moves: Moves) -> bool:
        return any(isinstance(c, SpreadRule) and c.spread.hard for c in spec.constraints)

    def sways(self, spec: ClassSpec, batch: Batch, pod: Pod) -> bool:
        return pod.namespace == spec.sample.namespace and any(
            isinstance(c, SpreadRule) and c.spread.hard and c.spread.selector.matches(pod.labels) for c in spec.constraints)

    def hint(self, waiting: Waiting, change: ModelChange) -> bool:
        """A pod appearing, leaving or changing helps only if a hard spread of the pod counts it; node changes may
        always (domains come and go)."""
        changed = [p for p in (change.old, change.new) if isinstance(p, Pod)]
        if not changed:
            return True
        namespace = waiting.pod.namespace
        hard = [c.spread for c in waiting.constraints if isinstance(c, SpreadRule) and c.spread.hard]
        return any(p.namespace == namespace and s.selector.matches(p.labels) for p in changed for s in hard)

    def emit(self, build: ProblemBuilder) -> None:
        for a, info in build.checked():
            for c in info.constraints:
                if isinstance(c, SpreadRule):
                    _emit(build, a, info, c)

    def explain(self, blocker: Blocker, spot: Spot) -> str:
        return f"node(s) would break its {blocker.rule.why} in this batch's plan"  # type: ignore[attr-defined]


def _emit(build: ProblemBuilder, a: int, info: ClassInfo, c: SpreadRule) -> None:
    s, pod = c.spread, info.sample
    domains = _spread_domains(build, info, c)
    term = PodAffinityTerm(s.selector, frozenset({pod.namespace}), s.topology_key)
    existing: dict[int, int] = defaultdict(int)
    for i, k in build.index.node_counts(term).items():
        d = int(domains.domain_of[i])
        if d != NO_DOMAIN:
            existing[d] += k
    build.problem.spreads.append(
        Spread(a, tuple(build.matcher.matching(term)), domains.nodes, dict(existing), s.max_skew, s.min_domains,
               None if s.hard else SOFT_SPREAD_WEIGHT, describe(c))
    )


def _spread_domains(build: ProblemBuilder, info: ClassInfo, c: SpreadRule) -> SpreadDomains:
    return _domains(build.memo, build.index, info.constraints, c)


def _domains(memo: dict, index: BoundState, constraints: tuple[Constraint, ...], c: SpreadRule) -> SpreadDomains:
    """Eligible nodes per domain: nodes with the key, passing node affinity and (if asked) taints; the same
    for every class with the same node rules and tolerations, so computed once for them."""
    s = c.spread
    rules, have = hard_rules(constraints), tolerations(constraints)
    key = (s.topology_key, s.honor_affinity and rules, s.honor_taints and have)
    shared = memo.setdefault(PodTopologySpread.name, {})
    if key not in shared:
        shared[key] = _eligible_by_domain(index, s.topology_key, rules if s.honor_affinity else (),
                                          have if s.honor_taints else None)
    return shared[key]


@dataclass(frozen=True, slots=True)
class Counted:
    """One hard spread's bound matching pods per eligible domain (`counts[position[d]]`), for `after`."""

    domains: SpreadDomains
    term: PodAffinityTerm
    position: dict[int, int]
    counts: np.ndarray

    @classmethod
    def of(cls, batch: Batch, spec: ClassSpec, c: SpreadRule) -> Counted:
        s, memo = c.spread, batch.memo.setdefault(PodTopologySpread.name + ":after", {})
        if (spec.a, c) in memo:
            return memo[(spec.a, c)]
        domains = _domains(batch.memo, batch.index, spec.constraints, c)
        term = PodAffinityTerm(s.selector, frozenset({spec.sample.namespace}), s.topology_key)
        key = (id(domains), term)
        if key not in memo:
            position = {d: k for k, d in enumerate(domains.nodes)}
            counts = np.zeros(len(position), dtype=np.int64)
            for i, k in batch.index.node_counts(term).items():
                d = int(domains.domain_of[i])
                if d != NO_DOMAIN:
                    counts[position[d]] += k
            memo[key] = cls(domains, term, position, counts)
        memo[(spec.a, c)] = memo[key]
        return memo[key]

    def skew(self, i: int, moves: Moves, me: int, min_domains: int | None) -> int | None:
        """Upstream's skew on node i once `moves` happened: its domain's matching pods plus the pod itself, less
        the fewest in an eligible domain (0 when there are fewer eligible domains than `min_domains`); None when
        node i is in no eligible domain."""
        d = int(self.domains.domain_of[i])
        if d == NO_DOMAIN:
            return None
        counts = self.counts
        moved = [(self.position[dj], moves.net(j, lambda p: int(self.term.matches(p))))
                 for j in moves.touched() if (dj := int(self.domains.domain_of[j])) != NO_DOMAIN]
        if any(delta for _, delta in moved):
            counts = counts.copy()
            for k, delta in moved:
                counts[k] += delta
        fewest = 0 if not len(counts) or (min_domains is not None and len(counts) < min_domains) else int(counts.min())
        return int(counts[self.position[d]]) + me - fewest


def _eligible_by_domain(index: BoundState, topology_key: str, rules, have) -> SpreadDomains:
    eligible = np.ones(len(index.nodes), dtype=bool)
    for rule in rules:
        eligible &= index.matching_mask(rule.predicate)
    if have is not None:
        for taints, members in index.taint_groups().items():
            if any(t.effect in HARD_EFFECTS and not tolerated(have, t) for t in taints):
                eligible[members] = False
    domain_of = np.where(eligible, index.label(topology_key).codes, NO_DOMAIN)
    order = np.argsort(domain_of, kind="stable")
    ids = domain_of[order]
    starts = np.searchsorted(ids, np.arange(ids.max() + 1 if len(ids) else 0))
    ends = [*starts[1:].tolist(), len(ids)]
    by_domain = {d: order[lo:hi] for d, (lo, hi) in enumerate(zip(starts.tolist(), ends)) if hi > lo}
    by_first_node = sorted(by_domain, key=lambda d: by_domain[d][0])  # domains by their first eligible node
    return SpreadDomains({d: tuple(by_domain[d].tolist()) for d in by_first_node}, domain_of)


KIND = PodTopologySpread()
