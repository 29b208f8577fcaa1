"""Native gangs (KEP-4671 scheduling.k8s.io/v1alpha2 PodGroups, gates on in the test control plane) through the
loop: a gang starts whole or waits, the group's PodGroupScheduled condition says which and why, a pod whose
group does not exist yet waits until it is created, and a `disruptionMode: PodGroup` group is preempted whole
with its DisruptionTarget condition."""
from __future__ import annotations

import pytest

from testkit.controlplane import ControlPlane
from testkit.manifests import api_pod, in_group, native_group, priority_class
from testkit.scheduling import Kube, node_of, wait_for

SCHEDULER = "native-scheduler"

# 1.37 serves these PodGroups as scheduling.k8s.io/v1beta1 only (v1alpha2 is gone): 404s on 1.37.2
pytestmark = pytest.mark.kube_versions(max="1.36", reason="issue 28 point 1: native gangs in scheduling.k8s.io/v1beta1")


def _condition(kube: Kube, ns: str, name: str, kind: str = "PodGroupScheduled") -> dict | None:
    group = kube.ok("GET", f"/apis/scheduling.k8s.io/v1alpha2/namespaces/{ns}/podgroups/{name}")
    return next((c for c in (group.get("status") or {}).get("conditions") or [] if c["type"] == kind), None)


def test_native_gangs_start_whole_and_say_so(control_plane: ControlPlane, kube: Kube, chart_schedulers) -> None:
    ns, sel = "sched-native", {"e2e": "native"}
    control_plane.ensure_namespace(ns)
    for i in range(2):
        control_plane.create_ready_node(f"native-{i}", cpu="2", labels=sel)
    for group in ("a", "b"):
        kube.create(native_group(group, 3, ns=ns))
    chart_schedulers.start("--scheduler-name", SCHEDULER)
    for group in ("a", "b"):
        for i in range(3):
            kube.create(api_pod(f"{group}-{i}", ns, scheduler=SCHEDULER, cpu="1", nodeSelector=sel,
                                schedulingGroup=in_group(group)))
    wait_for("one gang bound", lambda: sum(1 for p in kube.pods(ns).values() if node_of(p)) == 3)
    pods = kube.pods(ns)
    winner = next(g for g in "ab" if all(node_of(pods[f"{g}-{i}"]) for i in range(3)))
    loser = "b" if winner == "a" else "a"
    assert not any(node_of(pods[f"{loser}-{i}"]) for i in range(3))
    won = wait_for("winner's condition", lambda: _condition(kube, ns, winner))
    assert (won["status"], won["reason"]) == ("True", "Scheduled")
    lost = wait_for("loser's condition", lambda: _condition(kube, ns, loser))
    assert (lost["status"], lost["reason"]) == ("False", "Unschedulable") and "minCount 3" in lost["message"]


def test_a_pod_waits_for_its_group_to_appear(control_plane: ControlPlane, kube: Kube, chart_schedulers) -> None:
    ns, sel = "sched-native-late", {"e2e": "native-late"}
    control_plane.ensure_namespace(ns)
    control_plane.create_ready_node("native-late-0", cpu="4", labels=sel)
    chart_schedulers.start("--scheduler-name", SCHEDULER)
    for i in range(2):
        kube.create(api_pod(f"late-{i}", ns, scheduler=SCHEDULER, nodeSelector=sel, schedulingGroup=in_group("late")))
    wait_for("told it waits for its group", lambda: any(
        "pod group 'late'" in (c.get("message") or "") for p in kube.pods(ns).values()
        for c in (p.get("status") or {}).get("conditions") or []))
    kube.create(native_group("late", 2, ns=ns))
    wait_for("bound once the group exists", lambda: all(node_of(p) for p in kube.pods(ns).values()), timeout=20)


def test_a_podgroup_mode_group_is_preempted_whole_and_told(control_plane: ControlPlane, kube: Kube,
                                                           chart_schedulers) -> None:
    ns, sel = "sched-native-disrupt", {"e2e": "native-disrupt"}
    control_plane.ensure_namespace(ns)
    for name, value in (("e2e-group-low", 0), ("e2e-group-high", 1000)):
        status, _ = kube.request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", priority_class(name, value))
        assert status in (201, 409), status
    for i in range(2):
        control_plane.create_ready_node(f"disrupt-{i}", cpu="2", labels=sel)
    group = native_group("train", 2, ns=ns, disruption="PodGroup")
    group["spec"]["priorityClassName"] = "e2e-group-low"
    kube.create(group)
    for i in range(2):  # running already, one on each node
        kube.create(api_pod(f"train-{i}", ns, scheduler=SCHEDULER, cpu="2", nodeName=f"disrupt-{i}",
                            schedulingGroup=in_group("train")))
    chart_schedulers.start("--scheduler-name", SCHEDULER)
    kube.create(api_pod("urgent", ns, scheduler=SCHEDULER, cpu="1", nodeSelector=sel,
                        priorityClassName="e2e-group-high"))
    wait_for("the whole group evicted", lambda: all(kube.pods(ns)[f"train-{i}"]["metadata"].get("deletionTimestamp")
                                                    for i in range(2)))  # one node's room would do: both go
    cond = wait_for("the group told", lambda: _condition(kube, ns, "train", "DisruptionTarget"))
    assert (cond["status"], cond["reason"]) == ("True", "PreemptionByScheduler")
    for i in range(2):  # what a kubelet would finish
        kube.request("DELETE", f"/api/v1/namespaces/{ns}/pods/train-{i}",
                     {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0})
    wait_for("the preemptor bound", lambda: node_of(kube.pods(ns)["urgent"]))
