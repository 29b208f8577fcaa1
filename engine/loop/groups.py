"""Coscheduling PodGroups' status, as scheduler-plugins' PodGroup controller keeps it.

Users (and tools such as Kubeflow's) read a PodGroup's `status.phase`, `scheduled`, `running`, `succeeded` and
`failed`. scheduler-plugins writes them from its own controller binary, which a cluster running policy-scheduler
alone does not have; so the scheduler keeps them for the groups its pods belong to, with that controller's rules
(controllers/podgroup_controller.go), from the store: no extra reads. Pod and PodGroup changes mark a group;
`flush` (its own thread, about once a second) writes the groups whose status changed.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from ..model.cluster import POD_GROUP_LABEL
from .ports import ApiResult, Obj
from .store import Change, Store, meta, node_of

log = logging.getLogger("policy_scheduler.groups")

PENDING, SCHEDULING, SCHEDULED, RUNNING, FINISHED, FAILED = (
    "Pending", "Scheduling", "Scheduled", "Running", "Finished", "Failed")


def group_status(group: Obj, members: list[Obj]) -> dict[str, object]:
    """The status scheduler-plugins' controller would give `group` with these member pods (stateless: its
    Pending → Scheduling step is taken as soon as the members are there). `scheduled` counts members with a
    node, which that controller leaves to the scheduler."""
    need = int((group.get("spec") or {}).get("minMember") or 0)
    phases = [str((p.get("status") or {}).get("phase") or "Pending") for p in members]
    running, succeeded, failed = (phases.count(x) for x in ("Running", "Succeeded", "Failed"))
    scheduled = sum(1 for p in members if node_of(p))
    old = str((group.get("status") or {}).get("phase") or "")
    if old in (FINISHED, FAILED):
        phase = old
    elif len(members) < need:
        phase = PENDING
    elif succeeded >= need > 0:
        phase = FINISHED
    elif failed and failed + running + succeeded >= need:
        phase = FAILED
    elif running + succeeded >= need:
        phase = RUNNING
    elif scheduled >= need:
        phase = SCHEDULED
    else:
        phase = SCHEDULING
    return {"phase": phase, "scheduled": scheduled, "running": running, "succeeded": succeeded, "failed": failed}


@dataclass
class GroupStatus:
    """Marks Coscheduling PodGroups whose members changed; `flush` patches the ones whose status moved."""

    store: Store
    patch: Callable[..., object]  # ClusterAPI.patch
    schedulers: frozenset[str]  # only groups with a member for one of these
    dirty: set[tuple[str, str]] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def on_change(self, change: Change) -> None:
        obj = change.new or change.old
        if obj is None:
            return
        m = meta(obj)
        ns = str(m.get("namespace") or "default")
        if change.kind == "Pod":
            name = (m.get("labels") or {}).get(POD_GROUP_LABEL)
        elif change.kind == "PodGroup":
            name = m.get("name")
        else:
            return
        if name:
            with self.lock:
                self.dirty.add((ns, str(name)))

    def flush(self) -> int:
        """Write every marked group whose status changed; returns how many were written."""
        with self.lock:
            marked, self.dirty = self.dirty, set()
        if not marked:
            return 0
        members: dict[tuple[str, str], list[Obj]] = defaultdict(list)
        for pod in self.store.objects("Pod"):
            m = meta(pod)
            name = (m.get("labels") or {}).get(POD_GROUP_LABEL)
            key = (str(m.get("namespace") or "default"), str(name))
            if name and key in marked and not m.get("deletionTimestamp"):
                members[key].append(pod)
        written = 0
        for ns, name in sorted(marked):
            group = self.store.get("PodGroup", ns, name)
            pods = members.get((ns, name), [])
            if group is None or not any((p.get("spec") or {}).get("schedulerName") in self.schedulers for p in pods):
                continue
            status = group_status(group, pods)
            current = group.get("status") or {}
            if all(current.get(k, 0 if k != "phase" else "") == v for k, v in status.items()):
                continue
            result = self.patch("PodGroup", ns, name, {"status": status}, "status")
            if isinstance(result, ApiResult) and not result.ok:
                log.warning("podgroup status write failed podgroup=%s/%s status=%s message=%r", ns, name,
                            result.status, result.message)
                continue
            written += 1
        return written

    def run(self, stop: threading.Event, every: float = 1.0) -> None:
        while not stop.wait(every):
            self.flush()
