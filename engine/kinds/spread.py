"""PodTopologySpread: `maxSkew` over the eligible domains of a topology key (DoNotSchedule hard,
ScheduleAnyway soft), eligible nodes honouring the pod's node affinity and, if asked, its taints."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..model.cluster import HARD_EFFECTS, Pod, PodAffinityTerm, SpreadConstraint, tolerated
from ..model.ir import Constraint, SpreadRule
from ..model.reasons import Code
from ..model.rejections import Rejection, Rejections
from ..planning.classes import ClassInfo
from ..solve.problem import NO_DOMAIN, Blocker, Check, Spread
from .base import Action, ClassLabels, ClusterEvent, Emit, Explain, ModelChange, ReadsPods, Requeue, Resource, Spot, Waiting
from .node_affinity import hard_rules
from .taints import tolerations

if TYPE_CHECKING:
    from ..model.view import View
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


class PodTopologySpread(ClassLabels, ReadsPods, Emit, Explain, Requeue):
    name, code = "PodTopologySpread", Code.TOPOLOGY
    events = (ClusterEvent(Resource.POD, Action.ADD | Action.UPDATE_POD_LABEL | Action.UPDATE_POD_TOLERATION
                           | Action.DELETE),
              ClusterEvent(Resource.NODE, Action.ADD | Action.DELETE | Action.UPDATE_NODE_LABEL
                           | Action.UPDATE_NODE_TAINT))
    checks = (Check.SPREAD,)

    def label_keys(self, rule_sets: list[tuple[Constraint, ...]], view: View) -> Iterable[frozenset[str] | None]:
        return (c.spread.selector.label_keys() for rules in rule_sets for c in rules if isinstance(c, SpreadRule))

    def filter(self, spec: ClassSpec, batch: Batch, out: Rejections) -> None:
        """Nodes without a hard constraint's key can never count in its domains (UnschedulableAndUnresolvable). For a
        pod asked about alone (every other pod bound in the view: preemption's trials), upstream's skew too: its
        domain's matching pods plus itself, less the fewest of any eligible domain, within maxSkew. In a batch the
        skew is the solver's rows' (other pods of the batch move the minimum)."""
        for c in spec.constraints:
            if isinstance(c, SpreadRule) and c.spread.hard:
                s = c.spread
                out.add(Rejection(self.name, (ERR_REASON_LABEL,), resolvable=False),
                        batch.view.nodes_with(s.topology_key, [None]))
                if batch.alone:
                    me = int(s.selector.matches(spec.sample.labels))
                    skewed = Counted.of(batch, spec, c).over(batch.view, out.nodes(), me, s)
                    out.add(Rejection(self.name, (ERR_REASON_SKEW,)), skewed)

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
    for i, k in build.view.node_counts(term).items():
        d = int(domains.domain_of[i])
        if d != NO_DOMAIN:
            existing[d] += k
    build.problem.spreads.append(
        Spread(a, tuple(build.matcher.matching(term)), domains.nodes, dict(existing), s.max_skew, s.min_domains,
               None if s.hard else SOFT_SPREAD_WEIGHT, describe(c))
    )


def _spread_domains(build: ProblemBuilder, info: ClassInfo, c: SpreadRule) -> SpreadDomains:
    return _domains(build.memo, build.view, info.constraints, c)


def _domains(memo: dict, view: View, constraints: tuple[Constraint, ...], c: SpreadRule) -> SpreadDomains:
    """Eligible nodes per domain: nodes with the key, passing node affinity and (if asked) taints; the same
    for every class with the same node rules and tolerations, so computed once for them."""
    s = c.spread
    rules, have = hard_rules(constraints), tolerations(constraints)
    key = (s.topology_key, s.honor_affinity and rules, s.honor_taints and have)
    shared = memo.setdefault(PodTopologySpread.name, {})
    if key not in shared:
        shared[key] = _eligible_by_domain(view, s.topology_key, rules if s.honor_affinity else (),
                                          have if s.honor_taints else None)
    return shared[key]


@dataclass(frozen=True, slots=True)
class Counted:
    """One hard spread's matching pods per eligible domain (`counts[position[d]]`) in the table, for a pod asked about
    alone: a view's changes are laid over them (`over`)."""

    domains: SpreadDomains
    term: PodAffinityTerm
    position: dict[int, int]
    counts: np.ndarray
    seen: dict[int, tuple[Pod, int]] = field(default_factory=dict)  # id(pod) -> the pod, whether the spread counts it
    nets: dict[int, tuple[tuple[Pod, ...], tuple[Pod, ...], int]] = field(default_factory=dict)  # node -> its changes, net

    @classmethod
    def of(cls, batch: Batch, spec: ClassSpec, c: SpreadRule) -> Counted:
        s, memo = c.spread, batch.memo.setdefault(PodTopologySpread.name + ":alone", {})
        if (spec.index, c) in memo:
            return memo[(spec.index, c)]
        domains = _domains(batch.memo, batch.view, spec.constraints, c)
        term = PodAffinityTerm(s.selector, frozenset({spec.sample.namespace}), s.topology_key)
        key = (id(domains), term)
        if key not in memo:
            position = {d: k for k, d in enumerate(domains.nodes)}
            counts = np.zeros(len(position), dtype=np.int64)
            for i, k in batch.view.base().node_counts(term).items():
                d = int(domains.domain_of[i])
                if d != NO_DOMAIN:
                    counts[position[d]] += k
            memo[key] = cls(domains, term, position, counts)
        memo[(spec.index, c)] = memo[key]
        return memo[key]

    def over(self, view: View, nodes: np.ndarray, me: int, s: SpreadConstraint) -> np.ndarray:
        """Of `nodes`, those in an eligible domain whose skew once the pod is there exceeds maxSkew, the view's pods
        gone and added counted: its domain's matching pods plus `me`, less the fewest in an eligible domain (0 when
        there are fewer eligible domains than minDomains). Nodes in no eligible domain are left to the filters that
        exclude them (node affinity, taints)."""
        view.reaching()  # the fewest, across every domain
        counts = self.counts
        moved = [(self.position[d], delta) for j, delta in self._net(view).items()
                 if (d := int(self.domains.domain_of[j])) != NO_DOMAIN and delta]
        if moved:
            counts = counts.copy()
            for k, delta in moved:
                counts[k] += delta
        if not len(counts):
            return np.zeros(0, dtype=np.int64)
        fewest = 0 if s.min_domains is not None and len(counts) < s.min_domains else int(counts.min())
        domain = self.domains.domain_of[nodes]
        eligible = nodes[domain != NO_DOMAIN]
        here = counts[[self.position[int(d)] for d in self.domains.domain_of[eligible]]]
        return eligible[here + me - fewest > s.max_skew]

    def _net(self, view: View) -> dict[int, int]:
        """Per node the view changes, its matching pods added less those gone (a node's changes are the same objects
        in every view derived from one another: each node's count is worked out once per change of it)."""
        out = {}
        for j in view.touched():
            added, gone = view.added_to(j), view.gone_from(j)
            known = self.nets.get(j)
            if known is None or known[0] is not added or known[1] is not gone:
                known = self.nets[j] = (added, gone, sum(map(self._matches, added)) - sum(map(self._matches, gone)))
            out[j] = known[2]
        return out

    def _matches(self, pod: Pod) -> int:
        """Whether the spread counts `pod`, asked once per pod (a stage's trials ask of the same pods again and
        again; the pod is kept with its answer, so its id stays its own)."""
        found = self.seen.get(id(pod))
        if found is None:
            found = self.seen[id(pod)] = (pod, int(self.term.matches(pod)))
        return found[1]


def _eligible_by_domain(view: View, topology_key: str, rules, have) -> SpreadDomains:
    eligible = np.ones(len(view.nodes), dtype=bool)
    for rule in rules:
        eligible &= view.matching_mask(rule.predicate)
    if have is not None:
        for taints, members in view.taint_groups().items():
            if any(t.effect in HARD_EFFECTS and not tolerated(have, t) for t in taints):
                eligible[members] = False
    domain_of = np.where(eligible, view.label(topology_key).codes, NO_DOMAIN)
    order = np.argsort(domain_of, kind="stable")
    ids = domain_of[order]
    starts = np.searchsorted(ids, np.arange(ids.max() + 1 if len(ids) else 0))
    ends = [*starts[1:].tolist(), len(ids)]
    by_domain = {d: order[lo:hi] for d, (lo, hi) in enumerate(zip(starts.tolist(), ends)) if hi > lo}
    by_first_node = sorted(by_domain, key=lambda d: by_domain[d][0])  # domains by their first eligible node
    return SpreadDomains({d: tuple(by_domain[d].tolist()) for d in by_first_node}, domain_of)


KIND = PodTopologySpread()
