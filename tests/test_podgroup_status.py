"""Coscheduling PodGroups' status as scheduler-plugins' PodGroup controller keeps it, written by the loop for
groups of its pods (engine/loop/groups.py), from the store."""
from __future__ import annotations

from engine.loop.groups import GroupStatus, group_status
from engine.loop.store import Change, Store
from testkit.manifests import pod, podgroup

LABEL = {"scheduling.x-k8s.io/pod-group": "job"}


def members(bound: int, pending: int, phase: str = "Running") -> list[dict]:
    return ([pod(f"b{i}", labels=LABEL, node_name="n1", phase=phase) for i in range(bound)]
            + [pod(f"p{i}", labels=LABEL) for i in range(pending)])


def test_phases_follow_scheduler_plugins_controller() -> None:
    group = podgroup("job", 3)
    assert group_status(group, members(0, 2))["phase"] == "Pending"  # fewer pods than minMember
    assert group_status(group, members(0, 3))["phase"] == "Scheduling"
    assert group_status(group, members(3, 0, phase="Pending")) == {
        "phase": "Scheduled", "scheduled": 3, "running": 0, "succeeded": 0, "failed": 0}
    assert group_status(group, members(3, 1))["phase"] == "Running"
    assert group_status(group, members(3, 0, phase="Succeeded"))["phase"] == "Finished"
    failed = members(2, 0) + [pod("f", labels=LABEL, node_name="n1", phase="Failed")]
    assert group_status(group, failed)["phase"] == "Failed"
    done = {**group, "status": {"phase": "Finished"}}
    assert group_status(done, members(0, 3))["phase"] == "Finished"  # a final phase stays


def test_the_loop_writes_changed_groups_of_its_pods_only() -> None:
    store, patches = Store(), []
    writer = GroupStatus(store, lambda *args: patches.append(args), frozenset({"policy-scheduler"}))
    store.subscribe(writer.on_change)
    store.apply("PodGroup", "ADDED", podgroup("job", 2))
    store.apply("PodGroup", "ADDED", podgroup("theirs", 1))
    for doc in members(2, 0):
        store.apply("Pod", "ADDED", doc)
    store.apply("Pod", "ADDED", pod("x", labels={"scheduling.x-k8s.io/pod-group": "theirs"}, scheduler="other"))
    assert writer.flush() == 1
    ((kind, ns, name, body, sub),) = patches
    assert (kind, ns, name, sub) == ("PodGroup", "default", "job", "status")
    assert body["status"]["phase"] == "Running" and body["status"]["running"] == 2
    assert writer.flush() == 0  # nothing marked since
    writer.on_change(Change("Pod", None, members(1, 0)[0]))
    current = store.get("PodGroup", "default", "job")
    current["status"] = body["status"]  # the watch brought the write back
    assert writer.flush() == 0  # unchanged: not written again
