"""Reclaim by preemption through the real apiserver (issue 19): a tenant below its ElasticQuota min gets its room
back from a tenant running beyond its own, whatever the pods' priorities. No kubelet runs here, so the test
plays its part (force-deletes the pods the scheduler deleted gracefully), as test_scheduler_preemption does."""
from __future__ import annotations

from testkit.controlplane import ControlPlane
from testkit.manifests import api_pod, priority_class
from testkit.scheduling import Kube, install_elasticquota_crd, node_of, play_kubelet, wait_for

QUOTAS = "/apis/scheduling.x-k8s.io/v1alpha1"


def _quota(kube: Kube, ns: str, low: str, high: str) -> None:
    body = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota",
            "metadata": {"name": "quota", "namespace": ns}, "spec": {"min": {"cpu": low}, "max": {"cpu": high}}}
    kube.ok("POST", f"{QUOTAS}/namespaces/{ns}/elasticquotas", body)


def test_a_tenant_below_its_min_reclaims_from_a_borrower(control_plane: ControlPlane, kube: Kube,
                                                         chart_schedulers) -> None:
    """team-a (min 2, max 4) runs 4 one-cpu pods of priorities 10..13 on the only 4-cpu node, borrowing team-b's idle
    min; team-b (min 2) asks for 2 one-cpu pods of priority 0. The two lowest-priority team-a pods go, team-b's bind."""
    sel, team_a, team_b = {"e2e": "reclaim"}, "reclaim-team-a", "reclaim-team-b"
    install_elasticquota_crd(kube)
    for ns in (team_a, team_b):
        control_plane.ensure_namespace(ns)
    _quota(kube, team_a, "2", "4")
    _quota(kube, team_b, "2", "4")
    for value in (0, 10, 11, 12, 13):
        status, _ = kube.request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", priority_class(f"e2e-reclaim-{value}", value))
        assert status in (201, 409), status
    control_plane.create_ready_node("reclaim-0", cpu="4", labels=sel)
    for i in range(4):
        kube.create(api_pod(f"a{i}", team_a, cpu="1", nodeName="reclaim-0", priorityClassName=f"e2e-reclaim-{10 + i}"))
    chart_schedulers.start("--scheduler-name", "reclaim-scheduler")
    for i in range(2):
        kube.create(api_pod(f"b{i}", team_b, scheduler="reclaim-scheduler", cpu="1", nodeSelector=sel,
                            priorityClassName="e2e-reclaim-0"))

    wait_for("two victims marked", lambda: sum(1 for p in kube.pods(team_a).values()
                                               if p["metadata"].get("deletionTimestamp")) == 2, timeout=60)
    assert play_kubelet(kube, team_a) == ["a0", "a1"]  # the lowest priorities
    wait_for("team-b bound", lambda: all(node_of(p) == "reclaim-0" for p in kube.pods(team_b).values()), timeout=60)
    assert set(kube.pods(team_a)) == {"a2", "a3"}  # team-a keeps its min
    events = [e for e in kube.events(team_a) if e["involvedObject"]["name"] == "a0" and e["reason"] == "Preempted"]
    assert events and "reclaiming the min of ElasticQuota reclaim-team-b/quota" in events[0]["message"]
