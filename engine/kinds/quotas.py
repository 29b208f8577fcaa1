"""CapacityScheduling (scheduler-plugins' ElasticQuota): a tenant's pods use together at most its `max` of each
resource, and the tenants together at most the sum of their `min` (they borrow each other's unused minimum, no
more), as upstream's PreFilter decides. Here both are rows of the batch model (`Budget`s), not a filter before
it: the solver chooses which pods fit the quotas along with where every pod goes.

A tenant is a namespace with an ElasticQuota (one per namespace, its own pods). Bound pods of the tenant (not
terminating or finished) are what it uses. A resource its `max` does not list is not capped (upstream reads an
unlisted cpu, memory or ephemeral-storage as a max of 0; we do not). Minimums served before borrowing, a
fair-share objective and reclaim by preemption are the next steps (issue 19).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from ..model import Pod, Quota
from ..rejections import Rejection
from ..solve.greedy import Blocker
from ..solve.problem import Budget, Check
from .base import Action, ClusterEvent, Kind, Resource, Spot

if TYPE_CHECKING:
    from .context import Batch, ClassSpec, ProblemBuilder

TOTAL = "the ElasticQuotas' total min"


def over_max(quota: Quota, resource: str, used: int, want: int, most: int) -> str:
    return (f"exceeds {quota.source}: {resource} used {used} + {want} asked > max {most} "
            f"(min {dict(quota.min).get(resource, 0)})")


def over_min(resource: str, used: int, want: int, most: int) -> str:
    return f"the tenants with ElasticQuotas would use more {resource} than their mins add up to ({used} + {want} > {most})"


class Usage:
    """What each tenant's bound pods use, per resource (per batch, in the kind's memo)."""

    def __init__(self, quotas: list[Quota], bound: list[Pod]):
        self.by_namespace = {ns: q for q in quotas for ns in q.namespaces}
        self.used: dict[str, Counter[str]] = {q.name: Counter() for q in quotas}
        for pod in bound:
            quota = self.by_namespace.get(pod.namespace)
            if quota is not None and not pod.terminating:
                self.used[quota.name].update(pod.requests)
        self.total: Counter[str] = Counter()
        for counts in self.used.values():
            self.total.update(counts)
        self.total_min: Counter[str] = Counter()
        for q in quotas:
            self.total_min.update(dict(q.min))

    @classmethod
    def of(cls, batch: Batch) -> Usage:
        memo = batch.memo.setdefault(CapacityScheduling.name, {})
        if "usage" not in memo:
            memo["usage"] = cls(batch.cluster.quotas, batch.cluster.bound)
        return memo["usage"]

    def mins(self) -> list[str]:
        """The resources the tenants' mins speak of (the total-min rows)."""
        return sorted(self.total_min)


class CapacityScheduling(Kind):
    name = "CapacityScheduling"
    events = (ClusterEvent(Resource.POD, Action.DELETE | Action.UPDATE_POD_SCALE_DOWN),
              ClusterEvent(Resource.ELASTIC_QUOTA, Action.ADD | Action.UPDATE | Action.DELETE))
    checks = (Check.BUDGET,)

    def prefilter(self, spec: ClassSpec, batch: Batch) -> Rejection | None:
        """Upstream's PreFilter: one pod alone beyond its tenant's max, or the tenants' total beyond their mins."""
        if not batch.cluster.quotas:
            return None
        usage, pod = Usage.of(batch), spec.sample
        quota = usage.by_namespace.get(pod.namespace)
        if quota is None:
            return None
        used = usage.used[quota.name]
        for r, most in quota.max:
            if (want := pod.requests.get(r, 0)) and used[r] + want > most:
                return Rejection(self.name, (over_max(quota, r, used[r], want, most),))
        for r in usage.mins():
            if (want := pod.requests.get(r, 0)) and usage.total[r] + want > usage.total_min[r]:
                return Rejection(self.name, (over_min(r, usage.total[r], want, usage.total_min[r]),))
        return None

    def emit(self, build: ProblemBuilder) -> None:
        """Per tenant and resource of its max, and per resource of the mins over all tenants: a Budget of what
        the batch may still take, each class weighing what one of its pods asks."""
        if not build.batch.cluster.quotas:
            return
        usage = Usage.of(build.batch)
        tenant_of = {a: usage.by_namespace.get(info.sample.namespace) for a, info in build.checked()}
        for quota in build.batch.cluster.quotas:
            classes = [a for a, q in tenant_of.items() if q is quota]
            for r, most in quota.max:
                self._budget(build, classes, r, most - usage.used[quota.name][r],
                             f"{quota.source}: max {r} {most}")
        quoted = [a for a, q in tenant_of.items() if q is not None]
        for r in usage.mins():
            self._budget(build, quoted, r, usage.total_min[r] - usage.total[r], f"{TOTAL} of {r}")

    @staticmethod
    def _budget(build: ProblemBuilder, classes: list[int], resource: str, left: int, why: str) -> None:
        weights = tuple(build.classes[a].requests.get(resource, 0) for a in classes)
        if any(weights):
            build.problem.budgets.append(Budget(tuple(classes), weights, max(0, left), why))

    def explain(self, blocker: Blocker, spot: Spot) -> str:
        return f"node(s) had room, but one more pod would go over {blocker.rule.why} in this batch's plan"  # type: ignore[attr-defined]


KIND = CapacityScheduling()
