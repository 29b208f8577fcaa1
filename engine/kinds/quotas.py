"""CapacityScheduling and tenant quotas (engine.quotas.tenants says who belongs to which quota): a quota's pods use
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
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..model.cluster import Quota
from ..model.reasons import Code
from ..model.rejections import Rejection
from ..quotas import tenants as T
from ..solve.problem import Blocker, Budget, Check, Share
from .base import Action, ClusterEvent, Emit, Explain, PreFilter, Requeue, Resource, Spot

if TYPE_CHECKING:
    from .context import Batch, ClassSpec, ProblemBuilder

TOTAL = "the tenants' total min"


@dataclass(slots=True)
class QuotaRow(Budget):
    """A quota kind's Budget, with what a refusal by it quotes: per group of the row (one group for a max), the
    quota whose figures it gives — the max's own quota, or each class's tenant in the mins' rows — and what that
    quota's pods used of `resource` before the batch (the plan's share is added when the refusal is worded)."""

    resource: str = ""
    quoted: tuple[tuple[Quota, int], ...] = ()

    def quote(self, c: int, taken: int) -> str:
        """Class c's quota after the batch's plan took `taken` of the row in its group: which, and how far."""
        quota, before = self.quoted[self.group_of(self.classes.index(c))]
        return f"{T.figures(quota, self.resource, before + taken)} with the plan, {T.shown(self.resource, before)} before it"


def over_max(quota: Quota, resource: str, used: int, want: int, most: int) -> str:
    low = dict(quota.min).get(resource)
    return (f"exceeds {quota.source}: {resource} used {T.shown(resource, used)} + {T.shown(resource, want)} asked "
            f"> max {T.shown(resource, most)} ({'no min' if low is None else f'min {T.shown(resource, low)}'})")


def over_min(resource: str, used: int, want: int, most: int, tenant: str) -> str:
    """`tenant`: the pod's tenant's figures (engine.quotas.tenants.figures)."""
    return (f"the tenants with quotas would use more {resource} than their mins add up to "
            f"({T.shown(resource, used)} + {T.shown(resource, want)} > {T.shown(resource, most)}); its tenant {tenant}")


def usage(batch: Batch) -> T.Usage:
    return batch.usage if batch.usage is not None else T.Usage.of(batch.cluster.quotas, batch.cluster.bound)


class CapacityScheduling(PreFilter, Emit, Explain, Requeue):
    name, code = "CapacityScheduling", Code.QUOTA
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
        tenant = T.tenant_of(covering, pod)
        if tenant is None:
            return None
        for r, (have, most) in _totals(used).items():
            if (want := pod.requests.get(r, 0)) and have + want > most:
                own = T.figures(tenant, r, used.held[tenant.name][r])
                return Rejection(self.name, (over_min(r, have, want, most, own),))
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
                have = used.covered[quota.name][r]
                _budget(build, QuotaRow(tuple(classes), (), most - have, f"{quota.source}'s max of {r}", resource=r,
                                        quoted=((quota, have),)))

    def _mins(self, build: ProblemBuilder, used: T.Usage, tenant_of: dict[int, Quota | None]) -> None:
        """Per pooled resource: the tenants within their mins' total, and borrowing only what lies idle."""
        tenants = [t for t in used.tenants() if any(q is t for q in tenant_of.values())]
        group = {id(t): g for g, t in enumerate(tenants)}
        quoted = [a for a, t in tenant_of.items() if t is not None]
        asking = build.batch.asking or T.Asking.of(used, build.batch.cluster.pending, build.batch.cluster.gangs)
        wanted = asking.demand
        groups = tuple(group[id(tenant_of[a])] for a in quoted)
        for r, (have, most) in _totals(used).items():
            quotes = tuple((t, used.held[t.name][r]) for t in tenants)
            # grouped by tenant with nothing of their own: the plain sum, and each refusal quotes the pod's tenant
            _budget(build, QuotaRow(tuple(quoted), (), most - have, f"{TOTAL} of {r} ({T.shown(r, most)} in all, "
                                    f"{T.shown(r, have)} used before this batch)", groups, resource=r, quoted=quotes))
            pool = T.pool(used, wanted, r)
            own = tuple(pool.room[t.name] for t in tenants)
            _budget(build, QuotaRow(tuple(quoted), (), pool.lendable, f"the {r} other tenants' mins leave idle "
                                    f"({T.shown(r, pool.lendable)} to lend)", groups, own, r, quotes))

    def _shares(self, build: ProblemBuilder, used: T.Usage, tenant_of: dict[int, Quota | None]) -> None:
        """Per tenant with pods in the batch, its weighted dominant share over the shared resources."""
        rows = build.batch.view.usage
        totals = T.shared(used.quotas, {r: int(rows.allocatable[:, k].sum()) for r, k in rows.names.items()})
        weights = T.integer_weights(used.tenants())
        for t in used.tenants():
            classes = tuple(a for a, q in tenant_of.items() if q is t)
            if not classes or not totals:
                continue
            terms = tuple(T.share_term(used.held[t.name][r], [build.classes[a].requests.get(r, 0) for a in classes],
                                       total, t.weight) for r, total in totals.items())
            build.problem.shares.append(Share(classes, terms, weights[t.name], t.source))

    def explain(self, blocker: Blocker, spot: Spot) -> str:
        """A max names its quota and how far it is; the mins' rows say so of the pod's tenant."""
        row, had = blocker.rule, "node(s) had room, but one more pod would go over"
        if not isinstance(row, QuotaRow) or not row.quoted:
            return f"{had} {row.why} in this batch's plan"  # type: ignore[attr-defined]
        if len(row.quoted) == 1:
            return f"{had} the max of {row.quote(spot.class_index, spot.taken)}"
        return f"{had} {row.why} in this batch's plan (its tenant {row.quote(spot.class_index, spot.taken)})"


def _totals(used: T.Usage) -> dict[str, tuple[int, int]]:
    """Per pooled resource: what the tenants use together, and the sum of their mins."""
    have: Counter[str] = Counter()
    most: Counter[str] = Counter()
    for t in used.tenants():
        have.update(used.held[t.name])
        most.update(dict(t.min))
    return {r: (have[r], most[r]) for r in T.pooled(used.quotas)}


def _budget(build: ProblemBuilder, row: QuotaRow) -> None:
    """`row` with each class's pod weighing its request of the row's resource, if it can bind: a row that every
    pod of its classes placed together stays within is left out (most rows, when quotas are roomy)."""
    row.weights = tuple(build.classes[a].requests.get(row.resource, 0) for a in row.classes)
    row.most = max(0, row.most)
    whole: dict[int, int] = {}
    for k, (a, w) in enumerate(zip(row.classes, row.weights)):
        whole[row.group_of(k)] = whole.get(row.group_of(k), 0) + w * len(build.classes[a].pods)
    if row.drawn(whole) > row.most:
        build.problem.budgets.append(row)


KIND = CapacityScheduling()
