"""Reclaim by preemption (issue 19): under tenant quotas, which running pods a pending pod may evict, and the
quota account batch preemption (engine.preempt) keeps beside each node's free room. docs/quotas.md
("Reclaim by preemption") states the rules for operators.

As scheduler-plugins' CapacityScheduling decides it (v0.34.7, `SelectVictimsOnNode`), a pod's tenant being
engine.quotas.tenants' (an ElasticQuota's namespace, or a policy quota's pods):
- a pod whose tenant stays within its min with it (in queue order, as `tenants.borrowing` serves the mins) is
  *reclaiming*: it may evict pods of other tenants that use more than their min, whatever their priority;
- a pod of a tenant it would take beyond its min evicts only lower-priority pods of its own tenant;
- a pod without a tenant evicts only lower-priority pods without a tenant, and is never evicted for a tenant.
Beyond upstream:
- a reclaiming pod may also evict lower-priority pods of its own tenant (what it could do without reclaiming);
- reclaim takes back only borrowed room: evictions never take a victim's tenant below its min of a resource it
  uses beyond its min (upstream may evict a tenant down to nothing); in each tenant the lowest priority goes first;
- victims are chosen for the quota rows as well as for node room (upstream only looks at the one node): a pod
  held only by the tenants' total of mins gets room in that total from borrowers on any node.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ..model.cluster import NEVER_PREEMPT, Cluster, Gang, Pod, Quota
from ..model.queue_order import queue_order
from ..quotas import tenants as T

TOTAL = ""  # the row of the tenants' total of mins, among the rows named by quota


@dataclass(frozen=True, slots=True)
class Stance:
    """What one pending pod may evict: its tenant's name (None: it has none), whether it reclaims, its priority."""

    tenant: str | None
    reclaiming: bool
    priority: int


Account = T.Usage  # what the pods use, as the quota rows read it (covered: per quota, for its max; held: per
# tenant, for its min and the tenants' total); the stage's ledger keeps one and changes it as it evicts


@dataclass(slots=True)
class Reclaim:
    """The stage's quota facts: which quotas cover each pod it looks at, what the running pods use, the tenants
    over their min when it begins (and in which resources), and each preemptor's stance."""

    quotas: dict[str, Quota]
    membership: T.Membership
    resources: tuple[str, ...]  # the pooled ones (some tenant's min names them)
    start: Account
    over: dict[str, tuple[str, ...]] = field(default_factory=dict)  # tenant -> resources it used beyond its min
    # before the batch's plan
    stances: dict[str, Stance] = field(default_factory=dict)  # preemptor key -> its stance
    gangs: Mapping[str, Gang] = field(default_factory=dict)  # the cluster's: when each gang entered the line
    _covering: dict[str, tuple[str, ...]] = field(default_factory=dict)
    _tenant: dict[str, str | None] = field(default_factory=dict)

    @classmethod
    def of(cls, cluster: Cluster, preemptors: Sequence[Pod], start: T.Usage | None = None,
           before: T.Usage | None = None) -> Reclaim | None:
        """None when the cluster has no quotas: preemption is by priority alone. `start`: what the cluster's bound
        pods use of its quotas, when the caller has it (the first plan's, with its placements added); `before`: what
        the running pods used before the batch's plan (default `start`): only room a tenant borrowed then is
        reclaimed, never room the same batch just lent it (evicting a running pod to start its tenant's pending one
        of the same priority)."""
        if not cluster.quotas:
            return None
        start = start if start is not None else T.Usage.of(cluster.quotas, cluster.bound)
        rc = cls({q.name: q for q in cluster.quotas}, start.membership, tuple(T.pooled(cluster.quotas)), start,
                 gangs=cluster.gangs)
        was = before if before is not None else start
        rc.over = {t: over for t in was.held if (over := rc._beyond(was, t))}
        rc.stances = rc._stances(preemptors)
        return rc

    def _stances(self, preemptors: Sequence[Pod]) -> dict[str, Stance]:
        borrowing = T.borrowing(self.start, preemptors, self.gangs)
        out = {}
        for pod in preemptors:
            tenant = self.tenant(pod)
            reclaiming = (tenant is not None and pod.key not in borrowing
                          and any(pod.requests.get(r, 0) > 0 for r in self.resources))
            out[pod.key] = Stance(tenant, reclaiming, pod.priority)
        return out

    def _beyond(self, account: Account, tenant: str) -> tuple[str, ...]:
        low = dict(self.quotas[tenant].min)
        return tuple(r for r in self.resources if account.held[tenant][r] > low.get(r, 0))

    # --- who belongs where (looked up once per pod) ---------------------------------------------------------

    def covering(self, pod: Pod) -> tuple[str, ...]:
        if pod.key not in self._covering:
            quotas = self.membership.covering(pod)
            tenant = self.membership.tenant(pod)  # looked up once per namespace when quotas cover namespaces
            self._covering[pod.key] = tuple(q.name for q in quotas)
            self._tenant[pod.key] = tenant.name if tenant is not None else None
        return self._covering[pod.key]

    def tenant(self, pod: Pod) -> str | None:
        self.covering(pod)
        return self._tenant[pod.key]

    def source(self, tenant: str | None) -> str | None:
        return self.quotas[tenant].source if tenant is not None else None

    # --- who may evict whom -----------------------------------------------------------------------------------

    def may_evict(self, stance: Stance, victim: Pod) -> bool:
        """The rule before any account: see the module's docstring."""
        theirs = self.tenant(victim)
        if theirs == stance.tenant:
            return victim.priority < stance.priority
        return stance.reclaiming and theirs is not None and theirs in self.over

    def reclaims(self, stance: Stance, victim: Pod) -> bool:
        """Whether evicting `victim` for a pod of `stance` is reclaim (another tenant's borrowed room)."""
        return stance.tenant is not None and self.tenant(victim) not in (None, stance.tenant)

    def borrowed(self, account: Account) -> dict[str, dict[str, int]]:
        """Per tenant over its min when the stage began: what it still uses beyond its min of each resource it
        was over in (0 once given back: it is not taken below its min there)."""
        out = {}
        for t, resources in self.over.items():
            low = dict(self.quotas[t].min)
            out[t] = {r: max(0, account.held[t][r] - low.get(r, 0)) for r in resources}
        return out

    def take(self, room: dict[str, dict[str, int]], stance: Stance, pods: Iterable[Pod]) -> bool:
        """Whether a unit (pods evicted together) fits in its tenants' borrowed `room` when its eviction is reclaim
        (then drawn from `room`): it must free room some tenant borrows and take none below its min."""
        asked: dict[str, Counter[str]] = {}
        for pod in pods:
            if self.reclaims(stance, pod):
                asked.setdefault(self.tenant(pod) or "", Counter()).update(pod.requests)
        for t, want in asked.items():
            left = room.get(t, {})
            if not any(left[r] > 0 and want[r] > 0 for r in left) or any(want[r] > left[r] for r in left):
                return False
        for t, want in asked.items():
            for r in room[t]:
                room[t][r] -= want[r]
        return True

    # --- the account ------------------------------------------------------------------------------------------

    def add(self, account: Account, pod: Pod, sign: int) -> None:
        """Count `pod` in (sign 1) or out (sign -1) of the quotas covering it."""
        amounts = {r: sign * v for r, v in pod.requests.items()}
        for name in self.covering(pod):
            account.covered[name].update(amounts)
        tenant = self.tenant(pod)
        if tenant is not None:
            account.held[tenant].update(amounts)

    def short(self, account: Account, pod: Pod, back: Iterable[Pod] = ()) -> list[tuple[str, str]]:
        """The quota rows `pod` would go over on `account` with `back` counted in again: (quota, resource) for a
        max, (TOTAL, resource) for the tenants' total of mins (upstream's PreFilter, as the batch model has it)."""
        again = [(p, self.covering(p), self.tenant(p)) for p in back]
        out = []
        for name in self.covering(pod):
            for r, most in self.quotas[name].max:
                want = pod.requests.get(r, 0)
                extra = sum(p.requests.get(r, 0) for p, names, _ in again if name in names)
                if want and account.covered[name][r] + extra + want > most:
                    out.append((name, r))
        if self.tenant(pod) is None:
            return out
        for r in self.resources:
            want = pod.requests.get(r, 0)
            have = sum(h[r] for h in account.held.values()) + sum(p.requests.get(r, 0) for p, _, t in again if t)
            if want and have + want > sum(dict(self.quotas[t].min).get(r, 0) for t in account.held):
                out.append((TOTAL, r))
        return out

    def overflows(self, account: Account, pods: list[Pod]) -> bool:
        """Whether counting `pods` in again takes some quota row over (a max, or the tenants' total of mins)."""
        added: Counter[str] = Counter()
        per_quota: dict[str, Counter[str]] = {}
        for p in pods:
            for name in self.covering(p):
                per_quota.setdefault(name, Counter()).update(p.requests)
            if self.tenant(p) is not None:
                added.update(p.requests)
        for name, more in per_quota.items():
            if any(more[r] and account.covered[name][r] + more[r] > most for r, most in self.quotas[name].max):
                return True
        mins: Counter[str] = Counter()
        for t in account.held:
            mins.update(dict(self.quotas[t].min))
        return any(added[r] and sum(h[r] for h in account.held.values()) + added[r] > mins[r] for r in self.resources)

    def overborrowing(self, before: Account, pending: Sequence[Pod], placed: Sequence[Pod]) -> set[str]:
        """The placed pods (of `pending`) to take out, last in queue order first, until what they newly borrow of
        each pooled resource fits what the idle mins lend on `before` (tenants.pool: asked-for mins are never
        lent): the batch's borrowing rule, asked again of an account its plan did not see (victims given back)."""
        demand = T.Asking.of(before, pending, self.gangs).demand
        out: set[str] = set()
        for r in self.resources:
            pool = T.pool(before, demand, r)
            kept = [p for p in queue_order(placed, self.gangs, pending) if p.key not in out]
            while (beyond := _borrowing(self, kept, pool, r)) and sum(beyond.values()) > pool.lendable:
                last = next(p for p in reversed(kept) if p.requests.get(r, 0) > 0 and self.tenant(p) in beyond)
                out.add(last.key)
                kept.remove(last)
        return out

    def helps(self, rows: list[tuple[str, str]], pods: Iterable[Pod]) -> bool:
        """Whether evicting `pods` lowers some row of `rows`."""
        return any(p.requests.get(r, 0) > 0 and (self.tenant(p) is not None if name == TOTAL else name in self.covering(p))
                   for p in pods for name, r in rows)


def _borrowing(rc: Reclaim, pods: list[Pod], pool: T.Pool, resource: str) -> dict[str, int]:
    """What `pods` newly borrow of `resource`, per tenant that borrows: what they add beyond the room its min
    leaves."""
    added: Counter[str] = Counter()
    for p in pods:
        tenant = rc.tenant(p)
        if tenant is not None:
            added[tenant] += p.requests.get(resource, 0)
    return {t: v - pool.room.get(t, 0) for t, v in added.items() if v > pool.room.get(t, 0)}


def may_reclaim(cluster: Cluster, usage: T.Usage | None = None) -> bool:
    """Some pending pod that may preempt has a tenant and some tenant uses more than its min: the preemption
    stage may have work even when no running pod has a lower priority. Asked before every batch: `usage` is what
    the running pods use when the caller keeps it (the loop's tracker); else, with namespaced quotas only, one pass
    over the running pods summing the pooled resources, stopping at the first tenant found beyond its min."""
    if not cluster.quotas:
        return False
    membership = T.Membership(cluster.quotas)
    if not any(p.preemption_policy != NEVER_PREEMPT and membership.tenant(p) is not None for p in cluster.pending):
        return False
    resources = T.pooled(cluster.quotas)
    if usage is not None or any(q.members is not None for q in cluster.quotas):
        usage = usage if usage is not None else T.Usage.of(cluster.quotas, cluster.bound)
        return any(usage.held[t.name][r] > dict(t.min).get(r, 0) for t in usage.tenants() for r in resources)
    owner = {ns: t for t in reversed(cluster.quotas) if t.tenant for ns in t.namespaces}  # the first tenant wins
    mins = {t.name: [dict(t.min).get(r, 0) for r in resources] for t in owner.values()}
    held = {name: [0] * len(resources) for name in mins}
    for pod in cluster.bound:
        tenant = owner.get(pod.namespace)
        if tenant is None or not T.counted(pod):
            continue
        have, low = held[tenant.name], mins[tenant.name]
        for i, r in enumerate(resources):
            have[i] += pod.requests.get(r, 0)
            if have[i] > low[i]:
                return True
    return False
