"""Prometheus metrics (served by engine.loop.serving).

Each process owns its registry (no module-level collectors), so tests can run several schedulers. What is a
state rather than a count (pods waiting, leadership, whether a profile's policies are valid) is read when
/metrics is scraped, from the scheduler itself (`State`), so it is never stale.
"""

from __future__ import annotations

import threading
from collections import Counter as Tally
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from ..model.reasons import Code
from ..quotas.tenant_report import TenantLine
from ..quotas.tenants import SHARE_UNIT

PREFIX = "policy_scheduler"
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 1.5, 2, 3, 5, 10, 20, 30, 60, 120, 300)
SIZE_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)
PHASE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


@dataclass(frozen=True)
class State:
    """What the scheduler is now, read at each scrape: pods waiting per profile, whether this replica leads,
    whether each profile has a valid policy set loaded."""

    waiting: Callable[[], Mapping[str, int]]
    leading: Callable[[], bool]
    policies: Callable[[], Mapping[str, tuple[bool, bool, bool]]]  # profile -> (a valid set is loaded, the current
    # one is, the set in force was restored from the copy an earlier run kept)


class _StateCollector(Collector):
    def __init__(self, state: State):
        self.state = state

    def collect(self) -> Iterator[GaugeMetricFamily]:
        waiting = GaugeMetricFamily(f"{PREFIX}_pods_waiting", "Pods of this scheduler without a node (not gated, "
                                    "not assumed): waiting for a cycle, for room, or for valid policies",
                                    labels=["profile"])
        for profile, count in sorted(self.state.waiting().items()):
            waiting.add_metric([profile], count)
        yield waiting
        yield GaugeMetricFamily(f"{PREFIX}_leader", "1 while this replica holds the Lease and schedules",
                                value=1 if self.state.leading() else 0)
        loaded = GaugeMetricFamily(f"{PREFIX}_policies_loaded", "1 when the profile has a valid policy set active "
                                   "(or needs none); 0: it schedules nothing", labels=["profile"])
        valid = GaugeMetricFamily(f"{PREFIX}_policies_valid", "1 when the profile's policy ConfigMap, as it is now, "
                                  "is the active policy set; 0: it is missing or has errors", labels=["profile"])
        restored = GaugeMetricFamily(f"{PREFIX}_policies_restored", "1 when the profile schedules with the last valid "
                                     "policy set an earlier run kept (NAME-last-valid), its ConfigMap being missing "
                                     "or invalid since this replica started", labels=["profile"])
        for profile, (is_loaded, is_valid, is_restored) in sorted(self.state.policies().items()):
            loaded.add_metric([profile], 1 if is_loaded else 0)
            valid.add_metric([profile], 1 if is_valid else 0)
            restored.add_metric([profile], 1 if is_restored else 0)
        yield loaded
        yield valid
        yield restored


class TenantBoard:
    """The tenants as the last cycle left them — engine.quotas.tenant_report over its plan, from the usage its compile
    computed plus its batch, so no pass over the bound pods is made for them — and, by tenant, the pods a cycle
    left without a node that still wait (a pod leaves the board when it is bound or deleted, or when a later
    cycle places it). With several profiles the newest cycle's tenants are shown."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lines: list[TenantLine] = []
        self._waiting: dict[str, str] = {}  # pod key -> its tenant

    def record(self, lines: list[TenantLine], batch: Iterable[str], waits: Callable[[str], bool] = lambda key: True) -> None:
        """A cycle's tenants, and its batch's pods: those it left out wait under their tenant if `waits` (the
        store still shows them pending: asked under the board's lock, so a pod deleted while the cycle ran is
        either not added or forgotten after), the rest do not."""
        with self._lock:
            self._lines = lines
            for key in batch:
                self._waiting.pop(key, None)
            for line in lines:
                self._waiting.update((key, line.name) for key in line.left if waits(key))
            known = {line.name for line in lines}
            if any(tenant not in known for tenant in self._waiting.values()):  # a quota gone: its pods' entries too
                self._waiting = {key: tenant for key, tenant in self._waiting.items() if tenant in known}

    def forget(self, key: str) -> None:
        """A pod bound, deleted or terminating: it waits no more."""
        with self._lock:
            self._waiting.pop(key, None)

    def read(self) -> tuple[list[TenantLine], Tally[str]]:
        with self._lock:
            return list(self._lines), Tally(self._waiting.values())


class ReasonBoard:
    """The pods a cycle left waiting, by profile and dominant reason code (engine.model.reasons): unschedulable pods
    and preemptors waiting for their victims. A pod leaves the board when it is bound or deleted, or when a later
    cycle of its profile places it; a later cycle's code replaces its earlier one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._codes: dict[str, tuple[str, str]] = {}  # pod key -> (profile, code)
        self._profiles: set[str] = set()  # the profiles that recorded a cycle (each has a series per code)

    def record(self, profile: str, batch: Iterable[str], codes: dict[str, Code],
               waits: Callable[[str], bool] = lambda key: True) -> None:
        """A cycle's batch: its pods leave the board, those it left waiting (`codes`) come back with their code if
        `waits` (the store still shows them pending, asked under the lock as `TenantBoard.record` does)."""
        with self._lock:
            self._profiles.add(profile)
            for key in batch:
                self._codes.pop(key, None)
            self._codes.update((key, (profile, code.value)) for key, code in codes.items() if waits(key))

    def forget(self, key: str) -> None:
        with self._lock:
            self._codes.pop(key, None)

    def read(self) -> tuple[set[str], Tally[tuple[str, str]]]:
        with self._lock:
            return set(self._profiles), Tally(self._codes.values())


class _ReasonCollector(Collector):
    """`pods_waiting_by_reason{profile, reason}`: a series for every code of the set, 0 when no pod has it (a
    dashboard's panel of one code stays, and an alert on it resolves)."""

    def __init__(self, board: ReasonBoard):
        self.board = board

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(f"{PREFIX}_pods_waiting_by_reason", "Pods a cycle left waiting (unschedulable, or "
                                   "nominated until their victims leave), by profile and dominant reason code "
                                   "(docs/reason-codes.md)", labels=["profile", "reason"])
        profiles, counts = self.board.read()
        for profile in sorted(profiles):
            for code in Code:
                family.add_metric([profile, code.value], counts.get((profile, code.value), 0))
        yield family


def _value(resource: str, amount: int) -> float:
    """In Prometheus' base units: cpu in cores (the model holds millicores), anything else as the model holds it."""
    return amount / 1000 if resource == "cpu" else float(amount)


class _TenantCollector(Collector):
    """Per-tenant gauges, only while some quota exists: a quota gone (or no quota at all) has no series."""

    def __init__(self, board: TenantBoard):
        self.board = board

    def collect(self) -> Iterator[GaugeMetricFamily]:
        lines, waiting = self.board.read()
        if not lines:
            return
        per = ["tenant", "resource"]
        used = GaugeMetricFamily(f"{PREFIX}_tenant_used", "What the pods a quota covers use after the last cycle's "
                                 "plan (cpu in cores, memory in bytes)", labels=per)
        low = GaugeMetricFamily(f"{PREFIX}_tenant_min", "A tenant's guaranteed minimum of a resource", labels=per)
        high = GaugeMetricFamily(f"{PREFIX}_tenant_max", "A quota's maximum of a resource", labels=per)
        borrowed = GaugeMetricFamily(f"{PREFIX}_tenant_borrowed", "What a tenant uses beyond its min of a resource "
                                     "some tenant's min names (borrowed from others' idle minimums)", labels=per)
        for line in lines:
            for a in line.resources:
                labels = [line.name, a.resource]
                used.add_metric(labels, _value(a.resource, a.used))
                for family, amount in ((low, a.min), (high, a.max), (borrowed, a.borrowed)):
                    if amount is not None:
                        family.add_metric(labels, _value(a.resource, amount))
        yield from (used, low, high, borrowed)
        yield from _per_tenant(lines, waiting)


def _per_tenant(lines: list[TenantLine], waiting: Tally[str]) -> Iterator[GaugeMetricFamily]:
    share = GaugeMetricFamily(f"{PREFIX}_tenant_share", "A tenant's weighted dominant share of the cluster after the "
                              "last cycle's plan (0-1; the fairness tier's figure)", labels=["tenant"])
    pods = GaugeMetricFamily(f"{PREFIX}_tenant_pods_waiting", "A tenant's pods a cycle left without a node that "
                             "still wait", labels=["tenant"])
    for line in lines:
        if line.tenant:
            share.add_metric([line.name], (line.share or 0) / SHARE_UNIT)
            pods.add_metric([line.name], waiting.get(line.name, 0))
    yield share
    yield pods


WAIT_BUCKETS = (60, 300, 900, 1800, 3600, 2 * 3600, 4 * 3600, 8 * 3600, 24 * 3600, 7 * 24 * 3600)


@dataclass
class Metrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        r, p = self.registry, PREFIX
        self.batches = Counter(f"{p}_batches", "Scheduling cycles run", ["profile"], registry=r)
        self.batch_size = Histogram(f"{p}_batch_size", "Pending pods per cycle", ["profile"],
                                    buckets=SIZE_BUCKETS, registry=r)
        self.solve_seconds = Histogram(f"{p}_solve_seconds", "Seconds from snapshot to plan", ["profile"], registry=r)
        self.pods_bound = Counter(f"{p}_pods_bound", "Pods bound to a node", ["profile"], registry=r)
        self.unschedulable = Counter(f"{p}_pods_unschedulable", "Pod attempts left without a node", ["profile"],
                                     registry=r)
        self.bind_errors = Counter(f"{p}_bind_errors", "Bindings the apiserver refused or never got", ["profile"],
                                   registry=r)
        self.latency = Histogram(f"{p}_pending_to_bound_seconds", "From first seen pending to bound", ["profile"],
                                 buckets=LATENCY_BUCKETS, registry=r)
        self.preemptors = Counter(f"{p}_preemptors", "Pods placed by evicting lower-priority pods", ["profile"],
                                  registry=r)
        self.victims = Counter(f"{p}_preemption_victims", "Running pods evicted for a higher-priority pod",
                               ["profile"], registry=r)
        self.budget_violations = Counter(f"{p}_preemption_budget_violations",
                                         "Evictions that went over a PodDisruptionBudget (nothing else placed the pod)",
                                         ["profile"], registry=r)
        self.events_dropped = Counter(f"{p}_events_dropped", "Events and status writes dropped: the outbox was full",
                                      registry=r)
        self.policy_reloads = Counter(f"{p}_policy_reloads", "Policy ConfigMap loads", ["profile", "result"],
                                      registry=r)
        self.phase_seconds = Histogram(f"{p}_cycle_phase_seconds", "Seconds of each phase of a cycle's plan "
                                       "(compile, start, model, solve: the dry-run's stats.phases; bind)",
                                       ["profile", "phase"], buckets=PHASE_BUCKETS, registry=r)
        self.gap = Gauge(f"{p}_optimality_gap", "The last plan's relative distance from the proven bound on pods "
                         "placed (0: optimal; stats.gap)", ["profile"], registry=r)
        self.reservations = Gauge(f"{p}_reservations", "Pods or gangs holding a reservation for room that frees later "
                                  "(time in the plan)", ["profile"], registry=r)
        self.estimated_wait = Histogram(f"{p}_estimated_wait_seconds", "A waiting pod's estimated wait until it "
                                        "starts, per cycle that left it out", ["profile"],
                                        buckets=WAIT_BUCKETS, registry=r)
        self.tenants = TenantBoard()
        r.register(_TenantCollector(self.tenants))
        self.reasons = ReasonBoard()
        r.register(_ReasonCollector(self.reasons))

    def watch_state(self, state: State) -> None:
        """Serve `state` on /metrics from now on (pods waiting, leader, policies valid)."""
        self.registry.register(_StateCollector(state))
