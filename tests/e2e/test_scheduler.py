"""`policy-scheduler run` against the real apiserver: binding, telling users why, gangs, retries.

Each test has its own namespace and nodes labelled `e2e: <test>` (its pods select them), so tests sharing
the session's control plane never compete for capacity. The scheduler is a separate process.
"""
from __future__ import annotations

from testkit.controlplane import ControlPlane
from testkit.manifests import api_pod, podgroup
from testkit.scheduling import Kube, condition, install_podgroup_crd, node_of, wait_for

GANG_LABEL = "scheduling.x-k8s.io/pod-group"


def _unschedulable(kube: Kube, ns: str, name: str) -> dict | None:
    cond = condition(kube.pods(ns)[name])
    return cond if cond and cond["status"] == "False" and cond["reason"] == "Unschedulable" else None


def _events(kube: Kube, ns: str, name: str, reason: str) -> list[dict]:
    return [e for e in kube.events(ns) if e["involvedObject"]["name"] == name and e["reason"] == reason]


def test_binds_by_constraints_and_explains_the_rest(control_plane: ControlPlane, kube: Kube, schedulers) -> None:
    ns, sel = "sched-basic", {"e2e": "basic"}
    control_plane.ensure_namespace(ns)
    control_plane.create_ready_node("basic-a", labels={**sel, "zone": "a"})
    control_plane.create_ready_node("basic-b", labels={**sel, "zone": "b"})
    control_plane.create_ready_node("basic-gpu", labels={**sel, "zone": "a", "kind": "gpu"},
                                    taints=[{"key": "gpu", "value": "true", "effect": "NoSchedule"}])
    zone_b = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}]}}}
    web_apart = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    pods = [api_pod("affine", ns, nodeSelector=sel, affinity=zone_b),
            api_pod("tolerant", ns, nodeSelector={"kind": "gpu"},
                    tolerations=[{"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}]),
            *[api_pod(f"plain-{i}", ns, nodeSelector=sel) for i in range(3)],
            *[api_pod(f"web-{i}", ns, labels={"app": "web"}, nodeSelector=sel, affinity=web_apart) for i in range(3)],
            api_pod("huge", ns, cpu="64", nodeSelector=sel),
            api_pod("elsewhere", ns, scheduler="someone-else", nodeSelector=sel)]
    schedulers.start()  # only --kubeconfig (plus test timings): the default scheduler name
    for p in pods:
        kube.create(p)

    expected_bound = {"affine", "tolerant", "plain-0", "plain-1", "plain-2"}
    wait_for("pods bound", lambda: expected_bound <= {n for n, p in kube.pods(ns).items() if node_of(p)})
    wait_for("two web pods bound", lambda: sum(1 for n, p in kube.pods(ns).items() if n.startswith("web") and node_of(p)) == 2)
    now = kube.pods(ns)
    assert node_of(now["affine"]) == "basic-b"
    assert node_of(now["tolerant"]) == "basic-gpu"
    assert all(node_of(now[f"plain-{i}"]) in ("basic-a", "basic-b") for i in range(3))  # never the tainted node
    web_nodes = [node_of(now[f"web-{i}"]) for i in range(3)]
    assert len({n for n in web_nodes if n}) == 2 and "basic-gpu" not in web_nodes
    left_out = next(f"web-{i}" for i in range(3) if not web_nodes[i])

    for name in ("huge", left_out):
        cond = wait_for(f"{name} PodScheduled=False", lambda name=name: _unschedulable(kube, ns, name))
        assert cond["message"]
        wait_for(f"{name} FailedScheduling event", lambda name=name: _events(kube, ns, name, "FailedScheduling"))
    huge = _unschedulable(kube, ns, "huge")
    assert "cpu" in huge["message"].lower()
    # the reason stays upstream's (the cluster-autoscaler reads it); the message opens with the reason code: the
    # nodes its selector picks are too small, whatever the other tests' nodes it does not select
    assert huge["message"].startswith("[Capacity] 0/"), huge["message"]
    wait_for("Scheduled event", lambda: _events(kube, ns, "affine", "Scheduled"))

    elsewhere = kube.pods(ns)["elsewhere"]  # another scheduler's pod: not bound, not touched, no events
    assert not node_of(elsewhere) and condition(elsewhere) is None
    assert not [e for e in kube.events(ns) if e["involvedObject"]["name"] == "elsewhere"]


def test_gangs_all_or_nothing(control_plane: ControlPlane, kube: Kube, schedulers) -> None:
    """Two gangs of 3 on room for 4: one starts whole, the other waits with a reason, none half-started."""
    ns, sel = "sched-gang", {"e2e": "gang"}
    install_podgroup_crd(kube)
    control_plane.ensure_namespace(ns)
    for i in range(2):
        control_plane.create_ready_node(f"gang-{i}", cpu="2", labels=sel)
    for group in ("g1", "g2"):
        kube.create(podgroup(group, 3, ns))
    schedulers.start("--scheduler-name", "gang-scheduler")
    for group in ("g1", "g2"):
        for i in range(3):
            kube.create(api_pod(f"{group}-{i}", ns, scheduler="gang-scheduler", cpu="1", labels={GANG_LABEL: group},
                                nodeSelector=sel))

    wait_for("one gang bound", lambda: sum(1 for p in kube.pods(ns).values() if node_of(p)) == 3)
    loser = next(g for g in ("g1", "g2") if not any(node_of(kube.pods(ns)[f"{g}-{i}"]) for i in range(3)))
    for i in range(3):
        wait_for(f"{loser}-{i} unschedulable", lambda i=i: _unschedulable(kube, ns, f"{loser}-{i}"))
    bound = {n: node_of(p) for n, p in kube.pods(ns).items() if node_of(p)}
    assert len(bound) == 3 and all(not n.startswith(loser) for n in bound)
    winner = "g2" if loser == "g1" else "g1"

    def status(group: str) -> dict:  # what scheduler-plugins' PodGroup controller would write (no kubelet here)
        return kube.ok("GET", f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{ns}/podgroups/{group}").get("status") or {}
    wait_for("the winner's status", lambda: status(winner).get("phase") == "Scheduled" and status(winner)["scheduled"] == 3)
    wait_for("the loser's status", lambda: status(loser).get("phase") == "Scheduling")


def test_retries_when_a_node_is_added(control_plane: ControlPlane, kube: Kube, schedulers) -> None:
    ns, sel = "sched-retry", {"e2e": "retry"}
    control_plane.ensure_namespace(ns)
    schedulers.start("--scheduler-name", "retry-scheduler")
    kube.create(api_pod("waiting", ns, scheduler="retry-scheduler", nodeSelector=sel))
    wait_for("unschedulable before the node exists", lambda: _unschedulable(kube, ns, "waiting"))
    control_plane.create_ready_node("retry-1", labels=sel)
    wait_for("bound once the node exists", lambda: node_of(kube.pods(ns)["waiting"]) == "retry-1", timeout=15)
