"""What a profile's loop tells: events and conditions on the objects a cycle read, and the cycle's metrics.

Everything here goes out through the event sink (never holding up a cycle or a bind) or into the metrics; the
loop's other parts say what happened, this module says it to the cluster and to the operator.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..model.rejections import joined
from ..planning.isolation import failure
from ..planning.plan import Stats
from ..reading.objects import NATIVE_POD_GROUP
from .binder import CONDITION_MESSAGE_LIMIT, SCHEDULER_ERROR, UNSCHEDULABLE, BindReport, EventSink
from .cycle import CycleResult, refused_group_reason
from .metrics import Metrics
from .policies import PolicyHolder, Standing
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
    server: Callable[[], tuple[int, int] | None] = lambda: None  # the apiserver's release, once read

    def cycle(self, batch: list[str], pods: dict[str, Obj], result: CycleResult) -> dict[str, list[str]]:
        """Tell what a cycle's plan says: objects it could not read, planning failures (logged), the batch's
        pods left out (their reasons; returned) and the native PodGroups' conditions."""
        self._refused(result)
        for failed in result.plan.details.failures:
            log.error("planning failed profile=%s pods=%s: %s\n%s", self.name, list(failed.pods), failed.error,
                      failed.trace)
        unplaced = result.unplaced()
        errors = set(result.plan.details.errors)
        codes, expected = result.codes(batch), result.expected_starts()
        for key, reason in result.refused_pods().items():
            if key in batch:
                unplaced[key] = [f"the scheduler cannot read this pod: {reason}"]
                errors.add(key)
        for key, reasons in unplaced.items():
            if key in pods:
                self.events.unschedulable(pods[key], joined(reasons) or "no node fits",
                                          SCHEDULER_ERROR if key in errors else UNSCHEDULABLE, codes.get(key),
                                          expected.get(key))
        groups = result.group_conditions(refused_group_reason(self.server()))
        for key, (scheduled, reason, message) in groups.items():
            if (group := self.store.get(NATIVE_POD_GROUP, *key.split("/", 1))) is not None:
                self.events.group_scheduled(group, scheduled, message, reason)
        for key, (scheduled, reason, message) in result.composite_conditions(groups).items():
            if (group := self.store.get("CompositePodGroup", *key.split("/", 1))) is not None:
                self.events.group_scheduled(group, scheduled, message, reason)
        self._time(result)
        return unplaced

    def _time(self, result: CycleResult) -> None:
        """Time in the plan: the reservations held, and how long each waiting pod is expected to wait."""
        plan, now = result.plan, result.now
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

    def bad_policies(self, configmap: Obj, message: str, standing: str) -> None:
        """A new version of the policy ConfigMap has errors: an event on it, saying what is in force instead."""
        self.metrics.policy_reloads.labels(self.name, "failed").inc()
        self.events.event(configmap, "Warning", "InvalidPolicy", f"policies not loaded: {message}; {standing}")

    def standing(self, holder: PolicyHolder, missing: Obj | None) -> None:
        """What the profile schedules with changed: logged; while its ConfigMap does not exist, also an event on the
        copy kept beside it (`missing`), the object the operator finds there instead."""
        words = holder.describe()
        if holder.valid:
            log.info("policies profile=%s standing=%s: %s", self.name, holder.standing.value, words)
            return
        log.warning("policies profile=%s standing=%s problem=%r: %s", self.name, holder.standing.value,
                    holder.problem, words)
        if missing is not None and holder.standing in (Standing.RESTORED, Standing.NOTHING):
            self.events.event(missing, "Warning", "MissingPolicy", f"{holder.problem}; {words}")

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


POLICY_CONDITION = "policy-scheduler/PoliciesValid"  # the condition on the scheduler's own pod


def policy_condition(profiles: Iterable[tuple[str, PolicyHolder]]) -> tuple[str, str, str]:
    """(status, reason, message) of the scheduler pod's policy condition: True when every profile schedules with its
    ConfigMap as it is now; False with LastValidPolicies when some profile schedules with the last valid set (kept in
    memory or restored from its kept copy), NoValidPolicies when some profile has none and schedules nothing."""
    off = [(name, holder) for name, holder in profiles if not holder.valid]
    if not off:
        return "True", "PoliciesValid", "every profile schedules with its policy ConfigMap as it is now"
    reason = "NoValidPolicies" if any(not holder.ready for _, holder in off) else "LastValidPolicies"
    return "False", reason, "; ".join(f"profile {name}: {holder.problem or 'not loaded'}: {holder.describe()}"
                                      for name, holder in off)


@dataclass
class PolicyCondition:
    """The scheduler's own pod says what its profiles schedule with (`POLICY_CONDITION`), written when that changes.
    Every replica writes its own (a standby holds policies too); none without the pod's name (`run` outside a pod)."""

    events: EventSink
    pod: tuple[str, str] | None  # namespace, name
    _last: tuple[str, str, str] | None = None
    _since: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def update(self, profiles: Iterable[tuple[str, PolicyHolder]]) -> None:
        profiles = list(profiles)
        if self.pod is None or any(holder.standing is Standing.UNLOADED for _, holder in profiles):
            return  # (at the start, until every profile has read its ConfigMap)
        status, reason, message = policy_condition(profiles)
        with self._lock:
            if self._last == (status, reason, message):
                return
            if self._last is None or self._last[0] != status:
                self._since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            self._last = status, reason, message
            condition = {"type": POLICY_CONDITION, "status": status, "reason": reason,
                         "message": message[:CONDITION_MESSAGE_LIMIT], "lastTransitionTime": self._since}
            self.events.pod_condition(*self.pod, condition)
