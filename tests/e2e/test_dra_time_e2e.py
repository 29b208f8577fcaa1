"""Time in the plan with DRA through the loop and a real apiserver (issue 47, point 1): GPUs published as
ResourceSlices, held by running pods through ResourceClaims allocated to them (status.allocation, reservedFor), free
when those pods end, as `nvidia.com/gpu` does: a scheduling.k8s.io gang (the version the apiserver serves: v1beta1
in 1.37) that needs them is reserved (`policy_scheduler_reservations` > 0) and starts on its reserved nodes once
they end.

No kubelet or resourceclaim controller runs here, so the test plays both: running pods are created bound with a
`status.startTime` and an `activeDeadlineSeconds` that ends them ~30 s from now, their claims allocated and reserved
for them through the status subresource; when they would have ended, it deletes them and deallocates their claims.
The scheduler runs as the Helm chart's ServiceAccount (`chart_schedulers`)."""
from __future__ import annotations

import datetime
import time

from testkit.controlplane import ControlPlane
from testkit.manifests import (
    GPU_DRIVER,
    api_pod,
    claims,
    created,
    device_class,
    in_group,
    native_group,
    pod,
    resource_claim,
    resource_slice,
)
from testkit.scheduling import Kube, condition, node_of, wait_for

SCHEDULER = "dra-time-scheduler"
CLAIMS = "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims"
ENDS_IN = 30  # seconds from the test's start to the running pods' bound
GPUS = 4  # per node


def _rfc3339(at: float) -> str:
    return datetime.datetime.fromtimestamp(at, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _running(kube: Kube, ns: str, name: str, node: str, device: str, ends_at: float) -> None:
    """A pod bound to `node` that started 40 s ago, whose activeDeadlineSeconds ends it at `ends_at`, holding
    `device` through its own claim (allocated there and reserved for it, as the scheduler's PreBind leaves it)."""
    started = time.time() - 40
    kube.create(created(resource_claim(f"{name}-gpu", {"name": "gpu", "exactly": {"deviceClassName": "e2e-time-gpu"}},
                                       ns=ns)))
    made = kube.create(created(pod(name, ns=ns, cpu="100m", node_name=node, resourceClaims=claims(f"{name}-gpu"),
                                   activeDeadlineSeconds=int(ends_at - started))))
    kube.ok("PATCH", f"/api/v1/namespaces/{ns}/pods/{name}/status",
            {"status": {"phase": "Running", "startTime": _rfc3339(started)}}, content_type="application/merge-patch+json")
    selector = {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}
    kube.ok("PATCH", f"{CLAIMS.format(ns=ns)}/{name}-gpu/status", {"status": {
        "allocation": {"devices": {"results": [{"request": "gpu", "driver": GPU_DRIVER, "pool": node, "device": device}]},
                       "nodeSelector": selector},
        "reservedFor": [{"resource": "pods", "name": name, "uid": made["metadata"]["uid"]}]}},
        content_type="application/merge-patch+json")


def _message(kube: Kube, ns: str, name: str) -> str:
    cond = condition(kube.pods(ns).get(name) or {}) or {}
    return cond.get("message", "") if cond.get("status") == "False" else ""


def test_a_dra_gang_is_reserved_until_the_running_pods_free_their_gpus(control_plane: ControlPlane, kube: Kube,
                                                                        chart_schedulers) -> None:
    ns, sel, api = "sched-dra-time", {"e2e": "dra-time"}, kube.podgroups_api()
    control_plane.ensure_namespace(ns)
    nodes = [f"drat-{i}" for i in range(2)]
    kube.create(created(device_class("e2e-time-gpu")))
    for node in nodes:
        control_plane.create_ready_node(node, cpu="16", labels=sel)
        kube.create(created(resource_slice(node, [{"name": f"gpu-{k}"} for k in range(GPUS)])))
    ends_at = time.time() + ENDS_IN
    for node in nodes:
        for k in range(GPUS):
            _running(kube, ns, f"run-{node}-{k}", node, f"gpu-{k}", ends_at)
    kube.create(native_group("train", 2, ns=ns, api_version=api))
    scheduler = chart_schedulers.start("--scheduler-name", SCHEDULER)
    whole = {"name": "gpu", "exactly": {"deviceClassName": "e2e-time-gpu", "count": GPUS}}
    for k in range(2):
        kube.create(created(resource_claim(f"train-{k}-gpus", whole, ns=ns)))
        kube.create(api_pod(f"train-{k}", ns, scheduler=SCHEDULER, nodeSelector=sel, activeDeadlineSeconds=3600,
                            resourceClaims=claims(f"train-{k}-gpus"), schedulingGroup=in_group("train")))
    wait_for("the gang reserved", lambda: all("reserved: expected to start" in _message(kube, ns, f"train-{k}")
                                              for k in range(2)), timeout=20)
    assert scheduler.metric("policy_scheduler_reservations") > 0
    assert "not estimated" not in _message(kube, ns, "train-0")
    assert not any(node_of(kube.pods(ns)[f"train-{k}"]) for k in range(2))

    time.sleep(max(0.0, ends_at - time.time()))  # the kubelet's and the resourceclaim controller's part
    for node in nodes:
        for k in range(GPUS):
            name = f"run-{node}-{k}"
            kube.request("DELETE", f"/api/v1/namespaces/{ns}/pods/{name}?gracePeriodSeconds=0")
            kube.ok("PATCH", f"{CLAIMS.format(ns=ns)}/{name}-gpu/status", {"status": {"allocation": None,
                                                                                       "reservedFor": None}},
                    content_type="application/merge-patch+json")
    wait_for("the gang bound on its reserved nodes",
             lambda: {node_of(kube.pods(ns)[f"train-{k}"]) for k in range(2)} == set(nodes), timeout=30)
    for k in range(2):
        allocated = kube.ok("GET", f"{CLAIMS.format(ns=ns)}/train-{k}-gpus")["status"]["allocation"]
        assert len(allocated["devices"]["results"]) == GPUS
