"""A profile's plan stage: snapshot → plan → assume, under the lock every profile's cycles share, so two
profiles never plan on the same free capacity. The plan itself is `cycle.run_cycle` (pure); here the batch's
pods are read from the store and the placements are assumed (store and cache) before the lock is let go.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field

from ..devices.storage import VolumeStep
from ..kinds.base import ModelChange
from ..model.cluster import Cluster, Pod, Reservation
from ..model.ir import Rules
from ..planning.plan import Plan
from ..planning.planner import Options, TimeInputs
from ..time.timeline import Estimate
from .binder import BindReport, Placement
from .cache import ClusterCache
from .cycle import CycleResult, run_cycle
from .devices import allocation_status
from .ports import Obj
from .profile import Settings
from .store import Store, node_of, source_name


@dataclass(slots=True)
class Planned:
    """A cycle's plan and what was assumed for it."""

    pods: dict[str, Obj]  # the batch's pods still in the store, by key
    result: CycleResult
    placements: list[Placement]  # all of them, those bound early first
    assumed: list[ModelChange] = field(default_factory=list)  # what the cache's assumptions changed
    started: float = 0.0  # perf_counter at the cycle's start
    solved: float = 0.0  # seconds from snapshot to plan
    early: Future[BindReport] | None = None  # the binds of the placements handed on before the plan was done…
    handed: int = 0  # …the first this many of `placements`


BindEarly = Callable[[list[Placement]], "Future[BindReport]"]
RESERVATION_GRACE = 300.0  # seconds a reservation whose start has passed is kept for its holder
ESTIMATE_EVERY = 30.0  # seconds a sweep's estimates are told again before time is swept anew (a sweep is a dozen
# plans: every cycle, it would cost a busy cluster several times the cycle itself; pods that arrived since wait for
# the next sweep for theirs)
EARLIER_EVERY = 30.0  # seconds between asking whether a carried reservation's unit could start any earlier (pods
# that ended before their bounds): a look at every running pod's end, several times a reservation's other checks


@dataclass
class PlanStage:
    name: str  # the profile's
    settings: Settings
    store: Store
    cache: ClusterCache
    lock: threading.Lock  # every profile's
    wall: Callable[[], float] = time.time  # the plan's now (engine.time.timeline: running pods' ends count from it)
    reservations: tuple[Reservation, ...] = ()  # the last cycle's, carried into the next (engine.time.timeline)
    estimates: dict[str, Estimate] = field(default_factory=dict)  # the last sweep's (engine.time.timeline.estimate)…
    swept: float = float("-inf")  # …and its wall time
    looked_earlier: float = float("-inf")  # when carried reservations were last asked whether to move earlier

    def plan(self, batch: list[str], rules: Rules, bind_early: BindEarly | None = None) -> Planned:
        """Plan `batch` with `rules` and assume its placements. With `bind_early`, the placements are assumed and
        handed to it as soon as they are final, while the pods left out are explained and preemption runs."""
        started = time.perf_counter()
        with self.lock:  # (the collector is paused by the cycle: engine.loop.runtime)
            pods = {key: obj for key in batch if (obj := self.store.get("Pod", *key.split("/", 1))) is not None}
            snapshot = self.cache.snapshot([(source_name("Pod", *k.split("/", 1)), o) for k, o in pods.items()],
                                           self.name, rules.gangs, rules.quotas)
            options = Options(self.settings.limit_for(len(pods)), self.settings.solver_workers,
                              preemption=self.settings.preemption,
                              preference_limit=self.settings.preferences_for(len(pods)))
            now = self.wall()
            fresh = now - self.swept < ESTIMATE_EVERY
            earlier = now - self.looked_earlier >= EARLIER_EVERY
            time_inputs = TimeInputs(now, self._carried(now), carried=True,
                                     estimated=self.estimates if fresh else None, ask_earlier=earlier)
            early = _EarlyPlacements(self, pods, {p.key: p for p in snapshot.cluster.pending}, snapshot.cluster,
                                     bind_early)
            result = run_cycle(snapshot, rules, options, time_inputs, early.hand if bind_early is not None else None)
            self.reservations = result.plan.reservations
            if earlier:
                self.looked_earlier = now
            if not fresh and result.plan.estimates:
                self.estimates, self.swept = dict(result.plan.estimates), now
            handed = {p.key for p in early.placements}
            rest = [p for p in self._placements(result, pods, early.steps) if p.key not in handed]
            assumed = early.assumed + self._assume(rest, early.models)
            self.cache.evicting(v.pod for p in result.plan.preemptions.values() for v in p.victims)
        return Planned(pods, result, early.placements + rest, assumed, started, time.perf_counter() - started,
                       early.future, len(early.placements))

    def _carried(self, now: float) -> tuple[Reservation, ...]:
        """The last cycle's reservations that still hold: every pod of it still waiting, and not started longer ago
        than RESERVATION_GRACE (its room is its holder's from its start on; a holder not retried meanwhile lets it
        go, and the next cycle that plans it reserves again)."""
        def waiting(key: str) -> bool:
            obj = self.store.get("Pod", *key.split("/", 1))
            return obj is not None and not node_of(obj) and not self.store.is_assumed(key)
        return tuple(r for r in self.reservations
                     if r.start > now - RESERVATION_GRACE and all(waiting(key) for key, _ in r.pods))

    @staticmethod
    def _placements(result: CycleResult, pods: dict[str, Obj],
                    chosen: dict[str, tuple[VolumeStep, ...] | None] | None = None) -> list[Placement]:
        steps, claims = result.volume_steps(chosen), result.claim_steps()
        return [Placement(k, node, pods[k], result.plan.details.gangs.get(k), steps.get(k, ()), *claims.get(k, ((), {})))
                for k, node in sorted(result.plan.assignments.items())]

    def _assume(self, placements: list[Placement], models: dict[str, Pod]) -> list[ModelChange]:
        """Assume `placements` in the store and the cache; what the cache's assumptions changed."""
        assumed = []
        for p in placements:
            allocating = {key: allocation_status(a) for key, a in p.devices.items()}
            self.store.assume(p.key, p.uid, p.node, allocating)
            if (change := self.cache.assume(models[p.key], p.node)) is not None:
                assumed.append(change)
        return assumed


@dataclass
class _EarlyPlacements:
    """A cycle's placements handed on before its plan is done (engine.planning.plan.placed_plan): assumed at once and
    given to the bind stage, whose binds then run while the rest of the batch is explained."""

    stage: PlanStage
    pods: dict[str, Obj]
    models: dict[str, Pod]
    cluster: Cluster
    bind: BindEarly | None
    placements: list[Placement] = field(default_factory=list)
    assumed: list[ModelChange] = field(default_factory=list)
    steps: dict[str, tuple[VolumeStep, ...] | None] = field(default_factory=dict)  # their PreBind volume writes
    future: Future[BindReport] | None = None

    def hand(self, plan: Plan) -> None:
        if self.bind is None or self.future is not None:
            return  # one hand-over per cycle (engine.planning.isolation hands on the first attempt's placements only)
        placements = PlanStage._placements(CycleResult(plan, self.cluster), self.pods)
        self.assumed += self.stage._assume(placements, self.models)
        self.placements += placements
        self.steps.update({p.key: p.volumes for p in placements})
        self.future = self.bind(placements)
