"""The tenants' figures around one plan (issue 19: dry-run's per-tenant table, the loop's gauges): per quota and
resource it names, what its pods used before the plan and use after it, its min and max, what its tenant borrows
beyond its min, the tenant's weighted dominant share, and which of its pods the plan placed or left out.

Pure: the numbers are engine.quotas.tenants' (the same the batch model reads), computed from the quotas of the cluster
the plan was made for. Amounts are in the model's units: cpu in millicores, memory in bytes, others as counted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..model.cluster import Cluster, Pod, Quota
from .tenants import SHARE_UNIT, Membership, Usage, cluster_allocatable, pooled, share, shared

if TYPE_CHECKING:
    from ..planning.plan import Plan


@dataclass(frozen=True, slots=True)
class Amounts:
    """One resource of a quota: what the pods it covers used before the plan and use after it; its min and max
    (None: not named); what its tenant uses beyond its min after the plan (None: not a tenant, or the resource is
    not pooled — no tenant's min names it, so nothing of it is borrowed)."""

    resource: str
    before: int
    used: int
    min: int | None
    max: int | None
    borrowed: int | None

    def to_dict(self) -> dict[str, int | None]:
        return {"before": self.before, "used": self.used, "min": self.min, "max": self.max, "borrowed": self.borrowed}


@dataclass(frozen=True, slots=True)
class TenantLine:
    """One quota after the plan. `share` (tenants only) is the weighted dominant share in thousandths of the
    cluster; `placed` and `left` are the pending pods whose tenant it is, placed or left out by the plan."""

    name: str
    source: str
    tenant: bool
    weight: float
    resources: tuple[Amounts, ...]
    share: int | None
    placed: tuple[str, ...]
    left: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """The dry-run contract's `tenants` entry (docs/dry-run-contract.md)."""
        return {"source": self.source, "tenant": self.tenant, "weight": self.weight,
                "share": None if self.share is None else self.share / SHARE_UNIT,
                "resources": {a.resource: a.to_dict() for a in self.resources},
                "placed": list(self.placed), "unschedulable": list(self.left)}


def report(quotas: list[Quota], bound: Iterable[Pod], placed: Iterable[Pod], allocatable: Mapping[str, int],
           left: Iterable[Pod] = (), evicted: frozenset[str] = frozenset(), before: Usage | None = None) -> list[TenantLine]:
    """Every quota after a plan that places `placed`, leaves `left` pending and evicts the bound pods `evicted`
    (keys); `allocatable`: the cluster's, per resource (tenants.cluster_allocatable). `before`: what `bound`
    uses (`Usage.of(quotas, bound)`) when the caller has it — compile had it — so no pass over the bound pods is
    made but for evictions."""
    if not quotas:
        return []
    before = before if before is not None else Usage.of(quotas, bound)
    placed = list(placed)
    after = _after(before, bound, placed, evicted)
    totals = shared(quotas, allocatable)
    lending = set(pooled(quotas))
    pods = _pods_by_tenant(after.membership, placed, left)
    return [_line(q, before, after, totals, lending, pods) for q in quotas]


def _after(before: Usage, bound: Iterable[Pod], placed: list[Pod], evicted: frozenset[str]) -> Usage:
    """What the quotas' pods use once the plan's pods are placed and its victims gone."""
    usage = before.copy()
    if evicted:
        usage.add_all((pod for pod in bound if pod.key in evicted), sign=-1)
    usage.add_all(placed)
    return usage


def _pods_by_tenant(membership: Membership, placed: list[Pod], left: Iterable[Pod]) -> dict[str, tuple[list, list]]:
    """Tenant name -> (pods placed, pods left out), as keys."""
    out: dict[str, tuple[list, list]] = {q.name: ([], []) for q in membership.quotas if q.tenant}
    for side, pods in ((0, placed), (1, left)):
        for pod in pods:
            tenant = membership.tenant(pod)
            if tenant is not None:
                out[tenant.name][side].append(pod.key)
    return out


def _line(q: Quota, before: Usage, after: Usage, totals: dict[str, int], lending: set[str],
          pods: dict[str, tuple[list, list]]) -> TenantLine:
    low, high = dict(q.min), dict(q.max)
    held = after.held.get(q.name)
    amounts = tuple(Amounts(r, before.covered[q.name][r], after.covered[q.name][r], low.get(r), high.get(r),
                            max(0, held[r] - low.get(r, 0)) if held is not None and r in lending else None)
                    for r in sorted(low.keys() | high.keys()))
    if held is None:
        return TenantLine(q.name, q.source, False, q.weight, amounts, None, (), ())
    placed, left = pods[q.name]
    return TenantLine(q.name, q.source, True, q.weight, amounts, share(held, totals, q.weight) if totals else 0,
                      tuple(sorted(placed)), tuple(sorted(left)))


def of_plan(plan: Plan, cluster: Cluster) -> list[TenantLine]:
    """The tenants around `plan`, read from the cluster the plan was made for (`plan.details.compiled.cluster`: the
    planner's entry may have added policies' quotas to it), else from `cluster` (the caller's); [] without
    quotas. The usage before the plan is the one compile had (the loop's is kept pod by pod across cycles), so
    this costs the batch and the quotas, not the cluster."""
    compiled = plan.details.compiled
    planned = compiled.cluster if compiled is not None else cluster
    if not planned.quotas:
        return []
    placed = [p for p in planned.pending if p.key in plan.assignments]
    left = [p for p in planned.pending if p.key not in plan.assignments]
    evicted = frozenset(v.pod for v in plan.evictions)
    if compiled is None:
        return report(planned.quotas, planned.bound, placed, cluster_allocatable(planned.nodes), left, evicted)
    rows = compiled.view.usage  # the cluster's allocatable from the view's matrix, as the quota rows read it
    allocatable = {r: int(rows.allocatable[:, k].sum()) for r, k in rows.names.items()}
    return report(planned.quotas, planned.bound, placed, allocatable, left, evicted, compiled.usage)
