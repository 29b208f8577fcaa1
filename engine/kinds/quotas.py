"""CapacityScheduling and tenant quotas (engine.tenants says who belongs to which quota): a quota's pods use
together at most its `max` of each resource; tenants together at most the sum of their `min`s (upstream's
PreFilter); and within one batch a tenant borrows only the minimums other tenants leave idle — an asked-for min
is never lent. All are rows of the batch model (`Budget`s), not a filter before it: the solver chooses which
pods fit the quotas along with where every pod goes. Each tenant's weighted dominant share is a `Share` row,
the fairness tier below pods placed and above preferences.

A resource a max does not list is not capped (upstream reads an unlisted cpu, memory or ephemeral-storage as
a max of 0; we do not).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from .. import tenants as T
from ..model import Quota
from ..rejections import Rejection
from ..solve.greedy import Blocker
from ..solve.problem import Budget, Check, Share
from .base import Action, ClusterEvent, Kind, Resource, Spot

if TYPE_CHECKING:
    from .context import Batch, ClassSpec, ProblemBuilder

TOTAL = "the tenants' total min"


def over_max(quota: Quota, resource: str, used: int, want: int, most: int) -> str:
    return (f"exceeds {quota.source}: {resource} used {used} + {want} asked > max {most} "
            f"(min {dict(quota.min).get(resource, 0)})")


def over_min(resource: str, used: int, want: int, most: int) -> str:
    return f"the tenants with quotas would use more {resource} than their mins add up to ({used} + {want} > {most})"


def usage(batch: Batch) -> T.Usage:
    return batch.usage if batch.usage is not None else T.Usage.of(batch.cluster.quotas, batch.cluster.bound)


class CapacityScheduling(Kind):
    name = "CapacityScheduling"
    events = (ClusterEvent(Resource.POD, Action.DELETE | Action.UPDATE_POD_SCALE_DOWN),
              ClusterEvent(Resource.ELASTIC_QUOTA, Action.ADD | Action.UPDATE | Action.DELETE))
    checks = (Check.BUDGET,)

    def prefilter(self, spec: ClassSpec, batch: Batch) -> Rejection | None:
        """Upstream's PreFilter: one pod alone beyond a max covering it, or the tenants' total beyond their mins."""
        if not batch.cluster.quotas:
            return None
        used, pod = usage(batch), spec.sample
        covering = used.membership.covering(pod)
        for quota in covering:
            for r, most in quota.max:
                have = used.covered[quota.name][r]
                if (want := pod.requests.get(r, 0)) and have + want > most:
                    return Rejection(self.name, (over_max(quota, r, have, want, most),))
        if T.tenant_of(covering, pod) is None:
            return None
        for r, (have, most) in _totals(used).items():
            if (want := pod.requests.get(r, 0)) and have + want > most:
                return Rejection(self.name, (over_min(r, have, want, most),))
        return None

    def emit(self, build: ProblemBuilder) -> None:
        """The quota rows of the batch model: maxes, the mins' total, borrowing of idle mins, and shares."""
        if not build.batch.cluster.quotas:
            return
        used = usage(build.batch)
        tenant_of = {a: used.membership.tenant(info.sample) for a, info in build.checked()}
        self._maxes(build, used)
        self._mins(build, used, tenant_of)
        self._shares(build, used, tenant_of)

    def _maxes(self, build: ProblemBuilder, used: T.Usage) -> None:
        """Per quota and resource of its max: a Budget of what the batch may still take."""
        covered = {a: set(map(id, used.membership.covering(info.sample))) for a, info in build.checked()}
        for quota in used.quotas:
            classes = [a for a, ids in covered.items() if id(quota) in ids]
            for r, most in quota.max:
                left = most - used.covered[quota.name][r]
                _budget(build, classes, r, left, f"{quota.source}: max {r} {most} "
                        f"(used {used.covered[quota.name][r]}, min {dict(quota.min).get(r, 0)})")

    def _mins(self, build: ProblemBuilder, used: T.Usage, tenant_of: dict[int, Quota | None]) -> None:
        """Per pooled resource: the tenants within their mins' total, and borrowing only what lies idle."""
        tenants = [t for t in used.tenants() if any(q is t for q in tenant_of.values())]
        group = {id(t): g for g, t in enumerate(tenants)}
        quoted = [a for a, t in tenant_of.items() if t is not None]
        wanted = T.demand(used, build.batch.cluster.pending)
        for r, (have, most) in _totals(used).items():
            _budget(build, quoted, r, most - have, f"{TOTAL} of {r}")
            pool = T.pool(used, wanted, r)
            weights = tuple(build.classes[a].requests.get(r, 0) for a in quoted)
            if any(weights):
                groups = tuple(group[id(tenant_of[a])] for a in quoted)
                own = tuple(pool.room[t.name] for t in tenants)
                build.problem.budgets.append(Budget(tuple(quoted), weights, pool.lendable,
                                                   f"the {r} other tenants' mins leave idle ({pool.lendable} to lend)",
                                                   groups, own))

    def _shares(self, build: ProblemBuilder, used: T.Usage, tenant_of: dict[int, Quota | None]) -> None:
        """Per tenant with pods in the batch, its weighted dominant share over the shared resources."""
        index = build.batch.index.usage
        totals = T.shared(used.quotas, {r: int(index.allocatable[:, k].sum()) for r, k in index.names.items()})
        weights = T.integer_weights(used.tenants())
        for t in used.tenants():
            classes = tuple(a for a, q in tenant_of.items() if q is t)
            if not classes or not totals:
                continue
            terms = tuple(T.share_term(used.held[t.name][r], [build.classes[a].requests.get(r, 0) for a in classes],
                                       total, t.weight) for r, total in totals.items())
            build.problem.shares.append(Share(classes, terms, weights[t.name], t.source))

    def explain(self, blocker: Blocker, spot: Spot) -> str:
        return f"node(s) had room, but one more pod would go over {blocker.rule.why} in this batch's plan"  # type: ignore[attr-defined]


def _totals(used: T.Usage) -> dict[str, tuple[int, int]]:
    """Per pooled resource: what the tenants use together, and the sum of their mins."""
    have: Counter[str] = Counter()
    most: Counter[str] = Counter()
    for t in used.tenants():
        have.update(used.held[t.name])
        most.update(dict(t.min))
    return {r: (have[r], most[r]) for r in T.pooled(used.quotas)}


def _budget(build: ProblemBuilder, classes: list[int], resource: str, left: int, why: str) -> None:
    weights = tuple(build.classes[a].requests.get(resource, 0) for a in classes)
    if any(weights):
        build.problem.budgets.append(Budget(tuple(classes), weights, max(0, left), why))


KIND = CapacityScheduling()
