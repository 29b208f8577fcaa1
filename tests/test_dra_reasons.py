"""What a pod waiting for devices is told (issue 47, point 3): a missing DeviceClass in upstream's PreFilter words; on
each node, whether the node lacks the devices, the request's selectors exclude them, they lack the capacity asked,
carry a taint it does not tolerate, or are in use by other claims (upstream's allocator says only "cannot allocate
all claims"); a claim not created yet or missing said without node counts, as upstream's FitError says a PreFilter's
rejection; a snapshot without the DRA kinds its pods need gets a note naming them."""
from __future__ import annotations

from engine.model.ir import Rules
from engine.planning.planner import Options, TimeInputs, plan_batch
from engine.reading.load import build_cluster
from testkit.manifests import (
    claim,
    claim_template,
    claims,
    device_class,
    device_request,
    gpu,
    in_group,
    mounts,
    native_group,
    node,
    pod,
    podgroup,
    resource_claim,
    resource_slice,
)

H100 = 'device.attributes["gpu.example.com"].model == "h100"'
NOT_CREATED = 'pod "default/p": ResourceClaim not created yet'


def plan_for(docs: list[dict]):
    cluster = build_cluster([(f"doc{i}", d) for i, d in enumerate(docs)])
    return plan_batch(cluster, Rules(), Options(time_limit=3, workers=1))


def said(plan, name: str = "p") -> str:
    return plan.unschedulable[f"default/{name}"][0]


def running_with(name: str, claim_name: str, node_name: str) -> dict:
    """A running pod holding an allocated claim (its device in use)."""
    return pod(name, node_name=node_name, resourceClaims=claims(claim_name))


def test_a_missing_device_class_is_said_as_upstreams_prefilter_says_it() -> None:
    docs = [node("n1"), node("n2"), device_class(), resource_slice("n1", [gpu("g0")]),
            resource_claim("c", device_request(device_class_name="gpus")), pod("p", resourceClaims=claims("c"))]
    assert said(plan_for(docs)) == "0/2 nodes are available: request gpu: device class gpus does not exist."


def test_a_missing_device_class_of_a_first_available_alternative_names_the_subrequest() -> None:
    wanted = {"name": "gpu", "firstAvailable": [{"name": "big", "deviceClassName": "gpu", "selectors": [
        {"cel": {"expression": H100}}]}, {"name": "any", "deviceClassName": "gpu-any"}]}
    docs = [node("n1"), device_class(), resource_slice("n1", [gpu("g0")]), resource_claim("c", wanted),
            pod("p", resourceClaims=claims("c"))]
    assert said(plan_for(docs)) == "0/1 nodes are available: request gpu/any: device class gpu-any does not exist."


def test_nodes_without_devices_selectors_that_exclude_and_devices_in_use_are_told_apart() -> None:
    """One node without a GPU, one whose only GPU the request's selector excludes, one whose h100 a running pod holds:
    three reasons, one node each, instead of three times "cannot allocate all claims"."""
    docs = [node("cpu-1"), node("gpu-a"), node("gpu-h"), device_class(),
            resource_slice("gpu-a", [gpu("g0", model="a100")]), resource_slice("gpu-h", [gpu("g0", model="h100")]),
            resource_claim("held", allocated=[("gpu-h", "g0")], node="gpu-h"), running_with("r", "held", "gpu-h"),
            resource_claim("c", device_request(selectors=(H100,))), pod("p", resourceClaims=claims("c"))]
    line = said(plan_for(docs))
    assert line.startswith("0/3 nodes are available: ")
    assert "1 cannot allocate all claims (request gpu: the node has no device of device class gpu)" in line
    assert "1 cannot allocate all claims (request gpu: its selectors exclude every device of device class gpu " \
           "on the node)" in line
    assert "1 cannot allocate all claims (request gpu: every device it selects on the node is in use by other " \
           "claims)" in line


def test_a_class_whose_selectors_exclude_the_nodes_devices_is_no_device_of_that_class() -> None:
    docs = [node("n1"), device_class("nic", "nic.example.com"), device_class(),
            resource_slice("n1", [gpu("g0")]), resource_claim("c", device_request(device_class_name="nic")),
            pod("p", resourceClaims=claims("c"))]
    assert said(plan_for(docs)) == ("0/1 nodes are available: 1 cannot allocate all claims (request gpu: the node has "
                                    "no device of device class nic).")


def test_too_few_free_devices_for_a_count_says_the_others_are_in_use() -> None:
    docs = [node("n1"), device_class(), resource_slice("n1", [gpu("g0"), gpu("g1")]),
            resource_claim("held", allocated=[("n1", "g0")], node="n1"), running_with("r", "held", "n1"),
            resource_claim("c", device_request(count=2)), pod("p", resourceClaims=claims("c"))]
    assert said(plan_for(docs)) == ("0/1 nodes are available: 1 cannot allocate all claims (request gpu (2 devices): "
                                    "too few devices it selects on the node are free, the others are in use by "
                                    "other claims).")


def test_a_count_larger_than_the_node_has_is_too_few_devices_not_devices_in_use() -> None:
    docs = [node("n1"), device_class(), resource_slice("n1", [gpu("g0")]),
            resource_claim("c", device_request(count=2)), pod("p", resourceClaims=claims("c"))]
    assert said(plan_for(docs)) == ("0/1 nodes are available: 1 cannot allocate all claims (request gpu (2 devices): "
                                    "the node has too few devices of device class gpu).")


def test_a_taint_the_request_does_not_tolerate_is_said() -> None:
    tainted = gpu("g0")
    tainted["taints"] = [{"key": "gpu.example.com/unhealthy", "value": "ecc", "effect": "NoSchedule"}]
    docs = [node("n1"), device_class(), resource_slice("n1", [tainted]), resource_claim("c"),
            pod("p", resourceClaims=claims("c"))]
    assert said(plan_for(docs)) == ("0/1 nodes are available: 1 cannot allocate all claims (request gpu: every "
                                    "device it selects on the node has a taint it does not tolerate).")


def test_a_capacity_no_device_has_is_said() -> None:
    asked = device_request()
    asked["exactly"]["capacity"] = {"requests": {"memory": "80Gi"}}
    docs = [node("n1"), device_class(), resource_slice("n1", [gpu("g0", memory="40Gi")]), resource_claim("c", asked),
            pod("p", resourceClaims=claims("c"))]
    assert said(plan_for(docs)) == ("0/1 nodes are available: 1 cannot allocate all claims (request gpu: no device "
                                    "it selects on the node has the capacity it asks for).")


def test_an_incomplete_pool_is_said_in_upstreams_words() -> None:
    docs = [node("n1"), device_class(), resource_slice("n1", [gpu("g0")], slices=2), resource_claim("c"),
            pod("p", resourceClaims=claims("c"))]
    assert said(plan_for(docs)) == "0/1 nodes are available: 1 invalid resource pools were encountered."


def test_requests_that_fit_alone_but_not_together_keep_upstreams_plain_words() -> None:
    docs = [node("n1"), device_class(), resource_slice("n1", [gpu("g0")]),
            resource_claim("c", device_request("a"), device_request("b")), pod("p", resourceClaims=claims("c"))]
    assert said(plan_for(docs)) == "0/1 nodes are available: 1 cannot allocate all claims."


def test_pods_of_one_template_share_words_that_name_no_claim() -> None:
    """Each pod has its own claim; their class's reason names the request, never the sample pod's claim."""
    docs = [node("n1"), device_class(), resource_slice("n1", [gpu("g0", model="a100")]),
            *(resource_claim(f"c{i}", device_request(selectors=(H100,))) for i in range(2)),
            *(pod(f"p{i}", resourceClaims=claims(f"c{i}")) for i in range(2))]
    plan = plan_for(docs)
    assert said(plan, "p0") == said(plan, "p1")
    assert "c0" not in said(plan, "p0") and "selectors exclude" in said(plan, "p0")


def _from_template(name: str, **spec) -> dict:
    """A pod whose claim comes from template t and is not created yet (no status.resourceClaimStatuses)."""
    waiting = pod(name, **spec)
    waiting["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "t"}]
    return waiting


def test_a_claim_not_created_yet_is_said_without_a_node_count() -> None:
    """Upstream's FitError after a PreFilter rejection: "0/3 nodes are available: <reason>.", not "3 <reason>"."""
    waiting = _from_template("p")
    docs = [node("n1"), node("n2"), node("n3"), device_class(), resource_slice("n1", [gpu("g0")]), claim_template("t"),
            waiting]
    line = said(plan_for(docs))
    assert line.startswith(f"0/3 nodes are available: {NOT_CREATED}")
    assert "3 pod" not in line


def test_a_missing_claim_and_a_missing_volume_claim_are_said_without_a_node_count() -> None:
    docs = [node("n1"), node("n2"), device_class(), resource_slice("n1", [gpu("g0")]), resource_claim("other"),
            pod("p", resourceClaims=claims("c")), pod("v", volumes=mounts("data"))]
    plan = plan_for(docs)
    assert said(plan) == '0/2 nodes are available: resourceclaim.resource.k8s.io "c" not found.'
    assert said(plan, "v") == '0/2 nodes are available: persistentvolumeclaim "data" not found.'


def test_a_gang_whose_member_waits_for_its_claim_says_so_not_only_that_too_few_fit() -> None:
    """A native gang of two, one member's claim not created yet from its template: the other is told that member
    cannot go on any node yet and why, not merely "only 1 fit, even alone" (the nodes have room)."""
    waiting = _from_template("b", schedulingGroup=in_group("g"))
    docs = [node("n1"), node("n2"), device_class(), resource_slice("n1", [gpu("g0")]), claim_template("t"),
            native_group("g", 2), pod("a", schedulingGroup=in_group("g")), waiting]
    plan = plan_for(docs)
    assert plan.unschedulable["default/a"][1] == (
        "gang default/g could not be completed: needs 2 (minCount 2); only 1 fit, even alone, and 1 member(s) cannot "
        "go on any node yet (default/b: pod \"default/b\": ResourceClaim not created yet (spec.resourceClaims 'gpu' "
        "from a template))")


def test_a_coscheduling_gang_whose_member_misses_its_claim_says_so() -> None:
    label = {"scheduling.x-k8s.io/pod-group": "g"}
    docs = [node("n1"), device_class(), resource_slice("n1", [gpu("g0")]), resource_claim("other"), podgroup("g", 2),
            pod("a", labels=label), pod("b", labels=label, resourceClaims=claims("gone"))]
    assert plan_for(docs).unschedulable["default/a"][1].endswith(
        '1 member(s) cannot go on any node yet (default/b: resourceclaim.resource.k8s.io "gone" not found)')


# --- a snapshot without the DRA kinds its pods need -----------------------------------------------------------

def notes_of(docs: list[dict]) -> list[str]:
    return build_cluster([(f"doc{i}", d) for i, d in enumerate(docs)]).notes


def test_a_snapshot_without_dra_objects_says_which_kinds_to_add() -> None:
    (note,) = [n for n in notes_of([node("n1"), pod("p", resourceClaims=claims("c"))]) if "ResourceClaims" in n]
    assert note == ("1 pending pod(s) use ResourceClaims but the snapshot has no ResourceClaims, ResourceSlices or "
                    "DeviceClasses, so they wait (include them: kubectl get resourceclaims,resourceslices,deviceclasses "
                    "-A -o yaml)")


def test_a_snapshot_with_claims_but_no_devices_names_only_the_kinds_it_lacks() -> None:
    notes = notes_of([node("n1"), resource_claim("c"), pod("p", resourceClaims=claims("c"))])
    assert any("has no ResourceSlices or DeviceClasses, so they wait (include them: kubectl get "
               "resourceslices,deviceclasses -A -o yaml)" in n for n in notes)


def test_no_note_when_the_claims_are_allocated_or_not_created_yet() -> None:
    """An allocated claim needs no devices to be placed, and a claim from a template waits for its controller."""
    waiting = _from_template("w")
    docs = [node("n1"), resource_claim("c", allocated=[("n1", "g0")], node="n1"),
            pod("p", resourceClaims=claims("c")), waiting]
    assert not any("ResourceClaims" in n for n in notes_of(docs))


def test_a_pod_mounting_volumes_only_gets_no_dra_note() -> None:
    docs = [node("n1"), claim("data"), pod("p", volumes=mounts("data"))]
    assert not any("ResourceClaims" in n for n in notes_of(docs))


def test_a_pod_waiting_for_an_object_or_refused_for_an_error_is_not_told_it_does_not_fit_with_time() -> None:
    """With time in the plan, a pod refused before any node (a missing DeviceClass, a claim not created yet) or for an
    error about an object it needs (a selector failing at run time) is told that alone: no running pod's end helps
    it, so it gets no estimate saying it does not fit once running pods have ended."""
    docs = [node("n1"), device_class(), resource_slice("n1", [gpu("g0")]),
            resource_claim("c", device_request(device_class_name="gpus")), pod("p", resourceClaims=claims("c")),
            resource_claim("e", device_request(selectors=('device.attributes["gpu.example.com"].nosuchattr == "x"',))),
            pod("q", resourceClaims=claims("e")),
            pod("r", resourceClaims=[{"name": "t", "resourceClaimTemplateName": "t"}]),
            claim_template("t", device_request()),
            pod("running", cpu="1", node_name="n1", activeDeadlineSeconds=600)]  # a bound: time is in the plan
    docs[-1]["status"]["startTime"] = "2027-01-15T07:55:00Z"
    cluster = build_cluster([(f"doc{i}", d) for i, d in enumerate(docs)])
    plan = plan_batch(cluster, Rules(), Options(time_limit=3, workers=1), time_inputs=TimeInputs(1_800_000_000.0))
    for name in ("p", "q", "r"):
        reasons = plan.unschedulable[f"default/{name}"]
        assert not any("does not fit" in r for r in reasons), (name, reasons)
        assert f"default/{name}" not in plan.estimates or plan.estimates[f"default/{name}"].start is None
    assert len(plan.unschedulable["default/q"]) == 1 and "nosuchattr" in plan.unschedulable["default/q"][0]  # alone
    assert all("not for running pods to end" in plan.unschedulable[f"default/{name}"][-1] for name in ("p", "r"))
