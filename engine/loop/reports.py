"""What a profile's loop tells: events and conditions on the objects a cycle read, and the cycle's metrics.

Everything here goes out through the event sink (never holding up a cycle or a bind) or into the metrics; the
loop's other parts say what happened, this module says it to the cluster and to the operator.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass

from ..isolation import failure
from ..objects import NATIVE_POD_GROUP
from ..plan import Stats
from ..rejections import joined
from .binder import SCHEDULER_ERROR, UNSCHEDULABLE, BindReport, EventSink
from .cycle import CycleResult
from .metrics import Metrics
from .ports import Obj
from .store import Store

log = logging.getLogger("policy_scheduler.loop")


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a cycle planned, kept for the record written once its binds are done."""

    batch: list[str]
    stats: Stats
    solved: float  # seconds from snapshot to plan
    unplaced: int
    started: float  # perf_counter at the cycle's start


@dataclass
class Reporter:
    name: str  # the profile's
    store: Store
    events: EventSink
    metrics: Metrics

    def cycle(self, batch: list[str], pods: dict[str, Obj], result: CycleResult) -> dict[str, list[str]]:
        """Tell what a cycle's plan says: objects it could not read, planning failures (logged), the batch's
        pods left out (their reasons; returned) and the native PodGroups' conditions."""
        self._refused(result)
        for failed in result.plan.details.failures:
            log.error("planning failed profile=%s pods=%s: %s\n%s", self.name, list(failed.pods), failed.error,
                      failed.trace)
        unplaced = result.unplaced()
        errors = set(result.plan.details.errors)
        for key, reason in result.refused_pods().items():
            if key in batch:
                unplaced[key] = [f"the scheduler cannot read this pod: {reason}"]
                errors.add(key)
        for key, reasons in unplaced.items():
            if key in pods:
                self.events.unschedulable(pods[key], joined(reasons) or "no node fits",
                                          SCHEDULER_ERROR if key in errors else UNSCHEDULABLE)
        for key, (scheduled, reason, message) in result.group_conditions().items():
            if (group := self.store.get(NATIVE_POD_GROUP, *key.split("/", 1))) is not None:
                self.events.group_scheduled(group, scheduled, message, reason)
        self._time(result)
        return unplaced

    def _time(self, result: CycleResult) -> None:
        """Time in the plan: the reservations held, and how long each waiting pod is expected to wait."""
        plan, now = result.plan, result.cluster.now
        self.metrics.reservations.labels(self.name).set(len(plan.reservations))
        for estimate in plan.estimates.values():
            if estimate.start is not None and now is not None:
                self.metrics.estimated_wait.labels(self.name).observe(max(0.0, estimate.start - now))

    def _refused(self, result: CycleResult) -> None:
        """Objects other than pods the model could not read: an event on each (the sink tells each once)."""
        for refusal in result.refused:
            ref = refusal.ref
            if ref is not None and ref.kind != "Pod" and (obj := self.store.get(ref.kind, ref.namespace, ref.name)):
                self.events.refused(obj, refusal.message)

    def refused_alone(self, unit: list[str], error: Exception) -> None:
        """Pods whose cycle fails even alone: logged, and each told why."""
        failed = failure(unit, error)
        log.error("cycle failed for pods=%s alone: %s\n%s", unit, failed.error, failed.trace)
        for key in unit:
            if (obj := self.store.get("Pod", *key.split("/", 1))) is not None:
                self.events.unschedulable(obj, failed.reason, SCHEDULER_ERROR)

    def no_policies(self, waiting: Iterable[Obj], why: str) -> None:
        """No valid policy set: each waiting pod gets a Warning event saying why."""
        for pod in waiting:
            self.events.unschedulable(pod, f"not scheduled: scheduler profile {self.name} has no valid policy set "
                                      f"({why}); pods wait until the policies load", SCHEDULER_ERROR)

    def bad_policies(self, configmap: Obj, message: str) -> None:
        self.metrics.policy_reloads.labels(self.name, "failed").inc()
        self.events.event(configmap, "Warning", "InvalidPolicy", f"policies not reloaded, previous ones stay active: {message}")

    def policies_reloaded(self) -> None:
        self.metrics.policy_reloads.labels(self.name, "ok").inc()

    def record(self, o: Outcome, report: BindReport, bind_seconds: float) -> None:
        """A cycle's metrics and log line, once its binds are done."""
        m, name = self.metrics, self.name
        m.batches.labels(name).inc()
        m.batch_size.labels(name).observe(len(o.batch))
        m.solve_seconds.labels(name).observe(o.solved)
        m.pods_bound.labels(name).inc(len(report.bound))
        m.unschedulable.labels(name).inc(o.unplaced)
        m.bind_errors.labels(name).inc(len(report.failed) + len(report.gone))
        for phase, seconds in (o.stats.phases.to_dict() if o.stats.phases else {}).items():
            m.phase_seconds.labels(name, phase).observe(seconds)
        m.phase_seconds.labels(name, "bind").observe(bind_seconds)
        m.gap.labels(name).set(o.stats.gap or 0.0)
        log.info("cycle profile=%s pods=%d bound=%d unschedulable=%d bind_errors=%d status=%s solve_s=%.3f total_s=%.3f",
                 name, len(o.batch), len(report.bound), o.unplaced, len(report.failed) + len(report.gone),
                 o.stats.status, o.solved, time.perf_counter() - o.started)
