"""A profile's queue feed: the store's changes into its queue (which pods wait, which left, what may help them),
and the store's view of the profile's waiting pods."""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..kinds.base import ModelChange
from ..reading.objects import waits_for
from .bind_stage import BindStage
from .binder import EventSink
from .metrics import Metrics
from .policies import PolicyHolder
from .ports import Obj
from .profile import unit_of
from .queue import PodQueue
from .store import Change, Store, meta, node_of, pod_key


def pod_updated(old: Obj, new: Obj) -> bool:
    """A pending pod changed in what scheduling reads (spec, labels, annotations), not only its status (our own
    condition writes) or version: upstream's isPodUpdated."""
    return (old.get("spec") != new.get("spec") or meta(old).get("labels") != meta(new).get("labels")
            or meta(old).get("annotations") != meta(new).get("annotations"))


@dataclass
class QueueFeed:
    name: str  # the profile's
    store: Store
    queue: PodQueue
    policies: PolicyHolder
    binds: BindStage  # a preemptor's last victim gone: its bind starts
    events: EventSink
    metrics: Metrics

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
            self.binds.victim_gone(key)  # the last victim left: its preemptors bind
        if new is None or node_of(new) or meta(new).get("deletionTimestamp"):
            arrived = self.queue.arrival(key)
            if new is not None and node_of(new) and arrived is not None:
                self.metrics.latency.labels(self.name).observe(time.monotonic() - arrived)
            if arrived is not None:
                self.events.forget(obj)  # its FailedScheduling series (if any) is over
            self.queue.remove(key)
            self.metrics.tenants.forget(key)
            self.metrics.reasons.forget(key)
        elif (new.get("spec") or {}).get("schedulerName") == self.name:
            self.queue.add(key, unit_of(new, self.policies.rules.gangs))
            if old is not None and pod_updated(old, new):
                self.queue.touch(key)

    def waiting(self) -> list[Obj]:
        """This profile's pods without a node: not gated, not terminating, not assumed."""
        return [o for o in self.store.objects("Pod") if waits_for(o, self.name) and not self.store.is_assumed(pod_key(o))]

    def units(self, batch: list[str]) -> list[list[str]]:
        """A batch by queue units (a gang's pods together), for narrowing a failed cycle."""
        units: dict[str, list[str]] = {}
        for key in batch:
            obj = self.store.get("Pod", *key.split("/", 1))
            units.setdefault(unit_of(obj, self.policies.rules.gangs) if obj is not None else key, []).append(key)
        return list(units.values())

    def pending(self, key: str) -> bool:
        """The store shows the pod of `key` still waiting for a node (not bound, deleted or terminating)."""
        obj = self.store.get("Pod", *key.split("/", 1))
        return obj is not None and not node_of(obj) and not meta(obj).get("deletionTimestamp")
