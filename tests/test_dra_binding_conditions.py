"""Device binding conditions (DRADeviceBindingConditions, beta and on in 1.36 and 1.37): a device that needs
preparing (attached over a fabric, say) names conditions its driver sets on the claim's status.devices. The
allocation copies them into its results (and `bindsToNode` pins it to the node), devices without conditions are
preferred, and PreBind waits, as upstream's does, until they are all true; a failure condition or the binding
timeout (upstream's 600 s; short here) fails the binding, which takes the claim back and requeues the pod."""
from __future__ import annotations

import threading

from engine.loop.devices import BINDING_TIMEOUT
from engine.model.ir import Rules
from engine.planning.planner import Options, plan_batch
from engine.reading.load import build_cluster
from loopfake import FakeAPI, synced_loop
from loopfake import node as api_node
from loopfake import pod as api_pod
from testkit.manifests import claims, device_class, gpu, node, pod, resource_claim, resource_slice


def fabric_gpu(name: str = "g0", binds_to_node: bool = False) -> dict:
    device = gpu(name)
    device["bindingConditions"] = ["dra.example.com/attached"]
    device["bindingFailureConditions"] = ["dra.example.com/failed"]
    if binds_to_node:
        device["bindsToNode"] = True
    return device


def test_the_allocation_carries_the_conditions_and_binds_to_the_node() -> None:
    docs = [node("n1"), node("n2"), device_class(), resource_slice(None, [fabric_gpu(binds_to_node=True)]),
            resource_claim("c"), pod("p", resourceClaims=claims("c"))]
    plan = plan_batch(build_cluster([(f"d{i}", d) for i, d in enumerate(docs)]), Rules(), Options(time_limit=2, workers=1))
    placed = plan.assignments["default/p"]
    (allocation,) = plan.details.reserved["default/p"]["DynamicResources"].values()
    assert allocation.binding == (("gpu.example.com/shared/g0", ("dra.example.com/attached",), ("dra.example.com/failed",)),)
    assert allocation.node_selector == {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": [placed]}]}]}


def test_a_device_without_binding_conditions_is_preferred() -> None:
    docs = [node("n1"), device_class(), resource_slice("n1", [fabric_gpu("g0"), gpu("g1")]), resource_claim("c"),
            pod("p", resourceClaims=claims("c"))]
    plan = plan_batch(build_cluster([(f"d{i}", d) for i, d in enumerate(docs)]), Rules(), Options(time_limit=2, workers=1))
    (allocation,) = plan.details.reserved["default/p"]["DynamicResources"].values()
    assert [d for _, d in allocation.devices] == ["gpu.example.com/n1/g1"] and allocation.binding == ()


def _world(timeout: float = 5.0):
    api = FakeAPI()
    api.put("Node", api_node("n1"))
    api.put("DeviceClass", device_class())
    api.put("ResourceSlice", resource_slice("n1", [fabric_gpu()]))
    api.put("ResourceClaim", resource_claim("c"))
    api.put("Pod", api_pod("p", resourceClaims=claims("c")))
    s, loop = synced_loop(api)
    s.binder.claims.binding_timeout, s.binder.claims.binding_poll = timeout, 0.05
    return api, s, loop


def _driver_sets(api: FakeAPI, s, condition: str, after: float = 0.3) -> threading.Timer:
    """The driver, `after` seconds on: the device's condition true in the claim's status.devices (as the watch
    would bring it to the store)."""
    def set_it() -> None:
        claim = api.objects[("ResourceClaim", "default", "c")]
        (result,) = claim["status"]["allocation"]["devices"]["results"]
        device = {k: result[k] for k in ("driver", "pool", "device")}
        claim["status"]["devices"] = [{**device, "conditions": [
            {"type": condition, "status": "True", "reason": "Tested", "message": "by the test",
             "lastTransitionTime": "2026-11-27T00:00:00Z"}]}]
        s.store.apply("ResourceClaim", "MODIFIED", api.put("ResourceClaim", claim))
    timer = threading.Timer(after, set_it)
    timer.start()
    return timer


def _cycle(loop) -> None:
    loop.cycle(loop.queue.next_batch(threading.Event(), idle=0.1)).result()


def test_prebind_waits_for_the_binding_conditions() -> None:
    api, s, loop = _world()
    timer = _driver_sets(api, s, "dra.example.com/attached")
    _cycle(loop)
    timer.join()
    assert api.binds == [("default/p", "n1")]
    s.events.close()  # the event outbox written out
    assert any(reason == "BindingConditionsPending" for _, _, reason, _ in api.events)
    assert BINDING_TIMEOUT == 600.0  # upstream's default


def test_a_failure_condition_fails_the_binding_and_takes_the_claim_back() -> None:
    api, s, loop = _world()
    timer = _driver_sets(api, s, "dra.example.com/failed")
    _cycle(loop)
    timer.join()
    assert api.binds == []
    claim = api.objects[("ResourceClaim", "default", "c")]
    assert not (claim.get("status") or {}).get("allocation") and not (claim.get("status") or {}).get("reservedFor")
    s.events.close()  # the event outbox written out
    assert any("device binding failed: claim=c, reason=Tested" in message for _, _, _, message in api.events)


def test_the_binding_timeout_fails_the_binding() -> None:
    api, s, loop = _world(timeout=0.3)
    _cycle(loop)
    assert api.binds == []
    assert not (api.objects[("ResourceClaim", "default", "c")].get("status") or {}).get("allocation")
    s.events.close()  # the event outbox written out
    assert any("device binding timeout: claim=c" in message for _, _, _, message in api.events)
