"""CountLimit (ours, from a policy's `at most N per DOMAIN`): every topology domain hosting the pod holds at
most N pods matching the rule's pod set, bound ones and itself included."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..ir import Constraint, Source
from ..ir import CountLimit as Limit_  # the rule; this module's kind is CountLimitKind
from ..rejections import Rejection, Rejections
from ..solve.problem import Blocker, Check, Limit
from .base import Action, ClusterEvent, Kind, Moves, Resource, Spot
from .context import domain_net, label_of, matched_by, one_node_domains

if TYPE_CHECKING:
    from ..index import BoundState
    from ..model import Pod
    from .context import Batch, ClassSpec, ProblemBuilder


def describe(rule: Limit_) -> str:
    return f"at most {rule.most} per {rule.term.topology_key} of pods {rule.term.selector} [{rule.source}]"


def full(key: str, most: int, source: str) -> str:
    return f"node(s) are in a {key} domain that already holds the limit of {most} pod(s) ({source})"


class CountLimitKind(Kind):
    name = "CountLimit"
    events = (ClusterEvent(Resource.POD, Action.DELETE | Action.UPDATE_POD_LABEL),
              ClusterEvent(Resource.NODE, Action.ADD | Action.UPDATE_NODE_LABEL))
    checks = (Check.LIMIT,)

    def label_keys(self, rule_sets: list[tuple[Constraint, ...]], index: BoundState) -> Iterable[frozenset[str] | None]:
        return (c.term.label_keys() for rules in rule_sets for c in rules if isinstance(c, Limit_))

    def filter(self, spec: ClassSpec, batch: Batch, out: Rejections) -> None:
        """Domains whose bound pods already hold the limit (counting the pod itself when the rule matches it)."""
        blocked: dict[tuple[str, int, Source], set[str]] = defaultdict(set)
        for c in spec.constraints:
            if isinstance(c, Limit_):
                me = 1 if c.term.matches(spec.sample) else 0
                held = {v for v, k in batch.index.domain_counts(c.term).items() if k + me > c.most}
                if held:
                    blocked[(c.term.topology_key, c.most, c.source)] |= held
        for (key, most, source), values in blocked.items():
            out.add(Rejection(self.name, (full(key, most, str(source)),), source=source),
                    batch.index.nodes_with(key, values))

    def after(self, spec: ClassSpec, batch: Batch, i: int, moves: Moves) -> Rejection | None:
        """Node i's domain against each limit once `moves` happened (a victim gone frees one of the N places)."""
        index = batch.index
        for c in spec.constraints:
            if isinstance(c, Limit_) and (value := label_of(index, i, c.term.topology_key)) is not None:
                held = index.domain_counts(c.term).get(value, 0) + domain_net(
                    index, moves, c.term.topology_key, i, matched_by(c.term))
                if held + c.term.matches(spec.sample) > c.most:
                    return Rejection(self.name, (full(c.term.topology_key, c.most, str(c.source)),), source=c.source)
        return None

    def wide(self, spec: ClassSpec, batch: Batch, moves: Moves) -> bool:
        return any(isinstance(c, Limit_) and not one_node_domains(batch.index, c.term.topology_key)
                   for c in spec.constraints)

    def sways(self, spec: ClassSpec, batch: Batch, pod: Pod) -> bool:
        return any(isinstance(c, Limit_) and c.term.matches(pod) for c in spec.constraints)

    def emit(self, build: ProblemBuilder) -> None:
        for a, info in build.checked():
            for c in info.constraints:
                if isinstance(c, Limit_):
                    p = build.partitions.of(c.term.topology_key)
                    ids = build.partitions.values[p]
                    existing = {ids[v]: k for v, k in build.index.domain_counts(c.term).items() if k and v in ids}
                    build.problem.limits.append(Limit(p, a, tuple(build.matcher.matching(c.term)), existing, c.most,
                                                      describe(c)))

    def explain(self, blocker: Blocker, spot: Spot) -> str:
        return f"node(s) are in a domain already at the limit in this batch's plan: {blocker.rule.why}"  # type: ignore[attr-defined]


KIND = CountLimitKind()
