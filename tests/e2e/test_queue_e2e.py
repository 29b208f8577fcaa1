"""`policy-scheduler queue` against the real apiserver (issue 51): a scheduler leaves a gang short of members and a
pod whose room is reserved; the view, a separate process reading only what the scheduler published, shows both with
their reason, the gang's progress, the reservation and the tenant's quota.

No kubelet runs here, so the running pod is created bound with a `status.startTime` and an `activeDeadlineSeconds`
(its end: the reservation's start). The scheduler runs as the Helm chart's ServiceAccount (`chart_schedulers`)."""
from __future__ import annotations

import datetime
import json
import subprocess
import sys
import time

from testkit.controlplane import REPO, ControlPlane
from testkit.manifests import api_pod, created, pod, podgroup
from testkit.scheduling import Kube, condition, install_elasticquota_crd, install_podgroup_crd, wait_for

SCHEDULER = "queue-scheduler"
GANG_LABEL = "scheduling.x-k8s.io/pod-group"


def _rfc3339(at: float) -> str:
    return datetime.datetime.fromtimestamp(at, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _told(kube: Kube, ns: str, name: str, words: str) -> bool:
    cond = condition(kube.pods(ns).get(name) or {}) or {}
    return cond.get("status") == "False" and words in cond.get("message", "")


def _queue(control_plane: ControlPlane, *args: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "engine", "queue", "--kubeconfig", str(control_plane.kubeconfig),
                           "-o", "json", *args], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_queue_shows_what_the_scheduler_left_waiting(control_plane: ControlPlane, kube: Kube,
                                                        chart_schedulers) -> None:
    ns, sel = "queue-view", {"e2e": "queue"}
    install_podgroup_crd(kube)
    install_elasticquota_crd(kube)
    control_plane.ensure_namespace(ns)
    control_plane.create_ready_node("queue-1", cpu="2", labels=sel)
    kube.create({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota",
                 "metadata": {"name": "team", "namespace": ns}, "spec": {"max": {"cpu": "8"}}})
    try:
        started = time.time() - 40
        kube.create(created(pod("running", ns=ns, cpu="2", node_name="queue-1", activeDeadlineSeconds=640)))
        kube.ok("PATCH", f"/api/v1/namespaces/{ns}/pods/running/status",
                {"status": {"phase": "Running", "startTime": _rfc3339(started)}}, content_type="application/merge-patch+json")
        kube.create(podgroup("train", 3, ns))
        chart_schedulers.start("--scheduler-name", SCHEDULER)
        for k in range(2):  # two of its three members
            kube.create(api_pod(f"train-{k}", ns, scheduler=SCHEDULER, cpu="100m", nodeSelector=sel,
                                labels={GANG_LABEL: "train"}))
        kube.create(api_pod("next", ns, scheduler=SCHEDULER, cpu="2", nodeSelector=sel))
        wait_for("the gang told it is short", lambda: all(_told(kube, ns, f"train-{k}", "[GangIncomplete]")
                                                          for k in range(2)), timeout=30)
        wait_for("the next pod reserved", lambda: _told(kube, ns, "next", "reserved=queue-1]"), timeout=30)

        view = _queue(control_plane, "-n", ns, "--scheduler-name", SCHEDULER)
        rows = {w["workload"]["name"]: w for w in view["workloads"]}
        assert set(rows) == {"train", "next"}, rows
        train, waiting = rows["train"], rows["next"]
        assert train["gang"]["progress"] == "2/3 members created" and train["reason"] == "GangIncomplete"
        assert (train["pending"], train["tenant"], train["profile"]) == (2, f"{ns}/team", SCHEDULER)
        assert waiting["reserved"] == ["queue-1"] and waiting["reason"] is not None
        expected = datetime.datetime.strptime(waiting["estimatedStart"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
        assert abs(expected.timestamp() - (started + 640)) < 5  # the running pod's end: its room frees then
        [team] = view["quotas"]
        assert team == {"tenant": f"{ns}/team", "used": {"cpu": "2", "pods": "1"}, "min": {}, "max": {"cpu": "8"},
                        "source": "pods"}
        assert _queue(control_plane, "-n", ns)["workloads"] == []  # another profile's view: none of these
    finally:  # the control plane is the session's: a quota left here would make every later test's tenants borrow
        kube.ok("DELETE", f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{ns}/elasticquotas/team")
        for name in kube.pods(ns):
            kube.request("DELETE", f"/api/v1/namespaces/{ns}/pods/{name}", {"gracePeriodSeconds": 0})
