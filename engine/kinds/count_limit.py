"""CountLimit (ours, from a policy's `at most N per DOMAIN`): every topology domain hosting the pod holds at
most N pods matching the rule's pod set, bound ones and itself included."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..model.ir import Constraint, Source
from ..model.ir import CountLimit as Limit_  # the rule; this module's kind is CountLimitKind
from ..model.reasons import Code
from ..model.rejections import Rejection, Rejections
from ..solve.problem import Blocker, Check, Limit
from .base import Action, ClassLabels, ClusterEvent, Emit, Explain, ReadsPods, Requeue, Resource, Spot

if TYPE_CHECKING:
    from ..model.view import Counts, View
    from .context import Batch, ClassSpec, ProblemBuilder


def describe(rule: Limit_) -> str:
    return f"at most {rule.most} per {rule.term.topology_key} of pods {rule.term.selector} [{rule.source}]"


def full(key: str, most: int, source: str) -> str:
    return f"node(s) are in a {key} domain that already holds the limit of {most} pod(s) ({source})"


class CountLimitKind(ClassLabels, ReadsPods, Emit, Explain, Requeue):
    name, code = "CountLimit", Code.POLICY
    events = (ClusterEvent(Resource.POD, Action.DELETE | Action.UPDATE_POD_LABEL),
              ClusterEvent(Resource.NODE, Action.ADD | Action.UPDATE_NODE_LABEL))
    checks = (Check.LIMIT,)

    def label_keys(self, rule_sets: list[tuple[Constraint, ...]], view: View) -> Iterable[frozenset[str] | None]:
        return (c.term.label_keys() for rules in rule_sets for c in rules if isinstance(c, Limit_))

    def filter(self, spec: ClassSpec, batch: Batch, out: Rejections) -> None:
        """Domains whose pods (the view's: its pods gone and added counted) already hold the limit, counting the pod
        itself when the rule matches it."""
        view = batch.view
        blocked: dict[tuple[str, int, Source], list[tuple[int, Counts]]] = defaultdict(list)
        for c in spec.constraints:
            if isinstance(c, Limit_):
                me = 1 if c.term.matches(spec.sample) else 0
                blocked[(c.term.topology_key, c.most, c.source)].append((me, view.domain_counts(c.term)))
        for (key, most, source), counted in blocked.items():
            def held(value: str, counted: list[tuple[int, Counts]] = counted, most: int = most) -> bool:
                return any(counts.get(value, 0) + me > most for me, counts in counted)
            out.add(Rejection(self.name, (full(key, most, str(source)),), source=source),
                    view.nodes_where(key, out.asked, held))

    def emit(self, build: ProblemBuilder) -> None:
        for a, info in build.checked():
            for c in info.constraints:
                if isinstance(c, Limit_):
                    p = build.partitions.of(c.term.topology_key)
                    ids = build.partitions.values[p]
                    existing = {ids[v]: k for v, k in build.view.domain_counts(c.term).items() if k and v in ids}
                    build.problem.limits.append(Limit(p, a, tuple(build.matcher.matching(c.term)), existing, c.most,
                                                      describe(c)))

    def explain(self, blocker: Blocker, spot: Spot) -> str:
        return f"node(s) are in a domain already at the limit in this batch's plan: {blocker.rule.why}"  # type: ignore[attr-defined]


KIND = CountLimitKind()
