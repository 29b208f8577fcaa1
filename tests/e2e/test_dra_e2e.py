"""DRA through the loop against the real apiserver (resource.k8s.io/v1, on by default in 1.36): the test
publishes a ResourceSlice as a driver would; the scheduler places a pod claiming a GPU on the node that has
one, and before the bind the claim carries the delete-protection finalizer, its allocation and the pod in
reservedFor, as upstream's DynamicResources PreBind leaves it."""
from __future__ import annotations

from testkit.controlplane import ControlPlane
from testkit.manifests import api_pod, claims, created, device_class, gpu, resource_claim, resource_slice
from testkit.scheduling import Kube, node_of, wait_for

SCHEDULER = "dra-scheduler"


def test_a_gpu_claim_is_allocated_and_reserved_before_the_bind(control_plane: ControlPlane, kube: Kube,
                                                              schedulers) -> None:
    ns, sel = "sched-dra", {"e2e": "dra"}
    control_plane.ensure_namespace(ns)
    control_plane.create_ready_node("dra-cpu", labels=sel)
    control_plane.create_ready_node("dra-gpu", labels=sel)
    kube.create(created(device_class("e2e-gpu")))
    kube.create(created(resource_slice("dra-gpu", [gpu("g0"), gpu("g1", model="h100")])))
    big = {"name": "gpu", "exactly": {"deviceClassName": "e2e-gpu", "count": 1, "selectors": [
        {"cel": {"expression": 'device.attributes["gpu.example.com"].model == "h100"'}}]}}
    kube.create(created(resource_claim("train", big, ns=ns)))
    schedulers.start("--scheduler-name", SCHEDULER)
    kube.create(api_pod("trainer", ns, scheduler=SCHEDULER, nodeSelector=sel, resourceClaims=claims("train")))
    wait_for("bound", lambda: node_of(kube.pods(ns)["trainer"]) == "dra-gpu")
    claim = kube.ok("GET", f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/train")
    assert "resource.kubernetes.io/delete-protection" in claim["metadata"]["finalizers"]
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    assert (result["pool"], result["device"]) == ("dra-gpu", "g1")
    assert [r["name"] for r in claim["status"]["reservedFor"]] == ["trainer"]
