"""A profile's bind stage: what follows a cycle's plan, off the cycle's thread. Binds (the binder does the PreBind
steps), evictions, and the preemptors' nominations until their victims leave.

Batches bind while the next ones plan, several at once: a lone pod's bind never waits for the batch before it
(the assumptions keep later batches off this one's capacity).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from ..planning.plan import Eviction, Preemption
from ..reading.objects import NATIVE_POD_GROUP
from .binder import SCHEDULER_ERROR, Binder, BindReport, EventSink, Placement
from .cache import ClusterCache
from .metrics import Metrics
from .nominations import Nomination, Nominations
from .policies import PolicyHolder
from .profile import unit_of
from .queue import PodQueue
from .reports import Outcome, Reporter
from .store import Store, meta, node_of

log = logging.getLogger("policy_scheduler.loop")

BIND_STAGES = 8  # batches binding at once (their binds share the binder's pool)


class StagePool:
    """The bind stage's threads, with the futures handed to them tracked so `flush` can wait for them all."""

    def __init__(self, name: str) -> None:
        self._pool = ThreadPoolExecutor(max_workers=BIND_STAGES, thread_name_prefix=f"bind-stage-{name}")
        self._futures: set[Future] = set()
        self._lock = threading.Lock()

    def submit(self, call: Callable[..., Any], *args: Any) -> Future:
        return self.track(self._pool.submit(call, *args))

    def track(self, future: Future) -> Future:
        """`future` counted among the stage's work (`flush` waits for it too), though no thread of the pool runs it."""
        with self._lock:
            self._futures.add(future)
        future.add_done_callback(self._done)
        return future

    def _done(self, future: Future) -> None:
        with self._lock:
            self._futures.discard(future)

    def flush(self) -> None:
        """Wait until every call handed to the pool so far is done."""
        while True:
            with self._lock:
                pending = list(self._futures)
            if not pending:
                return
            wait(pending)

    def shutdown(self, wait: bool = True) -> None:
        self._pool.shutdown(wait=wait)


@dataclass
class BindStage:
    pool: StagePool = field(init=False)
    nominations: Nominations = field(init=False)  # preemptors waiting for their victims to leave
    name: str  # the profile's
    victims_timeout: float  # seconds a preemptor waits for its victims to leave before giving up
    binder: Binder
    store: Store
    cache: ClusterCache
    queue: PodQueue
    policies: PolicyHolder
    events: EventSink
    metrics: Metrics
    reports: Reporter

    def __post_init__(self) -> None:
        self.pool = StagePool(self.name)
        self.nominations = Nominations()

    def start(self, placements: list[Placement], preemptions: dict[str, Preemption], outcome: Outcome,
              early: Future[BindReport] | None = None) -> Future[BindReport]:
        """A cycle's placements: the preemptors' evictions and nominations, and the binds of the rest; `early`: the
        binds of the cycle's placements handed on before (`bind_early`), counted in the cycle's report."""
        nominated = [p for p in placements if p.key in preemptions]
        if nominated:
            self.submit(self._preempt, nominated, preemptions)
        rest = [p for p in placements if p.key not in preemptions]
        if early is not None and not rest:  # the usual case: no thread of the stage waits for the early binds
            return self._record_after(early, outcome)
        return self.submit(self._bind, rest, outcome, early)

    def bind_early(self, placements: list[Placement]) -> Future[BindReport]:
        """Placements final before their cycle is (engine.planning.plan.placed_plan): bound now, reported with the cycle."""
        return self.submit(self._send, placements)

    def submit(self, call: Callable[..., Any], *args: Any) -> Future:
        return self.pool.submit(call, *args)

    def flush(self) -> None:
        """Wait until every bind (and eviction) handed to the bind stage so far is done."""
        self.pool.flush()

    def shutdown(self, wait: bool = True) -> None:
        self.pool.shutdown(wait)

    def victim_gone(self, key: str) -> None:
        """A pod left the cluster: the nominations it was the last victim of bind now."""
        for nomination in self.nominations.gone(key):
            self.submit(self._bind, nomination.placements)

    def _bind(self, placements: list[Placement], outcome: Outcome | None = None,
              early: Future[BindReport] | None = None) -> BindReport:
        """Bind, requeue what failed, record the cycle (with the report of its `early` binds)."""
        bind_started = time.perf_counter()
        report = self._send(placements)
        if early is not None:
            report = _joined(_result_of(early), report)
        if outcome is not None:
            self.reports.record(outcome, report, time.perf_counter() - bind_started)
        else:
            self.metrics.pods_bound.labels(self.name).inc(len(report.bound))
        return report

    def _record_after(self, early: Future[BindReport], outcome: Outcome) -> Future[BindReport]:
        """A future of the cycle's report, recorded when its early binds are done."""
        recorded: Future[BindReport] = self.pool.track(Future())
        started = time.perf_counter()

        def record(done: Future[BindReport]) -> None:
            report = _result_of(done)
            try:
                self.reports.record(outcome, report, time.perf_counter() - started)
            finally:
                recorded.set_result(report)
        early.add_done_callback(record)
        return recorded

    def _send(self, placements: list[Placement]) -> BindReport:
        """Bind and requeue what failed. A crash forgets and requeues all."""
        if not placements:
            return BindReport()
        try:
            report = self.binder.bind_all(placements)
        except Exception:
            log.exception("binding failed profile=%s pods=%d", self.name, len(placements))
            self.recover([p.key for p in placements])
            raise
        for key in report.failed:
            self.queue.requeue(key)  # an apiserver error: the pod is still pending and ours, retry after a backoff
        for p in placements:
            if p.key in report.gone:
                self._await_watch(p)
        return report

    def _await_watch(self, p: Placement) -> None:
        """After a 409 the binder has forgotten the assumption and the pod is not retried blindly: the watch
        decides. Bound or deleted in the store already: the queue has let it go. Replaced by a pod of the same
        name: that one waits in line. Otherwise it is parked until the watch shows what became of it."""
        current = self.store.get("Pod", *p.key.split("/", 1))
        if current is None or node_of(current):
            return  # deleted or bound: the watch event removed it from the queue
        self.queue.park(p.key)
        if meta(current).get("uid") != p.uid:  # already replaced by another pod of that name: it waits in line
            self.queue.add(p.key, unit_of(current, self.policies.rules.gangs))

    def _preempt(self, nominated: list[Placement], preemptions: dict[str, Preemption]) -> None:
        """Evict the victims, nominate the preemptors, and wait for the victims to leave."""
        victims = {v.pod: (v, key) for key, p in preemptions.items() for v in p.victims}
        for group_key in sorted({v.group for v, _ in victims.values() if v.group}):
            if (group := self.store.get(NATIVE_POD_GROUP, *group_key.split("/", 1))) is not None:
                self.events.group_disrupted(group, f"{self.name}: preempting to accommodate a higher priority pod")
        results = self.binder.evict_all([(self.store.get("Pod", *k.split("/", 1)), _why_evicted(key, preemptions[key], v))
                                         for k, (v, key) in victims.items()])
        refused = {k: r for k, r in zip(victims, results) if not r.ok}
        failed = list(refused)
        m = self.metrics
        m.preemptors.labels(self.name).inc(len(nominated))
        m.victims.labels(self.name).inc(len(victims) - len(failed))
        m.budget_violations.labels(self.name).inc(sum(1 for v, _ in victims.values() if v.over_budget))
        if failed:
            log.warning("preemption abandoned profile=%s victims_not_evicted=%s", self.name,
                        [f"{k} status={r.status} {r.message}" for k, r in refused.items()])
            self.cache.kept(failed)
            self._abandon(nominated, f"could not evict {', '.join(failed)}")
            return
        for p in nominated:
            self.events.nominate(p.pod, p.node, len(preemptions[p.key].victims))
        nomination = Nomination(nominated, set(victims), time.monotonic() + self.victims_timeout)
        if not self.nominations.add(nomination, lambda key: self.store.get("Pod", *key.split("/", 1)) is not None):
            self._bind(nominated)

    def give_up_late_nominations(self) -> None:
        for nomination in self.nominations.expired():
            self._abandon(nomination.placements, f"victims still present after {self.victims_timeout:g}s: "
                          f"{', '.join(sorted(nomination.victims)[:5])}")

    def _abandon(self, placements: list[Placement], why: str) -> None:
        """Give up preemptors' claims: forgotten in the store, back in the queue, told why."""
        self.recover([p.key for p in placements])
        for p in placements:
            self.events.unschedulable(p.pod, f"preemption on {p.node} given up: {why}", SCHEDULER_ERROR)

    def recover(self, keys: list[str]) -> None:
        """Pods whose claims are given up: forgotten in the store, back in line after a backoff."""
        for key in keys:
            self.store.forget(key)
        for key in keys:
            self.queue.requeue(key)


def _result_of(early: Future[BindReport]) -> BindReport:
    """The early binds' report; nothing when they crashed (`_send` has recovered their pods and logged it)."""
    try:
        return early.result()
    except Exception:  # logged where it happened (`_send`)
        return BindReport()


def _joined(a: BindReport, b: BindReport) -> BindReport:
    return BindReport(a.bound + b.bound, {**a.failed, **b.failed}, a.gone + b.gone)


def _why_evicted(preemptor: str, preemption: Preemption, victim: Eviction) -> str:
    """The eviction's reason (the victim's Preempted event): who preempted it where, and for which quota's min when
    it was reclaimed from its tenant's borrowed room."""
    why = f"preempted by {preemptor} (priority {preemption.priority}) on node {victim.node}"
    if victim.quota is None:
        return why
    return f"{why}, reclaiming the min of {preemption.reclaim} from what {victim.quota} uses beyond its min"
