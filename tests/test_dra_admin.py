"""Admin access (DRAAdminAccess, GA in 1.36): a request with `adminAccess: true` gets devices whether or not other
claims hold them, and holds none itself (its results say `adminAccess: true`, and upstream does not count them
as allocated); the apiserver admits such a claim only in a namespace labelled
`resource.kubernetes.io/admin-access: "true"`, so a snapshot's claim elsewhere keeps its pod waiting, saying so."""
from __future__ import annotations

import threading

from engine.model.ir import Rules
from engine.planning.planner import Options, plan_batch
from engine.reading.load import build_cluster
from loopfake import FakeAPI, synced_loop
from loopfake import node as api_node
from loopfake import pod as api_pod
from testkit.manifests import claims, device_class, gpu, namespace, node, pod, resource_claim, resource_slice

ADMIN_NS = namespace("default", {"resource.kubernetes.io/admin-access": "true"})


def admin_request() -> dict:
    return {"name": "gpu", "exactly": {"deviceClassName": "gpu", "adminAccess": True}}


def plan_for(docs: list[dict]):
    return plan_batch(build_cluster([(f"doc{i}", d) for i, d in enumerate(docs)]), Rules(),
                      Options(time_limit=3, workers=1))


def test_an_admin_claim_gets_a_device_another_claim_holds_and_holds_none_itself() -> None:
    running = resource_claim("running", allocated=[("gpu-1", "g0")], node="gpu-1")
    docs = [ADMIN_NS, node("gpu-1", cpu="4"), device_class(), resource_slice("gpu-1", [gpu("g0")]), running,
            resource_claim("watch", admin_request()), pod("monitor", resourceClaims=claims("watch"))]
    plan = plan_for(docs)
    assert plan.assignments == {"default/monitor": "gpu-1"}
    (allocation,) = plan.details.reserved["default/monitor"]["DynamicResources"].values()
    assert allocation.admin == ("gpu",) and [d for _, d in allocation.devices] == ["gpu.example.com/gpu-1/g0"]
    # an admin claim allocated already does not hold the device from a plain one
    held = resource_claim("watched", admin_request())
    held["status"] = {"allocation": {"devices": {"results": [{"request": "gpu", "driver": "gpu.example.com",
                                                              "pool": "gpu-1", "device": "g0", "adminAccess": True}]}}}
    plain = [ADMIN_NS, node("gpu-1", cpu="4"), device_class(), resource_slice("gpu-1", [gpu("g0")]), held,
             resource_claim("train"), pod("trainer", resourceClaims=claims("train"))]
    assert plan_for(plain).assignments == {"default/trainer": "gpu-1"}


def test_admin_access_outside_a_labelled_namespace_keeps_the_pod_waiting() -> None:
    docs = [namespace("default"), node("gpu-1", cpu="4"), device_class(), resource_slice("gpu-1", [gpu("g0")]),
            resource_claim("watch", admin_request()), pod("monitor", resourceClaims=claims("watch"))]
    plan = plan_for(docs)
    assert plan.assignments == {}
    assert "requires the `resource.kubernetes.io/admin-access: true` label" in " ".join(
        plan.unschedulable["default/monitor"])
    docs[0] = ADMIN_NS
    assert plan_for(docs).assignments == {"default/monitor": "gpu-1"}


def test_the_loop_writes_admin_access_into_the_result() -> None:
    api = FakeAPI()
    api.put("Namespace", ADMIN_NS)
    api.put("Node", api_node("gpu-1"))
    api.put("DeviceClass", device_class())
    api.put("ResourceSlice", resource_slice("gpu-1", [gpu("g0")]))
    api.put("ResourceClaim", resource_claim("watch", admin_request()))
    api.put("Pod", api_pod("monitor", resourceClaims=claims("watch")))
    s, loop = synced_loop(api)
    loop.cycle(loop.queue.next_batch(threading.Event(), idle=0.1)).result()
    (result,) = api.objects[("ResourceClaim", "default", "watch")]["status"]["allocation"]["devices"]["results"]
    assert result["adminAccess"] is True and api.binds == [("default/monitor", "gpu-1")]
    s.events.close()
