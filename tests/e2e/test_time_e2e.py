"""Time in the plan through the loop and a real apiserver (issue 29): a gang's reservation survives a stream of
small pods, short ones backfill its room, long ones wait, and it starts when its nodes free.

No kubelet runs here, so the test plays it: running pods are created bound with a `status.startTime` and an
`activeDeadlineSeconds` that ends them ~30 s from now, and it deletes pods when they would have ended. The
scheduler runs as the Helm chart's ServiceAccount (`chart_schedulers`)."""
from __future__ import annotations

import datetime
import time

from testkit.controlplane import ControlPlane
from testkit.manifests import api_pod, created, pod, podgroup, priority_class
from testkit.scheduling import Kube, condition, install_podgroup_crd, node_of, wait_for

SCHEDULER = "time-scheduler"
GPU = "nvidia.com/gpu"
GANG_LABEL = "scheduling.x-k8s.io/pod-group"
ENDS_IN = 30  # seconds from the test's start to the running pods' bound


def _rfc3339(at: float) -> str:
    return datetime.datetime.fromtimestamp(at, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _running(kube: Kube, ns: str, name: str, node: str, ends_at: float) -> None:
    """A 1-GPU pod bound to `node` that started 40 s ago and whose activeDeadlineSeconds ends it at `ends_at`."""
    started = time.time() - 40
    doc = created(pod(name, ns=ns, cpu="100m", requests={GPU: "1"}, limits={GPU: "1"}, node_name=node,
                      activeDeadlineSeconds=int(ends_at - started)))
    kube.create(doc)
    kube.ok("PATCH", f"/api/v1/namespaces/{ns}/pods/{name}/status",
            {"status": {"phase": "Running", "startTime": _rfc3339(started)}}, content_type="application/merge-patch+json")


def _message(kube: Kube, ns: str, name: str) -> str:
    cond = condition(kube.pods(ns).get(name) or {}) or {}
    return cond.get("message", "") if cond.get("status") == "False" else ""


def test_a_gang_reservation_survives_a_stream_of_small_pods(control_plane: ControlPlane, kube: Kube,
                                                            chart_schedulers) -> None:
    ns, sel = "sched-time", {"e2e": "time"}
    install_podgroup_crd(kube)
    control_plane.ensure_namespace(ns)
    for name in ("g1", "g2"):
        control_plane.create_ready_node(f"time-{name}", cpu="16", labels=sel, extra_resources={GPU: "8"})
    kube.create(priority_class("time-train", 1000, preemption_policy="Never"))
    kube.create(podgroup("train", 2, ns))
    ends_at = time.time() + ENDS_IN
    for name in ("g1", "g2"):
        for k in range(8):
            _running(kube, ns, f"run-{name}-{k}", f"time-{name}", ends_at)
    chart_schedulers.start("--scheduler-name", SCHEDULER)
    for k in range(2):
        kube.create(api_pod(f"train-{k}", ns, scheduler=SCHEDULER, requests={GPU: "8"}, limits={GPU: "8"}, nodeSelector=sel,
                            labels={GANG_LABEL: "train"}, priorityClassName="time-train"))
    wait_for("the gang reserved", lambda: all("reserved: expected to start" in _message(kube, ns, f"train-{k}")
                                              for k in range(2)), timeout=20)

    for k in range(4):  # half of g1 finishes early: room now, reserved for the gang from `ends_at`
        kube.request("DELETE", f"/api/v1/namespaces/{ns}/pods/run-g1-{k}?gracePeriodSeconds=0")
    for k in range(4):
        kube.create(api_pod(f"long-{k}", ns, scheduler=SCHEDULER, requests={GPU: "1"}, limits={GPU: "1"}, nodeSelector=sel,
                            activeDeadlineSeconds=3600))
        kube.create(api_pod(f"short-{k}", ns, scheduler=SCHEDULER, requests={GPU: "1"}, limits={GPU: "1"}, nodeSelector=sel,
                            activeDeadlineSeconds=5))
    wait_for("the short pods backfill g1", lambda: all(node_of(kube.pods(ns)[f"short-{k}"]) == "time-g1"
                                                      for k in range(4)), timeout=ENDS_IN / 2)
    time.sleep(2.0)
    pods = kube.pods(ns)
    assert not any(node_of(pods[f"long-{k}"]) for k in range(4))  # they would delay the gang
    assert "reserved for" in _message(kube, ns, "long-0")

    time.sleep(max(0.0, ends_at - time.time()))  # the kubelet's part: every running pod and short pod ends
    for name in [n for n in kube.pods(ns) if n.startswith(("run-", "short-"))]:
        kube.request("DELETE", f"/api/v1/namespaces/{ns}/pods/{name}?gracePeriodSeconds=0")
    wait_for("the gang bound on its reserved nodes",
             lambda: {node_of(kube.pods(ns)[f"train-{k}"]) for k in range(2)} == {"time-g1", "time-g2"}, timeout=30)
