"""Native gangs (KEP-4671 scheduling.k8s.io PodGroups, gates on in the test control plane) through the loop, at
whichever version the apiserver serves (v1alpha2 in 1.36, v1beta1 in 1.37, as the loop finds it): a gang starts
whole or waits, a zonal gang in one zone, the group's scheduling condition (PodGroupScheduled in 1.36,
PodGroupInitiallyScheduled in 1.37) says which and why, a pod whose group does not exist yet waits until it is
created, and a `PodGroup` (1.37: `{all: {}}`) group is preempted whole with its DisruptionTarget condition. 1.37
alone: a lowered minCount is read by the next cycle, and a group whose pods' priority differs is refused with
upstream's words."""
from __future__ import annotations

import pytest

from engine.model.reasons import Code, code_of
from testkit.controlplane import ControlPlane
from testkit.manifests import (
    NATIVE_V1ALPHA2,
    ZONE_KEY,
    api_pod,
    composite_group,
    in_group,
    native_group,
    priority_class,
)
from testkit.scheduling import Kube, node_of, wait_for

SCHEDULER = "native-scheduler"


def _scheduled_condition(api_version: str) -> str:
    return "PodGroupScheduled" if api_version == NATIVE_V1ALPHA2 else "PodGroupInitiallyScheduled"


def _condition(kube: Kube, ns: str, name: str, kind: str | None = None) -> dict | None:
    api = kube.podgroups_api()
    group = kube.ok("GET", f"/apis/{api}/namespaces/{ns}/podgroups/{name}")
    kind = kind or _scheduled_condition(api)
    return next((c for c in (group.get("status") or {}).get("conditions") or [] if c["type"] == kind), None)


def test_native_gangs_start_whole_and_say_so(control_plane: ControlPlane, kube: Kube, chart_schedulers) -> None:
    ns, sel, api = "sched-native", {"e2e": "native"}, kube.podgroups_api()
    control_plane.ensure_namespace(ns)
    for i in range(2):
        control_plane.create_ready_node(f"native-{i}", cpu="2", labels=sel)
    for group in ("a", "b"):
        kube.create(native_group(group, 3, ns=ns, api_version=api))
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
    # the message opens with the group's reason code: once every member is pending, room (the other gang's)
    lost = wait_for("loser's code", lambda: (c := _condition(kube, ns, loser)) and code_of(c["message"]) is
                    Code.CAPACITY and c)
    assert lost["reason"] == "Unschedulable" and lost["message"].startswith("[Capacity] ")


def test_a_zonal_gang_goes_in_one_zone(control_plane: ControlPlane, kube: Kube, chart_schedulers) -> None:
    ns, api = "sched-native-zonal", kube.podgroups_api()
    control_plane.ensure_namespace(ns)
    for zone in ("za", "zb"):
        for i in range(2):
            control_plane.create_ready_node(f"zonal-{zone}-{i}", cpu="2", labels={"e2e": "zonal", ZONE_KEY: zone})
    kube.create(native_group("z", 4, ns=ns, topology=ZONE_KEY, api_version=api))
    chart_schedulers.start("--scheduler-name", SCHEDULER)
    for i in range(4):  # room for 4 in either zone, 8 in both: the gang takes one zone whole
        kube.create(api_pod(f"z-{i}", ns, scheduler=SCHEDULER, cpu="1", nodeSelector={"e2e": "zonal"},
                            schedulingGroup=in_group("z")))
    wait_for("the gang bound", lambda: all(node_of(p) for p in kube.pods(ns).values()), timeout=30)
    zones = {node_of(p).split("-")[1] for p in kube.pods(ns).values()}
    assert len(zones) == 1, zones
    placed = wait_for("the group's condition", lambda: _condition(kube, ns, "z"))
    assert placed["status"] == "True" and f"{ZONE_KEY}: {zones.pop()}" in placed["message"]  # where, in its words


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
    kube.create(native_group("late", 2, ns=ns, api_version=kube.podgroups_api()))
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
    group = native_group("train", 2, ns=ns, disruption="PodGroup", api_version=kube.podgroups_api())
    group["spec"]["priorityClassName"] = "e2e-group-low"
    kube.create(group)
    for i in range(2):  # running already, one on each node
        kube.create(api_pod(f"train-{i}", ns, scheduler=SCHEDULER, cpu="2", nodeName=f"disrupt-{i}",
                            priorityClassName="e2e-group-low", schedulingGroup=in_group("train")))
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


ONLY_V1BETA1 = pytest.mark.kube_versions(min="1.37", reason="scheduling.k8s.io/v1beta1 behaviour")


@ONLY_V1BETA1
def test_a_lowered_min_count_lets_the_gang_start(control_plane: ControlPlane, kube: Kube, chart_schedulers) -> None:
    ns, sel = "sched-native-shrink", {"e2e": "native-shrink"}
    api = kube.podgroups_api()
    control_plane.ensure_namespace(ns)
    control_plane.create_ready_node("shrink-0", cpu="4", labels=sel)
    kube.create(native_group("s", 3, ns=ns, api_version=api))
    chart_schedulers.start("--scheduler-name", SCHEDULER)
    for i in range(2):
        kube.create(api_pod(f"s-{i}", ns, scheduler=SCHEDULER, cpu="1", nodeSelector=sel, schedulingGroup=in_group("s")))
    told = wait_for("told it waits", lambda: _condition(kube, ns, "s"))
    assert told["status"] == "False" and "minCount 3" in told["message"]
    kube.ok("PATCH", f"/apis/{api}/namespaces/{ns}/podgroups/s", {"spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}},
            content_type="application/merge-patch+json")  # mutable from 1.37 on
    wait_for("both bound", lambda: all(node_of(p) for p in kube.pods(ns).values()), timeout=30)
    assert wait_for("the group scheduled", lambda: (_condition(kube, ns, "s") or {}).get("status") == "True")


@ONLY_V1BETA1
def test_a_group_whose_pods_priority_differs_is_refused(control_plane: ControlPlane, kube: Kube,
                                                        chart_schedulers) -> None:
    ns, sel = "sched-native-mixed", {"e2e": "native-mixed"}
    api = kube.podgroups_api()
    control_plane.ensure_namespace(ns)
    control_plane.create_ready_node("mixed-0", cpu="4", labels=sel)
    status, _ = kube.request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", priority_class("e2e-mixed", 50))
    assert status in (201, 409), status
    group = native_group("m", 2, ns=ns, api_version=api)
    group["spec"]["priorityClassName"] = "e2e-mixed"  # admission gives the group 50, its pods keep 0
    kube.create(group)
    chart_schedulers.start("--scheduler-name", SCHEDULER)
    for i in range(2):
        kube.create(api_pod(f"m-{i}", ns, scheduler=SCHEDULER, cpu="1", nodeSelector=sel, schedulingGroup=in_group("m")))
    cond = wait_for("the group told", lambda: _condition(kube, ns, "m"))
    assert (cond["status"], cond["reason"]) == ("False", "SchedulerError")
    assert "same priority as the pod group's priority, got 0 and 50" in cond["message"]
    assert not any(node_of(p) for p in kube.pods(ns).values())


@pytest.mark.kube_versions(min="1.37", reason="CompositePodGroup: scheduling.k8s.io/v1alpha3 behind 1.37's alpha gate")
def test_a_composite_group_starts_its_children_together_in_one_block(control_plane: ControlPlane, kube: Kube,
                                                                       chart_schedulers) -> None:
    """A CompositePodGroup (minGroupCount 2, topology block) of two PodGroups of 2 (topology rack; one node per
    rack). Block b2's racks hold 2 and 1 pods, block b1's 2 and 2: only b1 holds both children, each in one rack. The
    composite is read from 1.37's v1alpha3 and its children from v1beta1, as the loop's discovery finds them."""
    ns, sel = "sched-composite", {"e2e": "composite"}
    control_plane.ensure_namespace(ns)
    for name, cpu, block in (("cpg-n0", "2", "b2"), ("cpg-n1", "1", "b2"), ("cpg-n2", "2", "b1"), ("cpg-n3", "2", "b1")):
        control_plane.create_ready_node(name, cpu=cpu, labels={**sel, "block": block, "rack": name})
    kube.create(composite_group("job", 2, ns=ns, topology="block", api_version="scheduling.k8s.io/v1alpha3"))
    for child in ("x", "y"):
        kube.create(native_group(child, 2, ns=ns, topology="rack", api_version=kube.podgroups_api(), parent="job"))
    chart_schedulers.start("--scheduler-name", SCHEDULER)
    for child in ("x", "y"):
        for i in range(2):
            kube.create(api_pod(f"{child}-{i}", ns, scheduler=SCHEDULER, cpu="1", nodeSelector=sel,
                                schedulingGroup=in_group(child)))
    wait_for("both children bound", lambda: all(node_of(p) for p in kube.pods(ns).values()), timeout=30)
    pods = kube.pods(ns)
    assert {node_of(p) for p in pods.values()} == {"cpg-n2", "cpg-n3"}
    for child in ("x", "y"):
        assert len({node_of(pods[f"{child}-{i}"]) for i in range(2)}) == 1  # each child in one rack

    def composite_condition() -> dict | None:
        found = kube.ok("GET", f"/apis/scheduling.k8s.io/v1alpha3/namespaces/{ns}/compositepodgroups/job")
        return next((c for c in (found.get("status") or {}).get("conditions") or []
                     if c["type"] == "CompositePodGroupInitiallyScheduled"), None)

    told = wait_for("the composite's condition", composite_condition)
    assert (told["status"], told["reason"]) == ("True", "Scheduled") and "2 pod group(s)" in told["message"]
