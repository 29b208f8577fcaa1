"""One profile's loop (queue → plan stage → bind stage) and the wiring of store, reflectors and profiles.

A profile's loop is its parts, one job each: the queue feed (store changes into the queue, feed.py), the plan
stage (snapshot → plan → assume under the lock every profile shares, plan_stage.py), the bind stage (binds,
evictions, nominations, off the cycle's thread, bind_stage.py) and the reporter (events, conditions, metrics,
reports.py). Policies are refreshed only between cycles.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field

from ..kinds.base import ModelChange
from ..planning.isolation import culprits
from ..reading.objects import WATCHED
from .bind_stage import BIND_STAGES, BindStage
from .binder import EVENT_WRITERS, STATUS_WRITERS, Binder, BindReport, EventSink, Placement
from .cache import ClusterCache
from .feed import QueueFeed, pod_updated
from .groups import GroupStatus
from .metrics import Metrics, State
from .plan_stage import PlanStage
from .policies import KEPT_VERSION, PolicyHolder, Standing, kept_patch
from .ports import ClusterAPI, Obj, WatchTarget
from .profile import Profile, Settings, head_rank, unit_of
from .queue import PodQueue
from .reports import Outcome, PolicyCondition, Reporter
from .runtime import RuntimePolicy
from .store import Change, Store
from .sync import Reflector

log = logging.getLogger("policy_scheduler.loop")

TELL_EVERY = 5.0  # seconds between scans for pods to tell that their profile has no valid policy set


@dataclass
class ProfileLoop:
    """Runs a profile's cycles: takes batches from the queue, has them planned and bound, and narrows a failing
    cycle to its culprits; its parts do the work."""

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
    runtime: RuntimePolicy  # the process's tuning: entered once per cycle (`cycle_isolated`)
    on_standing: Callable[[], None] = lambda: None  # what a profile schedules with changed (the pod's condition)
    server: Callable[[], tuple[int, int] | None] = lambda: None  # the apiserver's release (Scheduler.start_watches)
    queue: PodQueue = field(init=False)
    policies: PolicyHolder = field(init=False)
    reports: Reporter = field(init=False)
    planner: PlanStage = field(init=False)
    bind_stage: BindStage = field(init=False)
    feed: QueueFeed = field(init=False)
    _told_at: float = field(init=False, default=float("-inf"))  # when waiting pods were last told (no policies)
    _keep_after: float = field(init=False, default=float("-inf"))  # no write of the kept copy before (a failed one)

    def __post_init__(self) -> None:
        name = self.profile.name
        self.queue = PodQueue(self.settings.queue, rank=lambda key: head_rank(self.cache.waiting_model(key)))
        kept = self.profile.kept_configmap
        self.policies = PolicyHolder(self.profile.policy_configmap, self.profile.optional, kept[1] if kept else "")
        self.reports = Reporter(name, self.store, self.events, self.metrics, self.server)
        self.planner = PlanStage(name, self.settings, self.store, self.cache, self.cycle_lock)
        self.bind_stage = BindStage(name, self.settings.victims_timeout, self.binder, self.store, self.cache,
                                    self.queue, self.policies, self.events, self.metrics, self.reports)
        self.feed = QueueFeed(name, self.store, self.queue, self.policies, self.bind_stage, self.events, self.metrics)

    @property
    def name(self) -> str:
        return self.profile.name

    def on_change(self, change: Change, model: ModelChange | None = None) -> None:
        self.feed.on_change(change, model)

    def ready(self) -> bool:
        return self.policies.ready

    def waiting(self) -> list[Obj]:
        return self.feed.waiting()

    def run(self, stop: threading.Event) -> None:
        """Cycle until `stop`; the current cycle and every bind already planned always finish."""
        while not stop.is_set():
            if self._refresh_policies() or not self.policies.ready:
                if not self.policies.ready:
                    self._tell_waiting()
                    stop.wait(1.0)
                continue
            self._keep_policies()
            self._give_up_late_nominations()
            batch = self.queue.next_batch(stop, idle=1.0)
            if batch:
                self.cycle_isolated(batch)
        self.flush_binds()  # every planned bind is sent before run() returns

    def cycle_isolated(self, batch: list[str]) -> None:
        """A cycle whose failure is narrowed to its culprits: planning errors are (plan_batch refuses the pods
        it raises for); anything else that raises (the snapshot, what follows the plan) fails the cycle, which
        is then bisected by queue units into cycles of their own (engine.planning.isolation.culprits), so everyone else
        is still scheduled now, and the units that fail alone are told why and backed off, never the batch.
        The process's runtime policy is entered here, once for all of it: the batch in hand, the collector paused."""
        with self.runtime.cycle(len(batch)):
            try:
                self.cycle(batch)
            except Exception as exc:
                log.exception("cycle failed profile=%s pods=%d; narrowing it down", self.name, len(batch))
                self._forget(batch)
                for unit, error in culprits(self.feed.units(batch), self._attempt, exc):
                    self.reports.refused_alone(unit, error)
                    for key in unit:
                        self.queue.requeue(key)

    def _attempt(self, batch: list[str]) -> None:
        try:
            self.cycle(batch)
        except Exception:
            self._forget(batch)
            raise

    def _forget(self, batch: list[str]) -> None:
        """Drop a failed cycle's assumptions (a pod already bound is removed again when the watch shows it)."""
        for key in batch:
            self.store.forget(key)

    def refresh_policies(self) -> bool:
        """For a standby (no cycles run yet): load the policies so it is ready, and reports a bad ConfigMap."""
        return self._refresh_policies()

    def _refresh_policies(self) -> bool:
        """Reload a changed ConfigMap between cycles (or restore the set kept beside it while it is missing or has
        errors); a change of what is in force wakes every waiting pod, and is told."""
        if self.profile.policy_configmap is None or self.profile.kept_configmap is None:
            return False
        holder = self.policies
        before = holder.standing, holder.problem, holder.origin, holder.kept_problem
        current = self.store.get("ConfigMap", *self.profile.policy_configmap)
        kept = self.store.get("ConfigMap", *self.profile.kept_configmap)
        changed = holder.refresh(current, lambda cm, errors: self.reports.bad_policies(cm, errors, holder.describe()),
                                 kept)
        if changed and holder.standing is Standing.CURRENT:
            self.reports.policies_reloaded()
        if before == (holder.standing, holder.problem, holder.origin, holder.kept_problem):
            return changed
        self.on_standing()
        if holder.standing is before[0] and not changed:
            return False  # (another bad version: the same set stays in force, nobody to wake)
        if holder.standing is not before[0]:
            self.reports.standing(holder, kept if current is None else None)
        self.queue.wake_all()
        return True

    def _keep_policies(self) -> None:
        """The leader keeps the set it loaded where the next start finds it (NAME-last-valid beside the ConfigMap):
        written when that copy holds another version; a failed write is tried again 30 s later (a conflict sooner,
        once the watch has shown the copy as it is)."""
        where = self.profile.kept_configmap
        if where is None or time.monotonic() < self._keep_after:
            return
        kept = self.store.get("ConfigMap", *where)
        copy = self.policies.to_keep(kept)
        if copy is None:
            return
        result = (self.api.patch("ConfigMap", where[0], where[1], kept_patch(copy, kept)) if kept is not None
                  else self.api.create_object("ConfigMap", where[0], copy))
        if result.ok:
            log.info("policies kept profile=%s configmap=%s version=%s", self.name, "/".join(where),
                     copy["metadata"]["annotations"][KEPT_VERSION])
            return
        retry = 2.0 if result.status == 409 else 30.0
        self._keep_after = time.monotonic() + retry
        if result.status != 409:
            log.warning("cannot keep the policies in force profile=%s configmap=%s status=%d error=%r: a restart "
                        "while the policy ConfigMap is invalid would schedule nothing; retry_in=%.0fs", self.name,
                        "/".join(where), result.status, result.message, retry)

    def _tell_waiting(self) -> None:
        """No valid policy set: nothing is scheduled, and each waiting pod is told why (again only when the
        reason changes, or after the event sink's repeat interval)."""
        now = time.monotonic()
        if now - self._told_at < TELL_EVERY:  # a scan of the store's pods: not every second
            return
        self._told_at = now
        holder = self.policies
        why = holder.problem or "no policy set is loaded yet"
        if holder.kept_problem:
            why += f"; no last valid set to fall back on: {holder.kept_problem}"
        self.reports.no_policies(self.waiting(), why)

    def cycle(self, batch: list[str]) -> Future[BindReport]:
        """Plan `batch` and assume its placements; the binds go to the bind stage, so the next batch can be
        planned while they are sent (the assumptions keep it off this batch's capacity)."""
        planned = self.planner.plan(batch, self.policies.rules, self.bind_stage.bind_early)
        for change in planned.assumed:
            self.announce(change)
        result = planned.result
        unplaced = self.reports.cycle(batch, planned.pods, result)
        handled = set(unplaced) | set(result.plan.assignments)
        for key in batch:
            if key not in handled:  # bound, gone or no longer ours since it was queued
                self.queue.remove(key)
        self.queue.done(unplaced, result.rejected())
        outcome = Outcome(batch, result.plan.stats, planned.solved, len(unplaced), planned.started)
        binding = self.bind_stage.start(planned.placements[planned.handed:], result.plan.preemptions, outcome,
                                        planned.early)
        self.metrics.tenants.record(result.tenants(), batch, self.feed.pending)  # (the binds are under way meanwhile)
        self.metrics.reasons.record(self.name, batch, result.codes(batch), self.feed.pending)
        return binding

    def flush_binds(self) -> None:
        """Wait until every bind (and eviction) handed to the bind stage so far is done."""
        self.bind_stage.flush()

    def _give_up_late_nominations(self) -> None:
        self.bind_stage.give_up_late_nominations()


def connections(settings: Settings) -> int:
    """Connections the loop may hold at once: one per watch, bind thread and bind stage, the event and status
    writers', the lease's and the PodGroup status writer's. The client's pool keeps this many open; a request beyond
    it opens a connection of its own (a TLS handshake) and drops it after."""
    return len(resources(settings.profiles)) + settings.bind_workers + BIND_STAGES + EVENT_WRITERS + STATUS_WRITERS + 2


def resources(profiles: tuple[Profile, ...]) -> list[WatchTarget]:
    """What the store watches: the cluster's scheduling state, each profile's policy ConfigMap and the copy of its
    last valid set kept beside it."""
    out = [WatchTarget(k.name) for k in WATCHED]
    for p in profiles:
        for configmap in (p.policy_configmap, p.kept_configmap):
            if configmap and WatchTarget("ConfigMap", *configmap) not in out:
                out.append(WatchTarget("ConfigMap", *configmap))
    return out


@dataclass
class Scheduler:
    """Everything that runs, in one place: reflectors, one loop per profile, binder and event sink."""

    api: ClusterAPI
    settings: Settings
    metrics: Metrics = field(default_factory=Metrics)
    store: Store = field(default_factory=Store)
    runtime: RuntimePolicy = field(default_factory=RuntimePolicy)  # the `run` command's, started once synced
    cache: ClusterCache = field(init=False)  # reads the store's assumptions
    watch_seconds: int = 300
    events: EventSink = field(init=False)
    binder: Binder = field(init=False)
    loops: list[ProfileLoop] = field(init=False)
    groups: GroupStatus = field(init=False)
    condition: PolicyCondition = field(init=False)  # the pod's word on what its profiles schedule with
    resources: list[WatchTarget] = field(init=False)
    leading: threading.Event = field(init=False, default_factory=threading.Event)  # set while the loops run
    built: threading.Event = field(init=False, default_factory=threading.Event)  # the cache's model, after the sync
    _threads: list[threading.Thread] = field(init=False, default_factory=list)
    _warming: threading.Thread | None = field(init=False, default=None)
    server: tuple[int, int] | None = field(init=False, default=None)  # the apiserver's release (start_watches)

    def __post_init__(self) -> None:
        self.cache = ClusterCache(self.store.assumptions)
        self.events = EventSink(self.api, on_drop=self.metrics.events_dropped.inc, runtime=self.runtime)
        self.binder = Binder(self.api, self.store, self.events, workers=self.settings.bind_workers,
                             runtime=self.runtime)
        lock = threading.Lock()
        self.condition = PolicyCondition(self.events, self.settings.own_pod)
        self.loops = [ProfileLoop(p, self.settings, self.api, self.store, self.binder, self.events, self.metrics, lock,
                                  self.cache, self.announce, self.runtime, self.policies_changed,
                                  lambda: self.server)
                      for p in self.settings.profiles]
        self.store.subscribe(self.on_change)
        self.store.on_forget(self._forgotten)
        self.resources = resources(self.settings.profiles)
        self.groups = GroupStatus(self.store, self.api.patch, frozenset(p.name for p in self.settings.profiles))
        self.store.subscribe(self.groups.on_change)
        self.metrics.watch_state(State(
            waiting=lambda: {loop.name: len(loop.waiting()) for loop in self.loops},
            leading=self.leading.is_set,
            policies=lambda: {loop.name: (loop.policies.ready, loop.policies.valid,
                                          loop.policies.standing is Standing.RESTORED) for loop in self.loops}))

    def policies_changed(self) -> None:
        """What some profile schedules with changed: the pod's condition says what all of them do now."""
        self.condition.update((loop.name, loop.policies) for loop in self.loops)

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
        """The reflectors, and beside their lists the connections the first binds will take (`ClusterAPI.warm`);
        the apiserver's release first (what some status writes say depends on it)."""
        self.server = self.api.server_version()
        self._warming = threading.Thread(target=self.api.warm, args=(self.settings.bind_workers,), name="warm",
                                         daemon=True)
        self._warming.start()
        for r in self.resources:
            reflector = Reflector(self.api, r, self.store, stop, watch_seconds=self.watch_seconds)
            self._spawn(reflector.run, f"watch-{r.kind}")

    def wait_synced(self, stop: threading.Event, timeout: float = 60.0) -> bool:
        """Every watch has listed (and the binds' connections are open), then the cache's model is built
        (`ClusterCache.build`): as kube-scheduler is ready once its informers' handlers have synced, not when its
        first cycle converts the cluster."""
        deadline = time.monotonic() + timeout
        while not self.store.synced(self.resources):
            if stop.wait(0.05) or time.monotonic() > deadline:
                return False
        if self._warming is not None:  # the binds' connections too (`start_watches`)
            self._warming.join(max(0.0, deadline - time.monotonic()))
        if not self.built.is_set():
            self.cache.build({p.name for p in self.settings.profiles})
            self.built.set()
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
        return self.store.synced(self.resources) and self.built.is_set() and all(loop.ready() for loop in self.loops)

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


__all__ = ["BIND_STAGES", "Placement", "Profile", "ProfileLoop", "Scheduler", "Settings", "pod_updated", "unit_of"]
