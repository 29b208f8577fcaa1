"""Tenants and their quotas (issue 19): which quota a pod counts toward, what each uses, and the figures the
batch model and the reports both read — room left in a minimum, what is borrowed, what lies idle, and the
weighted dominant share.

The rules, written once here (docs/quotas.md states them for operators):
- A pod's *tenant* is the first tenant quota covering it: ElasticQuotas (by namespace) first, then policies'
  quotas in load order. Its `min` and its fair share count the pods whose tenant it is.
- Every quota's `max` caps every pod it covers, its tenant's or not: a quota over several tenants' pods is
  their parent (a hierarchy of caps).
- A tenant *asks for* its min of a resource up to what it uses plus what its pending pods request; the rest of
  its min lies *idle*, and only idle minimums may be borrowed by a tenant going beyond its own.
- A tenant's *dominant share* is, over the resources shares are counted in, the largest fraction of the
  cluster's allocatable that its pods use, divided by its weight (weighted DRF).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from ..model.cluster import Gang, Node, Pod, Quota
from ..model.queue_order import queue_order

SHARE_UNIT = 1000  # shares are counted in thousandths of the cluster (per mille), rounded up
ALWAYS_SHARED = ("cpu", "memory")  # resources every share counts, besides those the quotas name
BINARY = (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


class Membership:
    """Which quotas cover a pod, looked up by namespace (ElasticQuotas) before any policy's pod expression is
    evaluated: thousands of bound pods are sorted into tenants every batch."""

    def __init__(self, quotas: list[Quota]):
        self.quotas = quotas
        self.by_namespace: dict[str, list[int]] = {}
        self.by_members: list[int] = []
        for i, q in enumerate(quotas):
            for ns in q.namespaces:
                self.by_namespace.setdefault(ns, []).append(i)
            if q.members is not None:
                self.by_members.append(i)
        self._of_namespace: dict[str, list[Quota]] = {}  # when no quota selects pods by expression
        self._tenant_of_namespace: dict[str, Quota | None] = {}

    def covering(self, pod: Pod) -> list[Quota]:
        """The quotas covering `pod`, in quota order."""
        if not self.by_members:
            found_in = self._of_namespace.get(pod.namespace)
            if found_in is None:
                found_in = self._of_namespace[pod.namespace] = [self.quotas[i] for i in self.by_namespace.get(pod.namespace, ())]
            return found_in
        found = set(self.by_namespace.get(pod.namespace, ()))
        found.update(i for i in self.by_members if self.quotas[i].members.matches(pod))  # type: ignore[union-attr]
        return [self.quotas[i] for i in sorted(found)]

    def tenant(self, pod: Pod) -> Quota | None:
        if not self.by_members:
            if pod.namespace not in self._tenant_of_namespace:
                self._tenant_of_namespace[pod.namespace] = tenant_of(self.covering(pod), pod)
            return self._tenant_of_namespace[pod.namespace]
        return tenant_of(self.covering(pod), pod)


def tenant_of(quotas: Iterable[Quota], pod: Pod) -> Quota | None:
    """The first tenant quota covering `pod` (None: the pod belongs to no tenant)."""
    return next((q for q in quotas if q.tenant and q.covers(pod)), None)


def counted(pod: Pod) -> bool:
    """A bound pod counts toward its quotas while it runs (a terminating one is on its way out)."""
    return not pod.terminating


@dataclass(slots=True)
class Usage:
    """What the bound pods use: per quota of every pod it covers (`covered`, for its max) and per tenant of its
    own pods (`held`, for its min and share)."""

    membership: Membership
    covered: dict[str, Counter[str]] = field(default_factory=dict)
    held: dict[str, Counter[str]] = field(default_factory=dict)

    @classmethod
    def of(cls, quotas: list[Quota], bound: Iterable[Pod]) -> Usage:
        usage = cls(Membership(quotas), {q.name: Counter() for q in quotas}, {q.name: Counter() for q in quotas if q.tenant})
        usage.add_all(bound)
        return usage

    @property
    def quotas(self) -> list[Quota]:
        return self.membership.quotas

    def add(self, pod: Pod, requests: Mapping[str, int]) -> None:
        covering = self.membership.covering(pod)
        for q in covering:
            self.covered[q.name].update(requests)
        tenant = tenant_of(covering, pod)
        if tenant is not None:
            self.held[tenant.name].update(requests)

    def add_all(self, pods: Iterable[Pod], sign: int = 1) -> None:
        """The pods that count (`counted`) added (sign -1: taken off); summed per namespace first when every
        quota covers whole namespaces, so each namespace's quotas are looked up once."""
        if self.membership.by_members:
            for pod in pods:
                if counted(pod):
                    self.add(pod, {r: sign * v for r, v in pod.requests.items()})
            return
        summed: dict[str, dict[str, int]] = {}
        sample: dict[str, Pod] = {}
        for pod in pods:
            if counted(pod):
                total = summed.get(pod.namespace)
                if total is None:
                    total, sample[pod.namespace] = summed.setdefault(pod.namespace, {}), pod
                for r, v in pod.requests.items():
                    total[r] = total.get(r, 0) + sign * v
        for ns, total in summed.items():
            self.add(sample[ns], total)

    def tenants(self) -> list[Quota]:
        return [q for q in self.quotas if q.tenant]

    def copy(self) -> Usage:
        return Usage(self.membership, {k: Counter(v) for k, v in self.covered.items()},
                     {k: Counter(v) for k, v in self.held.items()})

    def move(self, before: Pod | None, after: Pod | None) -> None:
        """A bound pod changed from `before` to `after` (None: none)."""
        if before is not None and counted(before):
            self.add(before, {r: -v for r, v in before.requests.items()})
        if after is not None and counted(after):
            self.add(after, after.requests)


class Tracker:
    """Usage kept across the scheduler loop's cycles: made afresh when the quotas change, else moved pod by pod
    as bound pods come and go (sorting 50,000 pods into tenants every cycle would cost more than the cycle)."""

    def __init__(self) -> None:
        self._quotas: tuple[Quota, ...] | None = None
        self._usage: Usage | None = None

    def move(self, before: Pod | None, after: Pod | None) -> None:
        if self._usage is not None:
            self._usage.move(before, after)

    def usage(self, quotas: list[Quota], bound: Iterable[Pod]) -> Usage:
        """What `bound` (the pods moved so far) uses under `quotas`: a copy the next moves do not reach."""
        if self._usage is None or tuple(quotas) != self._quotas:
            self._quotas, self._usage = tuple(quotas), Usage.of(quotas, bound)
        return self._usage.copy()


def pooled(quotas: Iterable[Quota]) -> list[str]:
    """The resources some tenant's min names: tenants borrow these from each other's idle minimums."""
    return sorted({r for q in quotas if q.tenant for r, _ in q.min})


@dataclass(frozen=True, slots=True)
class Pool:
    """One pooled resource as a batch finds it: per tenant the room left in its min (`room`), and how much of
    the tenants' minimums lies idle beyond what is already borrowed (`lendable`: what the batch may newly
    borrow)."""

    resource: str
    room: dict[str, int]
    lendable: int


def pool(usage: Usage, demand: Mapping[str, Counter[str]], resource: str) -> Pool:
    """`demand`: per tenant, what its pending pods request. Asked-for minimums are never lent."""
    room, idle, borrowed = {}, 0, 0
    for t in usage.tenants():
        low, have = dict(t.min).get(resource, 0), usage.held[t.name][resource]
        asked = min(low, have + demand.get(t.name, Counter())[resource])
        room[t.name] = max(0, low - have)
        idle += max(0, low - asked)
        borrowed += max(0, have - low)
    return Pool(resource, room, max(0, idle - borrowed))


@dataclass(frozen=True, slots=True)
class Asking:
    """What a batch's pending pods ask of their tenants: per tenant the sum of their requests (`demand`), and the
    pods that would borrow (`borrowing`): per tenant, in queue order (engine.model.queue_order), each pod that
    still fits in the room its min leaves of every pooled resource is served by the min; the rest borrow."""

    demand: dict[str, Counter[str]]
    borrowing: frozenset[str]

    @classmethod
    def of(cls, usage: Usage, pending: Iterable[Pod], gangs: Mapping[str, Gang] | None = None) -> Asking:
        own: dict[str, list[Pod]] = {t.name: [] for t in usage.tenants()}
        for pod in queue_order(pending, gangs):
            tenant = usage.membership.tenant(pod)
            if tenant is not None:
                own[tenant.name].append(pod)
        demand = {name: _summed(pods) for name, pods in own.items()}
        resources = pooled(usage.quotas)
        out: set[str] = set()
        for t in usage.tenants():
            room = {r: max(0, dict(t.min).get(r, 0) - usage.held[t.name][r]) for r in resources}
            if any(demand[t.name][r] > room[r] for r in resources):  # else every pod fits: none borrows
                out.update(_beyond(own[t.name], room))
        return cls(demand, frozenset(out))


def _summed(pods: list[Pod]) -> Counter[str]:
    total: Counter[str] = Counter()
    for pod in pods:
        for r, v in pod.requests.items():
            total[r] += v
    return total


def _beyond(pods: list[Pod], room: dict[str, int]) -> Iterator[str]:
    """The pods (in queue order) that no longer fit in `room` (what fits is taken from it)."""
    for pod in pods:
        if all(pod.requests.get(r, 0) <= left for r, left in room.items()):
            for r in room:
                room[r] -= pod.requests.get(r, 0)
        else:
            yield pod.key


def borrowing(usage: Usage, pending: Iterable[Pod], gangs: Mapping[str, Gang] | None = None) -> frozenset[str]:
    """The pending pods that would borrow (`Asking.borrowing`)."""
    return Asking.of(usage, pending, gangs).borrowing


def shared(quotas: Iterable[Quota], allocatable: Mapping[str, int]) -> dict[str, int]:
    """The resources shares count (cpu, memory and every resource a quota names), with the cluster's
    `allocatable` of each (per resource, summed over the nodes), those the cluster has."""
    names = set(ALWAYS_SHARED) | {r for q in quotas for r, _ in q.min + q.max}
    return {r: allocatable[r] for r in sorted(names) if allocatable.get(r, 0) > 0}


def cluster_allocatable(nodes: Iterable[Node]) -> dict[str, int]:
    """Per resource, the nodes' allocatable summed."""
    totals: Counter[str] = Counter()
    for n in nodes:
        totals.update(n.allocatable)
    return dict(totals)


def weight_ratio(weight: float) -> Fraction:
    """A tenant's weight as the exact ratio shares are divided by (to a thousandth)."""
    return Fraction(weight).limit_denominator(1000)


def integer_weights(tenants: list[Quota]) -> dict[str, int]:
    """The tenants' weights as whole numbers in the same ratios (for the solver's Σ weight · share²)."""
    ratios = {t.name: weight_ratio(t.weight) for t in tenants}
    common = math.lcm(*(r.denominator for r in ratios.values())) if ratios else 1
    return {name: int(r * common) for name, r in ratios.items()}


def share(use: Mapping[str, int], totals: Mapping[str, int], weight: float) -> int:
    """The weighted dominant share in thousandths, rounded up: ⌈1000 · max_r use_r / total_r / weight⌉."""
    w = weight_ratio(weight)
    top = max((Fraction(use.get(r, 0), total) for r, total in totals.items()), default=Fraction(0))
    return math.ceil(SHARE_UNIT * top / w)


def share_term(held: int, adds: list[int], total: int, weight: float) -> tuple[int, tuple[int, ...], int]:
    """One resource of a share as integers the solver can hold: (base, per-pod additions, divisor) with
    share ≥ ⌈1000 · (base + Σ additions) / divisor⌉ exactly that of `share`; reduced by their common divisor
    and, for amounts too large for the solver's 64 bits, scaled down (rounded: the share is then approximate)."""
    w = weight_ratio(weight)
    base, per, divisor = held * w.denominator, [a * w.denominator for a in adds], total * w.numerator
    g = math.gcd(divisor, base, *per)
    base, per, divisor = base // g, [a // g for a in per], divisor // g
    scale = -(-max(divisor, base + sum(per)) // SAFE_AMOUNT)
    if scale > 1:
        base, per, divisor = base // scale, [-(-a // scale) for a in per], max(1, divisor // scale)
    return base, tuple(per), divisor


SAFE_AMOUNT = 1 << 40  # times a share (at most ~10^6) and 1000, well inside 64 bits


def shown(resource: str, amount: int) -> str:
    """An amount in Kubernetes' notation: cpu in cores (millicores when not whole), memory-like resources in
    the largest binary unit that divides them, anything else as a count."""
    if resource == "cpu":
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        unit = next(((suffix, size) for suffix, size in BINARY if amount and amount % size == 0), None)
        return str(amount) if unit is None else f"{amount // unit[1]}{unit[0]}"
    return str(amount)


def figures(quota: Quota, resource: str, used: int) -> str:
    """How far a quota is in one resource, in the words every refusal and report uses:
    `ElasticQuota team-a/quota: cpu used 6 / min 4 / max 6` (an unnamed min or max says so)."""
    return f"{quota.source}: {amounts(quota, resource, used)}"


def amounts(quota: Quota, resource: str, used: int) -> str:
    """`figures` without the quota's name: `cpu used 6 / min 4 / max 6`."""
    low, high = dict(quota.min).get(resource), dict(quota.max).get(resource)
    return (f"{resource} used {shown(resource, used)} / "
            f"{'no min' if low is None else f'min {shown(resource, low)}'} / "
            f"{'no max' if high is None else f'max {shown(resource, high)}'}")
