"""Preemption for what is not room (issue 26): a lower-priority running pod that keeps a pending pod out by
inter-pod anti-affinity (its own rule or the pending pod's) or by a `DoNotSchedule` topology spread is evicted,
as kube-scheduler v1.36.3's DefaultPreemption evicts it: its dry run takes the lower-priority pods off a node,
runs the filters again (InterPodAffinity and PodTopologySpread count the pods taken off), and gives back every
pod the pending pod does not need gone. Cpu is plentiful everywhere, so no case is about room. Each case, run
as it is with kube-scheduler v1.36.3 as the scheduler (DefaultPreemption on), passes.

Each case: the victim is marked (`DisruptionTarget`, `PreemptionByScheduler`) and deleted, the preemptor is
nominated and binds there once the victim is gone (no kubelet runs: `play_kubelet` finishes the deletion), and
nothing else is deleted. A last case, where only pods of equal or higher priority are in the way, evicts nothing
and tells the pod why.

Before it waits for the eviction, each case checks that the scheduler saw the setup as intended: if it left the
pod unschedulable, its PodScheduled message names the kind that blocks it (not room, not the node selector)."""
from __future__ import annotations

from testkit.controlplane import ControlPlane
from testkit.manifests import HOSTNAME_KEY, ZONE_KEY, api_pod, priority_class
from testkit.scheduling import Kube, condition, node_of, play_kubelet, wait_for

PRIORITY_CLASSES = {"kinds-low": 0, "kinds-mid": 500, "kinds-high": 1000, "kinds-top": 2000}
EXISTING_ANTI = "node(s) didn't satisfy existing pods anti-affinity rules"  # upstream InterPodAffinity's reasons
OWN_ANTI = "node(s) didn't match pod anti-affinity rules"
SPREAD = "topology spread"  # upstream: "node(s) didn't match pod topology spread constraints"; ours names the constraint
SEEN_S, EVICTED_S = 30.0, 20.0  # the scheduler's first verdict on the pod (start included); then the eviction


def _setup(control_plane: ControlPlane, kube: Kube, ns: str) -> None:
    for name, value in PRIORITY_CLASSES.items():
        status, _ = kube.request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", priority_class(name, value))
        assert status in (201, 409), status
    control_plane.ensure_namespace(ns)


def _anti(labels: dict) -> dict:
    """A required podAntiAffinity against pods labelled `labels`, per node."""
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": labels}, "topologyKey": HOSTNAME_KEY}]}}


def _running(kube: Kube, name: str, ns: str, node: str, priority: str, labels: dict, **spec) -> None:
    """A pod already bound and running on `node` (created with nodeName: no scheduler involved)."""
    kube.create(api_pod(name, ns, labels=labels, nodeName=node, priorityClassName=priority, **spec))


def _told(pod: dict) -> str:
    """The message of the pod's PodScheduled=False condition ("" if it has none)."""
    cond = condition(pod)
    return (cond.get("message") or "") if cond and cond["status"] == "False" else ""


def _terminating(kube: Kube, ns: str) -> list[str]:
    return sorted(n for n, p in kube.pods(ns).items() if p["metadata"].get("deletionTimestamp"))


def _preempts(kube: Kube, ns: str, pod: str, victim: str, node: str, blocked_by: str) -> None:
    """`pod` evicts `victim` alone and binds to `node` once it is gone; every other pod of `ns` stays."""
    others = set(kube.pods(ns)) - {pod, victim}

    def verdict() -> str | None:
        pods = kube.pods(ns)
        if pods[victim]["metadata"].get("deletionTimestamp") or pods[pod].get("status", {}).get("nominatedNodeName"):
            return "preempting"
        return _told(pods[pod]) or None
    told = wait_for(f"{pod} scheduled, preempting or told why not", verdict, timeout=SEEN_S)
    if told != "preempting":  # left unschedulable for now: the setup must block it by the kind under test
        assert blocked_by in told, f"the setup does not block {pod} as intended: {told}"
    wait_for(f"victim {victim} marked and deleted ({pod} was told: {told!r})",
             lambda: kube.pods(ns)[victim]["metadata"].get("deletionTimestamp"), timeout=EVICTED_S)

    marks = [c for c in kube.pods(ns)[victim]["status"].get("conditions") or [] if c["type"] == "DisruptionTarget"]
    assert marks and marks[0]["status"] == "True" and marks[0]["reason"] == "PreemptionByScheduler", marks
    wait_for(f"{pod} nominated to {node}",
             lambda: kube.pods(ns)[pod].get("status", {}).get("nominatedNodeName") == node, timeout=EVICTED_S)
    assert not node_of(kube.pods(ns)[pod]), "bound before its victim left"
    assert _terminating(kube, ns) == [victim], "only the chosen victim goes"

    assert play_kubelet(kube, ns) == [victim]
    wait_for(f"{pod} bound to {node}", lambda: node_of(kube.pods(ns)[pod]) == node, timeout=EVICTED_S)
    pods = kube.pods(ns)
    assert victim not in pods
    assert set(pods) == others | {pod}, "a pod other than the victim was deleted"
    assert _terminating(kube, ns) == [], "a pod other than the victim is being deleted"


def test_a_running_pods_anti_affinity_that_repels_the_pod_is_evicted(control_plane: ControlPlane, kube: Kube,
                                                                     chart_schedulers) -> None:
    """Both nodes hold a running pod whose required anti-affinity repels the pending pod (upstream's
    "didn't satisfy existing pods anti-affinity rules"): the one of lower priority goes."""
    ns, sel = "preempt-kinds-existing", {"e2e": "preempt-kinds-existing"}
    _setup(control_plane, kube, ns)
    for node in ("pk-existing-a", "pk-existing-b"):
        control_plane.create_ready_node(node, cpu="4", labels=sel)
    repels = _anti({"app": "urgent"})
    _running(kube, "guard-low", ns, "pk-existing-a", "kinds-low", {"app": "guard"}, affinity=repels)
    _running(kube, "guard-mid", ns, "pk-existing-b", "kinds-mid", {"app": "guard"}, affinity=repels)
    _running(kube, "bystander", ns, "pk-existing-a", "kinds-low", {"app": "other"})  # in nobody's way
    chart_schedulers.start("--scheduler-name", "kinds-existing-scheduler")
    kube.create(api_pod("urgent", ns, scheduler="kinds-existing-scheduler", labels={"app": "urgent"},
                        nodeSelector=sel, priorityClassName="kinds-high"))

    _preempts(kube, ns, "urgent", victim="guard-low", node="pk-existing-a", blocked_by=EXISTING_ANTI)


def test_the_pods_own_anti_affinity_evicts_the_running_pod_it_shuns(control_plane: ControlPlane, kube: Kube,
                                                                    chart_schedulers) -> None:
    """The pending pod's required anti-affinity shuns the pods running on both nodes (upstream's "didn't match
    pod anti-affinity rules"): the one of lower priority goes."""
    ns, sel = "preempt-kinds-own", {"e2e": "preempt-kinds-own"}
    _setup(control_plane, kube, ns)
    for node in ("pk-own-a", "pk-own-b"):
        control_plane.create_ready_node(node, cpu="4", labels=sel)
    _running(kube, "db-low", ns, "pk-own-a", "kinds-low", {"app": "db"})
    _running(kube, "db-mid", ns, "pk-own-b", "kinds-mid", {"app": "db"})
    _running(kube, "bystander", ns, "pk-own-a", "kinds-low", {"app": "other"})  # in nobody's way
    chart_schedulers.start("--scheduler-name", "kinds-own-scheduler")
    kube.create(api_pod("urgent", ns, scheduler="kinds-own-scheduler", labels={"app": "urgent"}, nodeSelector=sel,
                        priorityClassName="kinds-high", affinity=_anti({"app": "db"})))

    _preempts(kube, ns, "urgent", victim="db-low", node="pk-own-a", blocked_by=OWN_ANTI)


def test_a_lower_priority_replica_that_skews_a_zone_spread_is_evicted(control_plane: ControlPlane, kube: Kube,
                                                                      chart_schedulers) -> None:
    """A zone spread (maxSkew 1, DoNotSchedule) over three zones of one node each. Zone c's node is tainted: the
    pod cannot go there, but it still counts as a domain (nodeTaintsPolicy defaults to Ignore) with no replica, so
    the minimum is 0 and a zone that already has a replica is one too many (skew 1 + 1 - 0 = 2). Two zones alone
    could never block it: the emptier one always takes one more within maxSkew 1. Zone a's replica is of lower
    priority: evicting it brings a to 0 + 1 - 0 = 1. Zone b's is of the pod's own priority and stays."""
    ns, sel = "preempt-kinds-spread", {"e2e": "preempt-kinds-spread"}
    _setup(control_plane, kube, ns)
    for zone in ("a", "b", "c"):
        control_plane.create_ready_node(f"pk-spread-{zone}", cpu="4", labels={**sel, ZONE_KEY: f"pk-zone-{zone}"},
                                        taints=[{"key": "reserved", "value": "other", "effect": "NoSchedule"}]
                                        if zone == "c" else None)
    web = {"app": "web"}
    _running(kube, "web-low", ns, "pk-spread-a", "kinds-low", web)
    _running(kube, "web-peer", ns, "pk-spread-b", "kinds-high", web)
    _running(kube, "bystander", ns, "pk-spread-a", "kinds-low", {"app": "other"})  # in nobody's way
    chart_schedulers.start("--scheduler-name", "kinds-spread-scheduler")
    spread = [{"maxSkew": 1, "topologyKey": ZONE_KEY, "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": web}}]
    kube.create(api_pod("urgent", ns, scheduler="kinds-spread-scheduler", labels=web, nodeSelector=sel,
                        priorityClassName="kinds-high", topologySpreadConstraints=spread))

    _preempts(kube, ns, "urgent", victim="web-low", node="pk-spread-a", blocked_by=SPREAD)


def test_nothing_is_evicted_when_only_pods_of_equal_or_higher_priority_are_in_the_way(
        control_plane: ControlPlane, kube: Kube, chart_schedulers) -> None:
    """Node a: a pod of the pending pod's own priority repels it by its anti-affinity (a lower-priority pod there
    is in nobody's way); node b: the pending pod's anti-affinity shuns a pod of higher priority. kube-scheduler
    finds no victims; nothing is evicted and the pod is told why."""
    ns, sel = "preempt-kinds-none", {"e2e": "preempt-kinds-none"}
    _setup(control_plane, kube, ns)
    for node in ("pk-none-a", "pk-none-b"):
        control_plane.create_ready_node(node, cpu="4", labels=sel)
    _running(kube, "rival", ns, "pk-none-a", "kinds-high", {"app": "rival"}, affinity=_anti({"app": "urgent"}))
    _running(kube, "bystander", ns, "pk-none-a", "kinds-low", {"app": "other"})
    _running(kube, "boss", ns, "pk-none-b", "kinds-top", {"app": "boss"})
    chart_schedulers.start("--scheduler-name", "kinds-none-scheduler")
    kube.create(api_pod("urgent", ns, scheduler="kinds-none-scheduler", labels={"app": "urgent"}, nodeSelector=sel,
                        priorityClassName="kinds-high", affinity=_anti({"app": "boss"})))

    told = wait_for("urgent told why it is not scheduled", lambda: _told(kube.pods(ns)["urgent"]), timeout=SEEN_S)
    assert EXISTING_ANTI in told and OWN_ANTI in told, told
    assert "preemption" in told.lower(), f"not told why preemption does not help: {told}"
    urgent = kube.pods(ns)["urgent"]
    assert not node_of(urgent) and not urgent.get("status", {}).get("nominatedNodeName"), urgent.get("status")
    assert set(kube.pods(ns)) == {"rival", "bystander", "boss", "urgent"} and _terminating(kube, ns) == []
