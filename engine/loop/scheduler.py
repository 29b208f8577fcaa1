"""One profile's loop (queue → cycle → assume → bind) and the wiring of store, reflectors and profiles.

Cycles of all profiles share one lock from snapshot to assume, so two profiles never plan on the same free
capacity; binding happens outside it. Policies are refreshed only between cycles.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from ..compile import collector_paused
from ..gangs import gang_key
from ..ir import GangRules
from ..isolation import culprits, failure
from ..kinds.base import ModelChange
from ..load import pod_identity
from ..plan import Eviction, Preemption
from ..planner import Options
from .binder import SCHEDULER_ERROR, UNSCHEDULABLE, Binder, BindReport, EventSink, Placement
from .cache import ClusterCache
from .cycle import CycleResult, run_cycle
from .devices import allocation_status
from .groups import GroupStatus
from .metrics import Metrics, State
from .nominations import Nomination, Nominations
from .policies import PolicyHolder
from .ports import NATIVE_POD_GROUP, ClusterAPI, Obj, Resource
from .queue import PodQueue, QueueConfig
from .store import Change, Store, meta, node_of, pod_key, source_name
from .sync import Reflector

log = logging.getLogger("policy_scheduler.loop")


CYCLE_BASE_SECONDS = 0.2
PREFERENCE_SHARE = 0.2  # of a cycle's time limit, for preferences once every pod is placed
BIND_STAGES = 8  # batches binding at once (their binds share the binder's pool)
TELL_EVERY = 5.0  # seconds between scans for pods to tell that their profile has no valid policy set


@dataclass(frozen=True, slots=True)
class Profile:
    """A scheduler name served by this process, and where its policies live (namespace, name)."""

    name: str
    policy_configmap: tuple[str, str] | None = None


@dataclass(frozen=True, slots=True)
class Settings:
    profiles: tuple[Profile, ...]
    queue: QueueConfig = QueueConfig()
    time_limit: float = 5.0  # a cycle's plan at most…
    time_per_pod: float = 0.0  # …and, when set, 0.2 s plus this per pod of the batch (a lone pod is placed at once)
    solver_workers: int = 1
    bind_workers: int = 16
    preemption: bool = True
    victims_timeout: float = 120.0  # seconds a preemptor waits for its victims to leave before giving up

    def limit_for(self, pods: int) -> float:
        """A cycle's time limit, sized to its batch: what a starting plan and a short CP-SAT run need for a few
        pods, more for more, never beyond `time_limit`."""
        if not self.time_per_pod:
            return self.time_limit
        return min(self.time_limit, CYCLE_BASE_SECONDS + self.time_per_pod * pods)

    def preferences_for(self, pods: int) -> float | None:
        """Once a starting plan has placed every pod of the batch, what is left is preferences: a fifth of the
        batch's time for them (the pods wait for their binds meanwhile); None: no cap (`time_per_pod` 0)."""
        if not self.time_per_pod:
            return None
        return min(self.time_limit, PREFERENCE_SHARE * (CYCLE_BASE_SECONDS + self.time_per_pod * pods))


def unit_of(obj: Obj, gangs: GangRules | None = None) -> str:
    """The queue's unit (batched and backed off together): a pod's gang (engine.gangs: its PodGroup, or a
    policy's `gang by label`), else the pod itself."""
    key = gang_key(pod_identity(obj), gangs)
    return f"gang:{key}" if key else pod_key(obj)


def pod_updated(old: Obj, new: Obj) -> bool:
    """A pending pod changed in what scheduling reads (spec, labels, annotations), not only its status (our own
    condition writes) or version: upstream's isPodUpdated."""
    return (old.get("spec") != new.get("spec") or meta(old).get("labels") != meta(new).get("labels")
            or meta(old).get("annotations") != meta(new).get("annotations"))


@dataclass(frozen=True, slots=True)
class _Outcome:
    """What a cycle planned, kept for the record written once its binds are done."""

    batch: list[str]
    stats: dict
    solved: float  # seconds from snapshot to plan
    unplaced: int
    started: float  # perf_counter at the cycle's start


@dataclass
class ProfileLoop:
    profile: Profile
    settings: Settings
    api: ClusterAPI
    store: Store
    binder: Binder
    events: EventSink
    metrics: Metrics
    cycle_lock: threading.Lock
    cache: ClusterCache
    announce: Callable[[ModelChange], None]  # a change this loop made (a pod assumed): every profile's queue hears it
    queue: PodQueue = field(init=False)
    policies: PolicyHolder = field(init=False)
    # batches bind while the next ones plan, several at once: a lone pod's bind never waits for the batch before it
    bind_stage: ThreadPoolExecutor = field(init=False)
    _binding: set[Future] = field(init=False, default_factory=set)
    _binding_lock: threading.Lock = field(init=False, default_factory=threading.Lock)
    nominations: Nominations = field(init=False)
    _told_at: float = field(init=False, default=float("-inf"))  # when waiting pods were last told (no policies)

    def __post_init__(self) -> None:
        self.queue = PodQueue(self.settings.queue)
        self.nominations = Nominations()
        self.bind_stage = ThreadPoolExecutor(max_workers=BIND_STAGES, thread_name_prefix=f"bind-stage-{self.profile.name}")
        self.policies = PolicyHolder(self.profile.policy_configmap)

    @property
    def name(self) -> str:
        return self.profile.name

    def on_change(self, change: Change, model: ModelChange | None = None) -> None:
        """Every store change (with what it means to the model, from the cache): feed the queue, and wake the
        waiting pods it may help (the kinds that rejected them say which)."""
        if change.kind == "Pod":
            self._pod_changed(change.old, change.new)
        if model is not None:
            self.queue.on_change(model)

    def _pod_changed(self, old: Obj | None, new: Obj | None) -> None:
        obj = new or old
        if obj is None:
            return
        key = pod_key(obj)
        if new is None:
            for nomination in self.nominations.gone(key):  # the last victim left: its preemptors bind
                self._to_bind_stage(self._bind_nominated, nomination)
        if new is None or node_of(new) or meta(new).get("deletionTimestamp"):
            arrived = self.queue.arrival(key)
            if new is not None and node_of(new) and arrived is not None:
                self.metrics.latency.labels(self.name).observe(time.monotonic() - arrived)
            if arrived is not None:
                self.events.forget(obj)  # its FailedScheduling series (if any) is over
            self.queue.remove(key)
            self.metrics.tenants.forget(key)
        elif (new.get("spec") or {}).get("schedulerName") == self.name:
            self.queue.add(key, unit_of(new, self.policies.rules.gangs))
            if old is not None and pod_updated(old, new):
                self.queue.touch(key)

    def ready(self) -> bool:
        return self.policies.ready

    def waiting(self) -> list[Obj]:
        """This profile's pods without a node: not gated, not terminating, not assumed."""
        return [o for o in self.store.objects("Pod") if (o.get("spec") or {}).get("schedulerName") == self.name
                and not node_of(o) and not meta(o).get("deletionTimestamp")
                and not (o.get("spec") or {}).get("schedulingGates")
                and (o.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
                and not self.store.is_assumed(pod_key(o))]

    def run(self, stop: threading.Event) -> None:
        """Cycle until `stop`; the current cycle and every bind already planned always finish."""
        while not stop.is_set():
            if self._refresh_policies() or not self.policies.ready:
                if not self.policies.ready:
                    self._tell_waiting()
                    stop.wait(1.0)
                continue
            self._give_up_late_nominations()
            batch = self.queue.next_batch(stop, idle=1.0)
            if batch:
                self.cycle_isolated(batch)
        self.flush_binds()  # every planned bind is sent before run() returns

    def cycle_isolated(self, batch: list[str]) -> None:
        """A cycle whose failure is narrowed to its culprits: planning errors are (plan_batch refuses the pods
        it raises for); anything else that raises (the snapshot, what follows the plan) fails the cycle, which
        is then bisected by queue units into cycles of their own (engine.isolation.culprits), so everyone else
        is still scheduled now, and the units that fail alone are told why and backed off, never the batch."""
        try:
            self.cycle(batch)
        except Exception as exc:
            log.exception("cycle failed profile=%s pods=%d; narrowing it down", self.name, len(batch))
            self._forget(batch)
            for unit, error in culprits(self._units(batch), self._attempt, exc):
                self._refuse(unit, error)

    def _attempt(self, batch: list[str]) -> None:
        try:
            self.cycle(batch)
        except Exception:
            self._forget(batch)
            raise

    def _units(self, batch: list[str]) -> list[list[str]]:
        units: dict[str, list[str]] = {}
        for key in batch:
            obj = self.store.get("Pod", *key.split("/", 1))
            units.setdefault(unit_of(obj, self.policies.rules.gangs) if obj is not None else key, []).append(key)
        return list(units.values())

    def _recover(self, keys: list[str]) -> None:
        """Pods whose claims are given up: forgotten in the store, back in line after a backoff."""
        self._forget(keys)
        for key in keys:
            self.queue.requeue(key)

    def _forget(self, batch: list[str]) -> None:
        """Drop a failed cycle's assumptions (a pod already bound is removed again when the watch shows it)."""
        for key in batch:
            self.store.forget(key)

    def _refuse(self, unit: list[str], error: Exception) -> None:
        """Pods whose cycle fails even alone: told why, and back in line after a backoff."""
        failed = failure(unit, error)
        log.error("cycle failed for pods=%s alone: %s\n%s", unit, failed.error, failed.trace)
        for key in unit:
            if (obj := self.store.get("Pod", *key.split("/", 1))) is not None:
                self.events.unschedulable(obj, failed.reason, SCHEDULER_ERROR)
            self.queue.requeue(key)

    def refresh_policies(self) -> bool:
        """For a standby (no cycles run yet): load the policies so it is ready, and reports a bad ConfigMap."""
        return self._refresh_policies()

    def _refresh_policies(self) -> bool:
        """Reload a changed ConfigMap between cycles; a good change wakes every waiting pod."""
        if self.profile.policy_configmap is None:
            return False
        namespace, name = self.profile.policy_configmap
        changed = self.policies.refresh(self.store.get("ConfigMap", namespace, name), self._bad_policies)
        if changed:
            self.metrics.policy_reloads.labels(self.name, "ok").inc()
            self.queue.wake_all()
        return changed

    def _tell_waiting(self) -> None:
        """No valid policy set: nothing is scheduled, and each waiting pod gets a Warning event saying why
        (again only when the reason changes, or after the event sink's repeat interval)."""
        now = time.monotonic()
        if now - self._told_at < TELL_EVERY:  # a scan of the store's pods: not every second
            return
        self._told_at = now
        why = self.policies.problem or "no policy set is loaded yet"
        for pod in self.waiting():
            self.events.unschedulable(pod, f"not scheduled: scheduler profile {self.name} has no valid policy set "
                                      f"({why}); pods wait until the policies load", SCHEDULER_ERROR)

    def _bad_policies(self, configmap: Obj, message: str) -> None:
        self.metrics.policy_reloads.labels(self.name, "failed").inc()
        self.events.event(configmap, "Warning", "InvalidPolicy", f"policies not reloaded, previous ones stay active: {message}")

    def cycle(self, batch: list[str]) -> Future[BindReport]:
        """Plan `batch` and assume its placements; the binds go to the bind stage, so the next batch can be
        planned while they are sent (the assumptions keep it off this batch's capacity)."""
        started = time.perf_counter()
        with self.cycle_lock, collector_paused():
            pods = {key: obj for key in batch if (obj := self.store.get("Pod", *key.split("/", 1))) is not None}
            rules = self.policies.rules
            snapshot = self.cache.snapshot([(source_name("Pod", *k.split("/", 1)), o) for k, o in pods.items()],
                                           self.name, rules.gangs, rules.quotas)
            options = Options(self.settings.limit_for(len(pods)), self.settings.solver_workers,
                              preemption=self.settings.preemption,
                              preference_limit=self.settings.preferences_for(len(pods)))
            result = run_cycle(snapshot, rules, options)
            steps, claims = result.volume_steps(), result.claim_steps()
            placements = [Placement(k, node, pods[k], result.plan.gangs.get(k), steps.get(k, ()),
                                    *claims.get(k, ((), {})))
                          for k, node in sorted(result.plan.assignments.items())]
            models = {p.key: p for p in snapshot.cluster.pending}
            assumed = []
            for p in placements:
                allocating = {key: allocation_status(a) for key, a in p.devices.items()}
                self.store.assume(p.key, p.uid, p.node, allocating)
                assumed.append(self.cache.assume(models[p.key], p.node, allocating))
            self.cache.evicting(v.pod for p in result.plan.preemptions.values() for v in p.victims)
        solved = time.perf_counter() - started
        for change in assumed:
            if change is not None:
                self.announce(change)
        self._report_refused(result)
        for failed in result.plan.failures:
            log.error("planning failed profile=%s pods=%s: %s\n%s", self.name, list(failed.pods), failed.error,
                      failed.trace)
        unplaced = result.unplaced()
        errors = set(result.plan.errors)
        for key, reason in result.refused_pods().items():
            if key in batch:
                unplaced[key] = [f"the scheduler cannot read this pod: {reason}"]
                errors.add(key)
        self._report_unplaced(unplaced, pods, errors)
        for key, (scheduled, message) in result.group_conditions().items():
            namespace, name = key.split("/", 1)
            if (group := self.store.get(NATIVE_POD_GROUP, namespace, name)) is not None:
                self.events.group_scheduled(group, scheduled, message)
        handled = set(unplaced) | set(result.plan.assignments)
        for key in batch:
            if key not in handled:  # bound, gone or no longer ours since it was queued
                self.queue.remove(key)
        self.queue.done(unplaced, result.rejected())
        outcome = _Outcome(batch, result.plan.stats, solved, len(unplaced), started)
        nominated = [p for p in placements if p.key in result.plan.preemptions]
        now = [p for p in placements if p.key not in result.plan.preemptions]
        if nominated:
            self._to_bind_stage(self._preempt, nominated, result.plan.preemptions)
        binding = self._to_bind_stage(self._bind, now, outcome)
        self.metrics.tenants.record(result.tenants(), batch, self._pending)  # (the binds are under way meanwhile)
        return binding

    def _pending(self, key: str) -> bool:
        """The store shows the pod of `key` still waiting for a node (not bound, deleted or terminating)."""
        obj = self.store.get("Pod", *key.split("/", 1))
        return obj is not None and not node_of(obj) and not meta(obj).get("deletionTimestamp")

    def _to_bind_stage(self, call: Callable[..., Any], *args: Any) -> Future:
        future = self.bind_stage.submit(call, *args)
        with self._binding_lock:
            self._binding.add(future)
        future.add_done_callback(self._bound)
        return future

    def _bound(self, future: Future) -> None:
        with self._binding_lock:
            self._binding.discard(future)

    def flush_binds(self) -> None:
        """Wait until every bind (and eviction) handed to the bind stage so far is done."""
        while True:
            with self._binding_lock:
                pending = list(self._binding)
            if not pending:
                return
            wait(pending)

    def _bind(self, placements: list[Placement], outcome: _Outcome | None = None) -> BindReport:
        """In the bind stage: bind, requeue what failed, record the cycle. A crash forgets and requeues all."""
        bind_started = time.perf_counter()
        try:
            report = self.binder.bind_all(placements)
        except Exception:
            log.exception("binding failed profile=%s pods=%d", self.name, len(placements))
            self._recover([p.key for p in placements])
            raise
        for key in report.failed:
            self.queue.requeue(key)  # an apiserver error: the pod is still pending and ours, retry after a backoff
        for p in placements:
            if p.key in report.gone:
                self._await_watch(p)
        if outcome is not None:
            self._record(outcome, report, time.perf_counter() - bind_started)
        else:
            self.metrics.pods_bound.labels(self.name).inc(len(report.bound))
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
        """In the bind stage: evict the victims, nominate the preemptors, and wait for the victims to leave."""
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
        nomination = Nomination(nominated, set(victims), time.monotonic() + self.settings.victims_timeout)
        if not self.nominations.add(nomination, lambda key: self.store.get("Pod", *key.split("/", 1)) is not None):
            self._bind(nominated)

    def _bind_nominated(self, nomination: Nomination) -> None:
        self._bind(nomination.placements)

    def _give_up_late_nominations(self) -> None:
        for nomination in self.nominations.expired():
            self._abandon(nomination.placements, f"victims still present after {self.settings.victims_timeout:g}s: "
                          f"{', '.join(sorted(nomination.victims)[:5])}")

    def _abandon(self, placements: list[Placement], why: str) -> None:
        """Give up preemptors' claims: forgotten in the store, back in the queue, told why."""
        self._recover([p.key for p in placements])
        for p in placements:
            self.events.unschedulable(p.pod, f"preemption on {p.node} given up: {why}", SCHEDULER_ERROR)

    def _report_refused(self, result: CycleResult) -> None:
        """Objects other than pods the model could not read: an event on each (the sink tells each once)."""
        for refusal in result.refused:
            ref = refusal.ref
            if ref is not None and ref.kind != "Pod" and (obj := self.store.get(ref.kind, ref.namespace, ref.name)):
                self.events.refused(obj, refusal.message)

    def _report_unplaced(self, unplaced: dict[str, list[str]], pods: dict[str, Obj], errors: set[str]) -> None:
        for key, reasons in unplaced.items():
            if key in pods:
                self.events.unschedulable(pods[key], "; ".join(reasons) or "no node fits",
                                          SCHEDULER_ERROR if key in errors else UNSCHEDULABLE)

    def _record(self, o: _Outcome, report: BindReport, bind_seconds: float) -> None:
        m, name = self.metrics, self.name
        m.batches.labels(name).inc()
        m.batch_size.labels(name).observe(len(o.batch))
        m.solve_seconds.labels(name).observe(o.solved)
        m.pods_bound.labels(name).inc(len(report.bound))
        m.unschedulable.labels(name).inc(o.unplaced)
        m.bind_errors.labels(name).inc(len(report.failed) + len(report.gone))
        for phase, seconds in (o.stats.get("phases") or {}).items():
            m.phase_seconds.labels(name, phase).observe(seconds)
        m.phase_seconds.labels(name, "bind").observe(bind_seconds)
        m.gap.labels(name).set(float(o.stats.get("gap") or 0.0))
        log.info("cycle profile=%s pods=%d bound=%d unschedulable=%d bind_errors=%d status=%s solve_s=%.3f total_s=%.3f",
                 name, len(o.batch), len(report.bound), o.unplaced, len(report.failed) + len(report.gone),
                 o.stats.get("status"), o.solved, time.perf_counter() - o.started)


def _why_evicted(preemptor: str, preemption: Preemption, victim: Eviction) -> str:
    """The eviction's reason (the victim's Preempted event): who preempted it where, and for which quota's min when
    it was reclaimed from its tenant's borrowed room."""
    why = f"preempted by {preemptor} (priority {preemption.priority}) on node {victim.node}"
    if victim.quota is None:
        return why
    return f"{why}, reclaiming the min of {preemption.reclaim} from what {victim.quota} uses beyond its min"


def resources(profiles: tuple[Profile, ...]) -> list[Resource]:
    """What the store watches: the cluster's scheduling state and each profile's policy ConfigMap."""
    out = [Resource("Node"), Resource("Pod"), Resource("PodGroup"), Resource(NATIVE_POD_GROUP), Resource("ElasticQuota"),
           Resource("PriorityClass"),
           Resource("Namespace"),
           Resource("PodDisruptionBudget"), Resource("PersistentVolumeClaim"), Resource("PersistentVolume"),
           Resource("StorageClass"), Resource("CSINode"), Resource("Service"), Resource("ReplicationController"),
           Resource("ReplicaSet"), Resource("StatefulSet"),  # these four: system-default spreading's selectors
           Resource("ResourceSlice"), Resource("DeviceClass"), Resource("ResourceClaim"),
           Resource("ResourceClaimTemplate")]
    for p in profiles:
        if p.policy_configmap and Resource("ConfigMap", *p.policy_configmap) not in out:
            out.append(Resource("ConfigMap", *p.policy_configmap))
    return out


@dataclass
class Scheduler:
    """Everything that runs, in one place: reflectors, one loop per profile, binder and event sink."""

    api: ClusterAPI
    settings: Settings
    metrics: Metrics = field(default_factory=Metrics)
    store: Store = field(default_factory=Store)
    cache: ClusterCache = field(default_factory=ClusterCache)
    watch_seconds: int = 300
    events: EventSink = field(init=False)
    binder: Binder = field(init=False)
    loops: list[ProfileLoop] = field(init=False)
    groups: GroupStatus = field(init=False)
    resources: list[Resource] = field(init=False)
    leading: threading.Event = field(init=False, default_factory=threading.Event)  # set while the loops run
    _threads: list[threading.Thread] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        self.events = EventSink(self.api, on_drop=self.metrics.events_dropped.inc)
        self.binder = Binder(self.api, self.store, self.events, workers=self.settings.bind_workers)
        lock = threading.Lock()
        self.loops = [ProfileLoop(p, self.settings, self.api, self.store, self.binder, self.events, self.metrics, lock,
                                  self.cache, self.announce) for p in self.settings.profiles]
        self.store.subscribe(self.on_change)
        self.store.on_forget(self._forgotten)
        self.resources = resources(self.settings.profiles)
        self.groups = GroupStatus(self.store, self.api.patch, frozenset(p.name for p in self.settings.profiles))
        self.store.subscribe(self.groups.on_change)
        self.metrics.watch_state(State(
            waiting=lambda: {loop.name: len(loop.waiting()) for loop in self.loops},
            leading=self.leading.is_set,
            policies=lambda: {loop.name: (loop.policies.ready, loop.policies.ready and loop.policies.problem is None)
                              for loop in self.loops}))

    def on_change(self, change: Change) -> None:
        """Every watch delta: into the cache first, then to each profile's queue with what it means."""
        model = self.cache.apply(change.kind, change.old, change.new)
        for loop in self.loops:
            loop.on_change(change, model)

    def announce(self, model: ModelChange) -> None:
        """A change the cache knows before any watch shows it (a pod assumed, a failed bind's room given back)."""
        for loop in self.loops:
            loop.queue.on_change(model)

    def _forgotten(self, key: str) -> None:
        if (model := self.cache.forget(key)) is not None:
            self.announce(model)

    def start_watches(self, stop: threading.Event) -> None:
        for r in self.resources:
            reflector = Reflector(self.api, r, self.store, stop, watch_seconds=self.watch_seconds)
            self._spawn(reflector.run, f"watch-{r.kind}")

    def wait_synced(self, stop: threading.Event, timeout: float = 60.0) -> bool:
        deadline = time.monotonic() + timeout
        while not self.store.synced(self.resources):
            if stop.wait(0.05) or time.monotonic() > deadline:
                return False
        return True

    def start_loops(self, stop: threading.Event) -> None:
        self.leading.set()
        for loop in self.loops:
            self._spawn(functools.partial(loop.run, stop), f"profile-{loop.name}")
        self._spawn(functools.partial(self.groups.run, stop), "podgroup-status")

    def _spawn(self, target: Callable[[], None], name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def ready(self) -> bool:
        return self.store.synced(self.resources) and all(loop.ready() for loop in self.loops)

    def refresh_policies(self) -> None:
        """Only while no profile loop runs (a standby waiting for leadership)."""
        for loop in self.loops:
            loop.refresh_policies()

    def shutdown(self, timeout: float = 30.0) -> None:
        """After `stop` was set: let loops finish their cycle, then flush binds and events."""
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            if thread.name.startswith("profile-"):
                thread.join(max(0.0, deadline - time.monotonic()))
        for loop in self.loops:
            loop.bind_stage.shutdown(wait=True)
        self.binder.close()
        self.events.close()


__all__ = ["Placement", "Profile", "ProfileLoop", "Scheduler", "Settings"]
