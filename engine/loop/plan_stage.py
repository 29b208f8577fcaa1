"""A profile's plan stage: snapshot → plan → assume, under the lock every profile's cycles share, so two
profiles never plan on the same free capacity. The plan itself is `cycle.run_cycle` (pure); here the batch's
pods are read from the store and the placements are assumed (store and cache) before the lock is let go.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from ..compile import collector_paused
from ..ir import Rules
from ..kinds.base import ModelChange
from ..planner import Options
from .binder import Placement
from .cache import ClusterCache
from .cycle import CycleResult, run_cycle
from .devices import allocation_status
from .ports import Obj
from .profile import Settings
from .store import Store, source_name


@dataclass(slots=True)
class Planned:
    """A cycle's plan and what was assumed for it."""

    pods: dict[str, Obj]  # the batch's pods still in the store, by key
    result: CycleResult
    placements: list[Placement]
    assumed: list[ModelChange] = field(default_factory=list)  # what the cache's assumptions changed
    started: float = 0.0  # perf_counter at the cycle's start
    solved: float = 0.0  # seconds from snapshot to plan


@dataclass
class PlanStage:
    name: str  # the profile's
    settings: Settings
    store: Store
    cache: ClusterCache
    lock: threading.Lock  # every profile's

    def plan(self, batch: list[str], rules: Rules) -> Planned:
        """Plan `batch` with `rules` and assume its placements."""
        started = time.perf_counter()
        with self.lock, collector_paused():
            pods = {key: obj for key in batch if (obj := self.store.get("Pod", *key.split("/", 1))) is not None}
            snapshot = self.cache.snapshot([(source_name("Pod", *k.split("/", 1)), o) for k, o in pods.items()],
                                           self.name, rules.gangs, rules.quotas)
            options = Options(self.settings.limit_for(len(pods)), self.settings.solver_workers,
                              preemption=self.settings.preemption,
                              preference_limit=self.settings.preferences_for(len(pods)))
            result = run_cycle(snapshot, rules, options)
            steps, claims = result.volume_steps(), result.claim_steps()
            placements = [Placement(k, node, pods[k], result.plan.details.gangs.get(k), steps.get(k, ()),
                                    *claims.get(k, ((), {})))
                          for k, node in sorted(result.plan.assignments.items())]
            models = {p.key: p for p in snapshot.cluster.pending}
            assumed = []
            for p in placements:
                allocating = {key: allocation_status(a) for key, a in p.devices.items()}
                self.store.assume(p.key, p.uid, p.node, allocating)
                if (change := self.cache.assume(models[p.key], p.node)) is not None:
                    assumed.append(change)
            self.cache.evicting(v.pod for p in result.plan.preemptions.values() for v in p.victims)
        return Planned(pods, result, placements, assumed, started, time.perf_counter() - started)
