"""A claim's selectors meet only the devices of nodes its pod may use (issue 28, found by the e2e suite): upstream's
allocator runs on the nodes every earlier filter passed, so a selector that reads an attribute other teams' devices
lack is never evaluated on those devices; on a device a usable node reaches, the same failure refuses the pod with
upstream's words, an error, as before."""
from __future__ import annotations

from engine.model.ir import Rules
from engine.planning.planner import Options, plan_batch
from engine.reading.load import build_cluster
from testkit.manifests import claims, device_class, device_request, gpu, node, pod, resource_claim, resource_slice

D = 'device.attributes["gpu.example.com"]'
READS_MODEL = f'{D}.model == "a100"'


def bare(name: str) -> dict:
    """A device without the `model` attribute (another driver version's, say)."""
    device = gpu(name)
    del device["attributes"]["model"]
    return device


def plan_for(*docs: dict):
    return plan_batch(build_cluster([(f"d{i}", d) for i, d in enumerate(docs)]), Rules(),
                      Options(time_limit=2, workers=1))


def test_a_selector_is_not_met_on_devices_of_nodes_the_pod_cannot_use() -> None:
    docs = [node("ours", labels={"team": "a"}), node("theirs", labels={"team": "b"}), device_class(),
            resource_slice("ours", [gpu("g0")]), resource_slice("theirs", [bare("g1")]),
            resource_claim("c", device_request(selectors=(READS_MODEL,))),
            pod("p", nodeSelector={"team": "a"}, resourceClaims=claims("c"))]
    plan = plan_for(*docs)
    assert plan.assignments == {"default/p": "ours"}  # "theirs" fails the node selector first
    assert not plan.details.errors


def test_a_selector_failing_on_a_device_a_usable_node_reaches_refuses_the_pod_with_the_error() -> None:
    docs = [node("ours", labels={"team": "a"}), device_class(), resource_slice("ours", [bare("g1"), gpu("g0")]),
            resource_claim("c", device_request(selectors=(READS_MODEL,))),
            pod("p", nodeSelector={"team": "a"}, resourceClaims=claims("c"))]
    plan = plan_for(*docs)
    assert plan.assignments == {}
    assert plan.details.errors == {"default/p"}
    assert plan.unschedulable["default/p"] == ["claim default/c: selector #0: CEL runtime error: no such key: model"]
