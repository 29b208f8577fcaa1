"""Preemption through the real apiserver (issue 10): victims marked and deleted, the preemptor nominated and
bound once they are gone. No kubelet runs here, so the test plays its part: it force-deletes pods that the
scheduler deleted gracefully (they keep their deletionTimestamp until a kubelet confirms)."""
from __future__ import annotations

from testkit.controlplane import ControlPlane
from testkit.manifests import api_pod, budget, priority_class
from testkit.scheduling import Kube, node_of, play_kubelet, wait_for

PRIORITY_CLASSES = {"e2e-low": (0, None), "e2e-mid": (500, None), "e2e-high": (1000, None),
                    "e2e-high-polite": (1000, "Never")}


def _priority_classes(kube: Kube) -> None:
    for name, (value, policy) in PRIORITY_CLASSES.items():
        body = priority_class(name, value, preemption_policy=policy)
        status, _ = kube.request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", body)
        assert status in (201, 409), status


def test_preemption_evicts_the_cheapest_victims_and_binds_after_they_leave(
        control_plane: ControlPlane, kube: Kube, chart_schedulers) -> None:
    ns, sel = "sched-preempt", {"e2e": "preempt"}
    _priority_classes(kube)
    control_plane.ensure_namespace(ns)
    control_plane.create_ready_node("preempt-a", cpu="2", labels=sel)
    control_plane.create_ready_node("preempt-b", cpu="2", labels=sel)
    # a: two mid-priority pods, one of them under a budget that allows no disruption; b: one low-priority pod
    kube.create(api_pod("mid-0", ns, cpu="1", labels={"app": "db"}, nodeName="preempt-a", priorityClassName="e2e-mid"))
    kube.create(api_pod("mid-1", ns, cpu="1", nodeName="preempt-a", priorityClassName="e2e-mid"))
    kube.create(api_pod("low-0", ns, cpu="2", nodeName="preempt-b", priorityClassName="e2e-low"))
    kube.create(budget("db", {"app": "db"}, min_available=1, ns=ns))
    chart_schedulers.start("--scheduler-name", "preempt-scheduler")
    kube.create(api_pod("urgent", ns, scheduler="preempt-scheduler", cpu="2", nodeSelector=sel,
                        priorityClassName="e2e-high"))
    kube.create(api_pod("polite", ns, scheduler="preempt-scheduler", cpu="2", nodeSelector=sel,
                        priorityClassName="e2e-high-polite"))

    # the low-priority pod on b is the cheaper victim (a's would be two pods, one over budget)
    wait_for("victim marked and deleted", lambda: kube.pods(ns)["low-0"]["metadata"].get("deletionTimestamp"))
    victim = kube.pods(ns)["low-0"]
    marks = [c for c in victim["status"].get("conditions") or [] if c["type"] == "DisruptionTarget"]
    assert marks and marks[0]["reason"] == "PreemptionByScheduler"
    wait_for("preemptor nominated",
             lambda: kube.pods(ns)["urgent"].get("status", {}).get("nominatedNodeName") == "preempt-b")
    assert not node_of(kube.pods(ns)["urgent"]), "bound before its victim left"
    assert {"mid-0", "mid-1"} <= set(kube.pods(ns)), "only the chosen victim goes"

    assert play_kubelet(kube, ns) == ["low-0"]
    wait_for("preemptor bound", lambda: node_of(kube.pods(ns)["urgent"]) == "preempt-b")
    events = [e for e in kube.events(ns) if e["involvedObject"]["name"] == "low-0" and e["reason"] == "Preempted"]
    assert events and "urgent" in events[0]["message"]
    polite = kube.pods(ns)["polite"]
    assert not node_of(polite) and not polite["metadata"].get("deletionTimestamp")
    wait_for("polite pod told why", lambda: any(
        "preemptionPolicy: Never" in (c.get("message") or "")
        for c in kube.pods(ns)["polite"].get("status", {}).get("conditions") or []))
    assert {"mid-0", "mid-1"} <= set(kube.pods(ns))
