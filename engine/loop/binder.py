"""Binding and telling users why: bounded parallel binds, Scheduled/FailedScheduling events, conditions.

Placed pods are assumed in the store before any bind is sent (the caller does that); here a failed bind
forgets the pod and sends it back to the queue. A gang is bound only when every placed member is still
the pod that was planned (same UID, still unbound); otherwise none of it is bound and it is retried.
The plan itself places gangs all-or-nothing; if the apiserver refuses some binds of a gang, the gang is
left part-bound (a Binding cannot be undone) and that is reported on each member.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field

from ..devices.dra import ClaimAllocation
from ..devices.storage import VolumeStep
from ..model.reasons import Code, ExpectedStart, prefixed
from ..reading.convert.native_groups import is_legacy
from ..reading.objects import NATIVE_POD_GROUP
from .devices import ClaimPreBind
from .ports import ApiResult, ClusterAPI, Obj
from .recorder import EventRecorder, Write, event_name
from .runtime import RuntimePolicy
from .store import Store, meta, node_of, pod_key
from .volumes import VolumePreBind

log = logging.getLogger("policy_scheduler.binder")
CONFLICT = 409
# the scheduling.k8s.io PodGroup condition upstream writes: 1.37's (v1beta1) once, until the first success;
# 1.36's (v1alpha2) the same way under its own name
POD_GROUP_INITIALLY_SCHEDULED, POD_GROUP_SCHEDULED = "PodGroupInitiallyScheduled", "PodGroupScheduled"
COMPOSITE_SCHEDULED, COMPOSITE = "CompositePodGroupInitiallyScheduled", "CompositePodGroup"
DISRUPTION_TARGET, PREEMPTION_BY_SCHEDULER = "DisruptionTarget", "PreemptionByScheduler"  # its other condition
CONDITION_MESSAGE_LIMIT = 32_768  # metav1.Condition's message limit
# the events outbox's threads: enough that a stream's events keep pace with its binds (at 300 binds/s, 2 left a
# backlog written after the last bind, and the apiserver and etcd spent 12% more on the same writes: BENCHMARKS.md,
# issue 53, runs C and E); binds still go first, the events waiting for a quiet moment (DEFER)
EVENT_WRITERS = 8
STATUS_WRITERS = 1  # the status outbox's (conditions, nominations, PodGroup status)
DEFER = 0.5  # seconds a write waits, at most, for a moment with no pod in hand (Outbox)
UNSCHEDULABLE, SCHEDULER_ERROR = "Unschedulable", "SchedulerError"  # PodScheduled=False's reasons (v1.PodReason…)
CANNOT_READ = "SchedulerCannotRead"  # the event reason on an object the model refused


@dataclass(frozen=True, slots=True)
class Placement:
    key: str  # namespace/name
    node: str
    pod: Obj  # the manifest the plan was made from
    gang: str | None = None  # the key of its gang (model.Gang), from the plan
    volumes: tuple[VolumeStep, ...] | None = ()  # its claims' PreBind writes (None: no longer met on the node)
    claims: tuple[str, ...] = ()  # its ResourceClaims (namespace/name), each reserved for it before the bind
    devices: dict[str, ClaimAllocation] = field(default_factory=dict)  # claims it allocates: what Reserve chose

    @property
    def uid(self) -> str:
        return str(meta(self.pod).get("uid") or "")


@dataclass(slots=True)
class BindReport:
    bound: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # key -> why
    gone: list[str] = field(default_factory=list)  # 409 or deleted/replaced: not retried blindly


class Outbox:
    """Best-effort writes from a few threads through a bounded queue: a full queue drops the write and counts it.

    Events and conditions must never hold up binds, nor grow memory without bound when the apiserver is slow;
    kube-scheduler's event broadcaster drops the same way. Few writers (2) against many binders (16) keep the
    apiserver's time for bindings; the backlog drains after the batch.

    Given the process's `runtime` (engine.loop.runtime), a write also waits (up to `defer` seconds after it was
    submitted) for a moment with no pod in hand: in a stream the next pod's cycle and bind then do not share the GIL,
    nor the apiserver, with the last pod's Scheduled event. In a batch, where pods are always in hand, the writes flow
    `defer` seconds late. Only writes whose lateness harms nothing (events) wait so (`EventSink`).
    """

    def __init__(self, workers: int = EVENT_WRITERS, capacity: int = 10_000, on_drop: Callable[[], None] = lambda: None,
                 runtime: RuntimePolicy | None = None, defer: float = DEFER, clock: Callable[[], float] = time.monotonic,
                 name: str = "events"):
        self._queue: queue.Queue[tuple[Callable[..., object], tuple[object, ...], float] | None] = queue.Queue(capacity)
        self._on_drop = on_drop
        self._runtime, self._defer, self._clock = runtime, defer, clock
        self._threads = [threading.Thread(target=self._drain, name=f"{name}-{i}", daemon=True) for i in range(workers)]
        for thread in self._threads:
            thread.start()

    def submit(self, call: Callable[..., object], *args: object) -> None:
        try:
            self._queue.put_nowait((call, args, self._clock()))
        except queue.Full:
            self._on_drop()

    def _drain(self) -> None:
        while (item := self._queue.get()) is not None:
            call, args, submitted = item
            if self._runtime is not None and (left := submitted + self._defer - self._clock()) > 0:
                self._runtime.wait_quiet(left)
            try:
                call(*args)
            except Exception as exc:
                log.warning("event/status write failed error=%r", str(exc))

    def close(self) -> None:
        """Write what is queued, then stop."""
        for _ in self._threads:
            self._queue.put(None)
        for thread in self._threads:
            thread.join()


class EventSink:
    """Events and conditions go out through outboxes of their own: a slow event never delays a bind.

    Events wait for a moment with no pod in hand (`Outbox`, given the process's runtime policy); status writes (a pod's
    PodScheduled=False, a nomination, a PodGroup's conditions) go at once, through a second outbox: a condition
    held back could land after the pod's Binding and mark a bound pod unschedulable.

    A pod that stays unschedulable has one FailedScheduling Event object, counted and patched as client-go's
    recorder does (engine/loop/recorder.py), so many waiting pods retried often do not flood the apiserver with
    events; one write per pod is under way at a time (a create and its first patch never race).
    """

    def __init__(self, api: ClusterAPI, workers: int = EVENT_WRITERS, clock: Callable[[], float] = time.monotonic,
                 capacity: int = 10_000, on_drop: Callable[[], None] = lambda: None, min_interval: float = 10.0,
                 runtime: RuntimePolicy | None = None):
        self.api = api
        self.outbox = Outbox(workers, capacity, on_drop, runtime)  # events
        self.status = Outbox(STATUS_WRITERS, capacity, on_drop, name="status")
        self._recorder = EventRecorder(clock, min_interval=min_interval)
        self._writing: set[str] = set()  # pods whose FailedScheduling write is under way
        self._refused: set[tuple[str, str]] = set()  # (object, message) told already
        self._lock = threading.Lock()

    def event(self, involved: Obj, type_: str, reason: str, message: str) -> None:
        self.outbox.submit(self.api.create_event, involved, type_, reason, message)

    def unschedulable(self, pod: Obj, message: str, reason: str = UNSCHEDULABLE, code: Code | None = None,
                      expected: ExpectedStart | None = None) -> None:
        """Condition PodScheduled=False with `reason` (Unschedulable; SchedulerError when an error, not a lack of
        room, kept the pod out: a bind or PreBind failure, an object the engine could not evaluate), only when
        it changes, and the pod's one FailedScheduling event series. The condition's message opens with the reason
        code (`code`; SchedulerError's by default for that reason): the reason stays upstream's, which the
        cluster-autoscaler and kubectl read; the event says the words alone, as upstream's. When the plan has a time
        for the pod (`expected`: its reservation or estimate), that follows the code in the one fixed form the `queue`
        view reads; it changes only when the words' times do, so it adds no write."""
        m = meta(pod)
        code = code or (Code.SCHEDULER_ERROR if reason == SCHEDULER_ERROR else None)
        said = message if code is None else prefixed(code, message, expected)
        if _failed_condition(pod) != (reason, said):
            self.status.submit(self.api.set_unschedulable, m.get("namespace") or "default", m["name"], said, reason)
        self._tell(pod, message)

    def _tell(self, pod: Obj, message: str) -> None:
        """The pod's FailedScheduling series goes on with `message`: written now, or counted for the next write."""
        uid = str(meta(pod).get("uid") or pod_key(pod))
        with self._lock:
            write = self._recorder.record(uid, message, event_name(meta(pod)))
            if write is None or uid in self._writing:
                return  # counted: the next write says it
            self._writing.add(uid)
        self.outbox.submit(self._write_failed, pod, uid, write)

    def _write_failed(self, pod: Obj, uid: str, write: Write) -> None:
        """Create the pod's FailedScheduling Event, or patch it; a series whose object is gone goes on in a new one."""
        namespace = meta(pod).get("namespace") or "default"
        try:
            if write.create or not self.api.update_event(namespace, write.name, write.message, write.count):
                name = write.name if write.create else event_name(meta(pod))
                self.api.create_event(pod, "Warning", "FailedScheduling", write.message, name, write.count)
                if not write.create:
                    with self._lock:
                        self._recorder.recreated(uid, name)
        finally:
            with self._lock:
                self._writing.discard(uid)

    def refused(self, obj: Obj, message: str) -> None:
        """An object the scheduler cannot read (not a pod: the pods that depend on it are told on their own): a
        Warning event on it and a log line, once per object and message."""
        m = meta(obj)
        key = (str(m.get("uid") or f"{obj.get('kind')}/{m.get('namespace')}/{m.get('name')}"), message)
        with self._lock:
            if key in self._refused:
                return
            self._refused.add(key)
        log.warning("object left out of scheduling kind=%s name=%s/%s: %s", obj.get("kind"), m.get("namespace") or "",
                    m.get("name"), message)
        self.event(obj, "Warning", CANNOT_READ, f"left out of scheduling by the policy-scheduler: {message}")

    def forget(self, pod: Obj) -> None:
        """The pod was placed or is gone: its series is over."""
        with self._lock:
            self._recorder.forget(str(meta(pod).get("uid") or pod_key(pod)))

    def group_scheduled(self, group: Obj, scheduled: bool, message: str, reason: str = "") -> None:
        """A scheduling.k8s.io PodGroup's scheduling condition as upstream writes it (`group_condition_type`):
        True/Scheduled, or False with `reason` (Unschedulable: the plan's reasons; SchedulerError: the group was
        refused); never back to False once True, nothing when unchanged."""
        kind = group_condition_type(group)
        old = _condition(group, kind)
        if old is not None and old.get("status") == "True":
            return
        self._group_condition(group, kind, scheduled, "Scheduled" if scheduled else reason or UNSCHEDULABLE, message)

    def group_disrupted(self, group: Obj, message: str) -> None:
        """A PodGroup with `disruptionMode: PodGroup` (v1beta1: `{all: {}}`) preempted whole: its DisruptionTarget
        condition (True/PreemptionByScheduler, the condition and reason both API versions define)."""
        self._group_condition(group, DISRUPTION_TARGET, True, PREEMPTION_BY_SCHEDULER, message)

    def _group_condition(self, group: Obj, kind: str, true: bool, reason: str, message: str) -> None:
        """Set one condition of a PodGroup's status (status subresource, conditional on its resourceVersion);
        nothing when it says so already."""
        m, status = meta(group), group.get("status") or {}
        conditions = [c for c in status.get("conditions") or [] if isinstance(c, dict)]
        old = _condition(group, kind)
        want = "True" if true else "False"
        message = message[:CONDITION_MESSAGE_LIMIT]
        if old is not None and (old.get("status"), old.get("reason"), old.get("message")) == (want, reason, message):
            return
        changed = old is None or old.get("status") != want
        new = {"type": kind, "status": want, "reason": reason, "message": message,
               "observedGeneration": m.get("generation") or 0,
               "lastTransitionTime": _now() if changed else old.get("lastTransitionTime")}  # type: ignore[union-attr]
        body = {"metadata": {"resourceVersion": m.get("resourceVersion")},
                "status": {"conditions": [c for c in conditions if c.get("type") != kind] + [new]}}
        kind = COMPOSITE if group.get("kind") == COMPOSITE else NATIVE_POD_GROUP
        self.status.submit(self._patch_group, kind, m.get("namespace") or "default", m["name"], body)

    def _patch_group(self, kind: str, namespace: str, name: str, body: Obj) -> None:
        result = self.api.patch(kind, namespace, name, body, "status")
        if not result.ok:
            log.warning("podgroup condition write failed podgroup=%s/%s status=%s message=%r", namespace, name,
                        result.status, result.message)

    def pod_condition(self, namespace: str, name: str, condition: Obj) -> None:
        """One condition of a pod's status (merged by type), at once."""
        self.status.submit(self.api.set_condition, namespace, name, condition)

    def nominate(self, pod: Obj, node: str, victims: int) -> None:
        """status.nominatedNodeName (as kube-scheduler sets it) and a Nominated event: the pod waits for room."""
        m = meta(pod)
        self.status.submit(self.api.nominate, m.get("namespace") or "default", m["name"], node)
        self.event(pod, "Normal", "Nominated", f"nominated to {node}: waiting for {victims} preempted pod(s) to leave"
                   if victims else f"nominated to {node}: waiting for pods preempted there to leave")

    def close(self) -> None:
        self.status.close()
        self.outbox.close()


def group_condition_type(group: Obj) -> str:
    """The condition a scheduling.k8s.io PodGroup's scheduling outcome goes into, by the API version it was read
    at: PodGroupScheduled in v1alpha2 (1.36), PodGroupInitiallyScheduled from v1beta1 on (1.37)."""
    if group.get("kind") == COMPOSITE:
        return COMPOSITE_SCHEDULED
    return POD_GROUP_SCHEDULED if is_legacy(group.get("apiVersion")) else POD_GROUP_INITIALLY_SCHEDULED


def _condition(obj: Obj, kind: str) -> dict | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or []
                 if isinstance(c, dict) and c.get("type") == kind), None)


def _failed_condition(pod: Obj) -> tuple[str, str] | None:
    """The reason and message of the pod's PodScheduled=False condition, if it has one."""
    cond = _condition(pod, "PodScheduled")
    if cond is None or cond.get("status") != "False":
        return None
    return str(cond.get("reason")), str(cond.get("message"))


class Binder:
    def __init__(self, api: ClusterAPI, store: Store, events: EventSink, workers: int = 16,
                 pool: Executor | None = None, runtime: RuntimePolicy | None = None):
        self.api = api
        self.runtime = runtime or RuntimePolicy()  # a bind call's placements are pods in hand
        self.store = store
        self.events = events
        self.pool = pool or ThreadPoolExecutor(max_workers=workers, thread_name_prefix="bind")
        self.volumes = VolumePreBind(api, store)
        self.claims = ClaimPreBind(api, store)

    def bind_all(self, placements: list[Placement]) -> BindReport:
        """Bind every placement (the caller assumed them); failed ones are forgotten in the store."""
        report = BindReport()
        ready = self._drop_stale_gangs(placements, report)
        with self.runtime.holding(len(ready)):
            results = [r for chain in self._bind_chains(_claim_chains(ready)) for r in chain]
        for placement, result in results:
            self._settle(placement, result, report)
        self._report_partial_gangs(ready, report)
        return report

    def evict_all(self, victims: list[tuple[Obj | None, str]]) -> list[ApiResult]:
        """Evict every (pod, why) in parallel; a Preempted event on each victim. A pod no longer in the
        snapshot (None) counts as gone."""
        def one(item: tuple[Obj | None, str]) -> ApiResult:
            pod, why = item
            if pod is None:
                return ApiResult(True, 404)
            m = meta(pod)
            result = self.api.evict(m.get("namespace") or "default", m["name"], str(m.get("uid") or ""), why)
            if result.ok and result.status != 404:
                self.events.event(pod, "Normal", "Preempted", why[:1].upper() + why[1:])
            return result
        return list(self.pool.map(one, victims))

    def _bind_chains(self, chains: list[list[Placement]]) -> list[list[tuple[Placement, ApiResult]]]:
        """The chains' binds, in parallel: the first on the calling thread, which would only wait otherwise. A
        stream's lone pod then goes out without a hand-over to another thread (each waits for the GIL)."""
        if not chains:
            return []
        rest = self.pool.map(self._bind_chain, chains[1:])
        first = self._bind_chain(chains[0])
        return [first, *rest]

    def _bind_chain(self, chain: list[Placement]) -> list[tuple[Placement, ApiResult]]:
        """Pods sharing a claim one after the other, the one allocating it first; if its bind fails, the
        others are not tried (the claim they would follow is not allocated)."""
        out = [(chain[0], self._bind_one(chain[0]))]
        for p in chain[1:]:
            if out[0][1].ok:
                out.append((p, self._bind_one(p)))
            else:
                out.append((p, ApiResult(False, 0, f"the pod allocating a claim it shares ({chain[0].key}) was not "
                                                    "bound", prebind=True)))
        return out

    def _bind_one(self, p: Placement) -> ApiResult:
        """PreBind (the pod's volumes), then the Binding; a failure of either leaves no volume step behind."""
        if p.volumes is None:
            return ApiResult(False, 0, f"its claims can no longer be met on {p.node}", prebind=True)
        done, failed = self.volumes.prepare(p.volumes, p.node)
        if failed is not None:
            return failed
        reserved, failed = self.claims.prepare(p.pod, p.node, p.devices, p.claims)
        if failed is None and self.claims.waits(p.claims):
            self.events.event(p.pod, "Normal", "BindingConditionsPending",
                              f"waiting for binding conditions for device on node {p.node}")
            failed = self.claims.await_binding(p.claims)
            if failed is not None:
                self.claims.undo(reserved)
        if failed is not None:
            self.volumes.undo(done)
            return failed
        namespace, name = p.key.split("/", 1)
        result = self.api.bind(namespace, name, p.uid, p.node)
        if not result.ok:
            self.claims.undo(reserved)
            self.volumes.undo(done)
        return result

    def _drop_stale_gangs(self, placements: list[Placement], report: BindReport) -> list[Placement]:
        """A gang whose member was deleted, recreated or bound elsewhere since the snapshot is not bound at all."""
        stale = {p.gang for p in placements if p.gang and not self._current(p)}
        out = []
        for p in placements:
            if p.gang in stale:
                self.store.forget(p.key)
                report.failed[p.key] = f"gang {p.gang} changed before binding (a member was deleted or replaced)"
            else:
                out.append(p)
        return out

    def _current(self, p: Placement) -> bool:
        namespace, name = p.key.split("/", 1)
        now = self.store.get("Pod", namespace, name)
        return now is not None and meta(now).get("uid") == p.uid and not node_of(now)

    def _settle(self, p: Placement, result: ApiResult, report: BindReport) -> None:
        if result.ok:
            report.bound.append(p.key)
            self.events.event(p.pod, "Normal", "Scheduled", f"Successfully assigned {p.key} to {p.node}")
            return
        self.store.forget(p.key)
        if result.prebind:
            report.failed[p.key] = f"preparing volumes or devices on {p.node} failed: {result.message}"
            self.events.unschedulable(p.pod, report.failed[p.key], SCHEDULER_ERROR)
            log.warning("prebind failed (volumes or devices) pod=%s node=%s message=%r", p.key, p.node, result.message)
            return
        if result.status == CONFLICT:
            report.gone.append(p.key)
            log.info("bind conflict pod=%s node=%s message=%r", p.key, p.node, result.message)
            return
        report.failed[p.key] = f"binding to {p.node} failed ({result.status or 'no answer'}): {result.message}"
        self.events.unschedulable(p.pod, report.failed[p.key], SCHEDULER_ERROR)
        log.warning("bind failed pod=%s node=%s status=%s message=%r", p.key, p.node, result.status, result.message)

    def _report_partial_gangs(self, placements: list[Placement], report: BindReport) -> None:
        bound = set(report.bound)
        gangs: dict[str, list[Placement]] = {}
        for p in placements:
            if p.gang:
                gangs.setdefault(p.gang, []).append(p)
        for gang, members in gangs.items():
            done = [p for p in members if p.key in bound]
            if done and len(done) < len(members):
                message = (f"gang {gang} is part-bound: {len(done)} of {len(members)} placed members bound; "
                           "the apiserver refused the rest")
                log.error("gang part-bound gang=%s bound=%d placed=%d", gang, len(done), len(members))
                for p in members:  # the waiting ones in their one series; a bound one gets its word once
                    if p.key in bound:
                        self.events.event(p.pod, "Warning", "FailedScheduling", message)
                    else:
                        self.events.unschedulable(p.pod, message, SCHEDULER_ERROR)

    def close(self) -> None:
        self.pool.shutdown(wait=True)


def _claim_chains(placements: list[Placement]) -> list[list[Placement]]:
    """Placements in chains: a pod allocating a claim others of the batch use, then those (in order); every
    other placement alone."""
    allocating = {key: p for p in placements for key in p.devices}
    chains: dict[str, list[Placement]] = {p.key: [p] for p in placements}
    for p in placements:
        leader = next((allocating[k] for k in p.claims if k in allocating and allocating[k] is not p), None)
        if leader is not None and leader.key in chains and p.key in chains and len(chains[p.key]) == 1:
            chains[leader.key].append(chains.pop(p.key)[0])
    return list(chains.values())


__all__ = ["BindReport", "Binder", "EventSink", "Placement", "pod_key"]


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
