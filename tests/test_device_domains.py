"""A DRA device attribute as a gang's domain (issue 49, point 2): `gang … within device attribute "gpu.example.com/clique"`
keeps every member's devices of the drivers publishing the attribute in one value of it (an NVLink clique across
nodes), all or nothing; a device without the attribute is in no clique; devices of other drivers are not held; bound
members' devices fix the clique; the claims' selectors and counters hold inside it. Every plan is checked by the
independent checker, and the devices Reserve allocates by testkit.devices.device_domain_violations."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.planning.planner import Options, plan_batch
from engine.policy.lower import lower
from engine.policy.parse import PolicyError
from engine.policy.sources import check_sources
from engine.reading.load import build_cluster
from testkit.checker import check_plan
from testkit.devices import device_domain_violations
from testkit.manifests import (
    claims,
    counter_slice,
    device_class,
    device_request,
    gpu,
    in_group,
    native_group,
    node,
    partition,
    pod,
    podgroup,
    resource_claim,
    resource_slice,
)

POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
CLIQUE = "gpu.example.com/clique"
GANG = f'policy jobs {{\n  applies to pods where label "job" exists\n  gang by label "job" min {{n}} within device attribute "{CLIQUE}"\n}}\n'
PLAIN = 'policy jobs {\n  applies to pods where label "job" exists\n  gang by label "job" min {n}\n}\n'


def gpus(node_name: str, *cliques: str | None, driver: str = "gpu.example.com", model: str = "a100") -> dict:
    """A ResourceSlice of one GPU per entry on `node_name`, each in that clique (None: no clique attribute)."""
    devices = [gpu(f"gpu-{i}", model=model, **({"clique": c} if c is not None else {})) for i, c in enumerate(cliques)]
    return resource_slice(node_name, devices, driver=driver)


def members(n: int, gpus_each: int = 2, job: str = "train", **request) -> list[dict]:
    """`n` pending pods of gang `job`, each with a claim of its own for `gpus_each` GPUs."""
    return [doc for i in range(n) for doc in (
        resource_claim(f"{job}-{i}", device_request(count=gpus_each, **request)),
        pod(f"{job}-{i}", labels={"job": job}, resourceClaims=claims(f"{job}-{i}")))]


def plan_for(docs: list[dict], policy: str = GANG, n: int = 2):
    rules = lower(check_sources({"jobs.policy": policy.replace("{n}", str(n))}))
    cluster = build_cluster([(f"doc{i}", d) for i, d in enumerate(docs)], gangs=rules.gangs)
    plan = plan_batch(cluster, rules, Options(time_limit=3, workers=1))
    assert check_plan(docs, plan.assignments) == []
    return plan


def allocated(plan) -> dict[str, list[str]]:
    """Pod key -> the device keys Reserve allocated its claims."""
    return {key: [d for a in plan.details.reserved.get(key, {}).get("DynamicResources", {}).values() for _, d in a.devices]
            for key in plan.assignments}


def held(plan, docs: list[dict], bound: tuple[str, ...] = ()) -> list[str]:
    """The checker's verdict on the devices the gang's members were allocated (and its `bound` members hold)."""
    members = {k: ds for k, ds in allocated(plan).items() if k.startswith("default/train-")}
    return device_domain_violations(docs, members, CLIQUE, bound=[f"default/{p}" for p in bound])


def test_a_gang_that_fits_only_split_across_two_cliques_stays_out() -> None:
    """Two nodes with two free GPUs, one in each clique: two members of two GPUs fit only split, so neither starts
    (without the domain, both start)."""
    docs = [node("a1"), node("a2"), node("b1"), node("b2"), device_class(),
            gpus("a1", "A", "A"), gpus("a2", "A"), gpus("b1", "B", "B"), gpus("b2", "B"), *members(2)]
    plan = plan_for(docs)
    assert plan.assignments == {}
    assert all(f"in one value of device attribute {CLIQUE}" in " ".join(why) for why in plan.unschedulable.values())
    assert len(plan_for(docs, PLAIN).assignments) == 2


def test_a_gang_that_fits_in_one_clique_is_placed_there() -> None:
    docs = [node("a1"), node("a2"), node("b1"), node("b2"), node("b3"), device_class(),
            gpus("a1", "A", "A"), gpus("a2", "A"), gpus("b1", "B", "B"), gpus("b2", "B"), gpus("b3", "B", "B"),
            *members(2)]
    plan = plan_for(docs)
    assert sorted(plan.assignments.values()) == ["b1", "b3"]
    assert held(plan, docs) == []
    assert {d.split("/")[1] for ds in allocated(plan).values() for d in ds} == {"b1", "b3"}


def test_a_node_with_devices_of_two_cliques_serves_a_member_only_from_its_own() -> None:
    """mixed has two GPUs of A free and two of B: it belongs to clique A (most of its free devices, then the lowest
    value); a member there gets A's GPUs, never B's, and a member asking for four cannot mix them."""
    docs = [node("a1"), node("mixed"), device_class(), gpus("a1", "A", "A"), gpus("mixed", "B", "A", "B", "A"),
            *members(2)]
    plan = plan_for(docs)
    assert sorted(plan.assignments.values()) == ["a1", "mixed"]
    assert held(plan, docs) == []
    on_mixed = next(ds for k, ds in allocated(plan).items() if plan.assignments[k] == "mixed")
    assert sorted(on_mixed) == ["gpu.example.com/mixed/gpu-1", "gpu.example.com/mixed/gpu-3"]
    four = [node("mixed"), device_class(), gpus("mixed", "B", "A", "B", "A"), *members(1, gpus_each=4)]
    assert plan_for(four, n=1).assignments == {}
    assert len(plan_for(four, PLAIN, n=1).assignments) == 1
    alone = [node("mixed"), device_class(), gpus("mixed", "B", "A", "B", "A"), *members(2)]  # the batch model knows
    plan = plan_for(alone)  # B's GPUs serve no member: one fits there, not two
    assert plan.assignments == {}
    assert all(f"only 1 fit in one value of device attribute {CLIQUE}" in " ".join(why)
               for why in plan.unschedulable.values()), plan.unschedulable


def test_devices_without_the_attribute_are_in_no_clique_and_other_drivers_are_not_held() -> None:
    """GPUs of the clique's driver without the attribute (or with an empty value) serve no member; a NIC of a
    driver that never publishes it is taken beside the clique's GPUs as today."""
    docs = [node("bare"), node("empty"), device_class(), gpus("bare", None, None),
            resource_slice("empty", [gpu("gpu-0", clique=""), gpu("gpu-1", clique="")]), *members(1)]
    plan = plan_for(docs, n=1)
    assert plan.assignments == {}
    (why,) = plan.unschedulable.values()
    assert "no device on the node carries its gang's device attribute" in " ".join(why)
    assert len(plan_for(docs, PLAIN, n=1).assignments) == 1
    nic = [node("a1"), device_class(), device_class("nic", "nic.example.com"), gpus("a1", "A", "A"),
           resource_slice("a1", [gpu("eth-0", model="nic")], driver="nic.example.com"),
           resource_claim("train-0", device_request(count=2), device_request("nic", "nic")),
           pod("train-0", labels={"job": "train"}, resourceClaims=claims("train-0"))]
    plan = plan_for(nic, n=1)
    assert sorted(allocated(plan)["default/train-0"]) == [
        "gpu.example.com/a1/gpu-0", "gpu.example.com/a1/gpu-1", "nic.example.com/a1/eth-0"]
    assert held(plan, nic) == []


def test_a_bound_member_fixes_the_clique() -> None:
    """One member runs on a1 with a GPU of clique A; the two pending need two GPUs each: A has one such node left,
    B two, so the gang cannot grow (without the clique, it starts in B)."""
    bound = [resource_claim("train-x", allocated=[("a1", "gpu-0")], node="a1", reserved_for=["train-x"]),
             pod("train-x", labels={"job": "train"}, node_name="a1", resourceClaims=claims("train-x"))]
    docs = [node("a1"), node("a2"), node("b1"), node("b2"), device_class(),
            gpus("a1", "A", "A"), gpus("a2", "A", "A"), gpus("b1", "B", "B"), gpus("b2", "B", "B"), *bound,
            *members(2)]
    plan = plan_for(docs, n=3)
    assert plan.assignments == {}
    assert len(plan_for(docs, PLAIN, n=3).assignments) == 2
    roomy = [*docs, node("a3"), gpus("a3", "A", "A")]
    plan = plan_for(roomy, n=3)
    assert sorted(plan.assignments.values()) == ["a2", "a3"]
    assert held(plan, roomy, bound=("train-x",)) == []


def test_selectors_hold_inside_the_chosen_clique() -> None:
    """Clique A has two nodes of a100s, clique B two of h100s and one of a100s: members asking for h100s by selector
    go to B's h100 nodes."""
    h100 = 'device.attributes["gpu.example.com"].model == "h100"'
    docs = [node("a1"), node("a2"), node("b1"), node("b2"), node("b3"), device_class(),
            gpus("a1", "A", "A"), gpus("a2", "A", "A"), gpus("b1", "B", "B", model="h100"),
            gpus("b2", "B", "B", model="h100"), gpus("b3", "B", "B"), *members(2, selectors=(h100,))]
    plan = plan_for(docs)
    assert sorted(plan.assignments.values()) == ["b1", "b2"]
    assert held(plan, docs) == []


def test_counters_hold_inside_the_chosen_clique() -> None:
    """Partitionable GPUs: each node's 40Gi GPU offered whole or as two halves, all in clique A on p1 and p2, in B on
    p3: four members asking for a half each take p1's and p2's halves, never more than a counter holds, and a fifth
    member makes the gang too big for A (B's one GPU cannot take the rest)."""
    def parts(name: str, clique: str) -> list[dict]:
        return [counter_slice(name, {"gpu-0": {"memory": "40Gi"}}, node=name),
                resource_slice(name, [partition("whole", "gpu-0", "40Gi", clique=clique),
                                      partition("half-0", "gpu-0", "20Gi", clique=clique),
                                      partition("half-1", "gpu-0", "20Gi", clique=clique)], pool=name, slices=2)]
    half = 'device.capacity["gpu.example.com"].memory.compareTo(quantity("20Gi")) == 0'
    base = [node("p1"), node("p2"), node("p3"), device_class(), *parts("p1", "A"), *parts("p2", "A"), *parts("p3", "B")]
    docs = [*base, *members(4, gpus_each=1, selectors=(half,))]
    plan = plan_for(docs, n=4)
    assert sorted(plan.assignments.values()) == ["p1", "p1", "p2", "p2"]
    assert held(plan, docs) == []
    assert plan_for([*base, *members(5, gpus_each=1, selectors=(half,))], n=5).assignments == {}


@pytest.mark.parametrize("name,expected", [
    ("clique", "must include a domain"),
    ("Bad_Domain/clique", "must be a DNS subdomain"),
    ("gpu.example.com/clique-id", "must be a C identifier"),
])
def test_a_malformed_attribute_name_is_a_positioned_error(name: str, expected: str) -> None:
    text = f'policy jobs {{\n  applies to all pods\n  gang by label "job" min 2 within device attribute "{name}"\n}}\n'
    with pytest.raises(PolicyError) as raised:
        check_sources({"jobs.policy": text})
    (found,) = raised.value.diagnostics
    assert (found.file, found.line, found.column) == ("jobs.policy", 3, 53)  # the name's opening quote
    assert f"invalid device attribute {name!r}" in found.message and expected in found.message
    assert str(raised.value).startswith("jobs.policy:3:53: ")


@st.composite
def clique_clusters(draw) -> tuple[list[dict], int]:
    """Nodes of up to four GPUs, each in clique A or B, none (no attribute) or "" (an empty value), a node's devices
    in one clique or several; a gang of two or three members asking one or two GPUs each (some by model), beside a
    pod of no gang; a NIC of another driver on some nodes that some members ask for too."""
    docs: list[dict] = [device_class(), device_class("nic", "nic.example.com")]
    for i in range(draw(st.integers(1, 4))):
        docs.append(node(f"n{i}"))
        cliques = draw(st.lists(st.sampled_from(["A", "B", "A", "B", None, ""]), max_size=4))
        if cliques:
            docs.append(resource_slice(f"n{i}", [gpu(f"g{j}", model=draw(st.sampled_from(["a100", "h100"])),
                                                     **({"clique": c} if c is not None else {}))
                                                 for j, c in enumerate(cliques)]))
        if draw(st.booleans()):
            docs.append(resource_slice(f"n{i}", [gpu("eth-0", model="nic")], driver="nic.example.com"))
    n = draw(st.integers(2, 3))
    for k in range(n):
        model = draw(st.sampled_from([None, "a100", "h100"]))
        requests = [device_request(count=draw(st.integers(1, 2)), selectors=(
            f'device.attributes["gpu.example.com"].model == "{model}"',) if model else ())]
        if draw(st.integers(0, 3)) == 0:
            requests.append(device_request("nic", "nic"))
        docs += [resource_claim(f"train-{k}", *requests),
                 pod(f"train-{k}", labels={"job": "train"}, resourceClaims=claims(f"train-{k}"))]
    docs += [resource_claim("lone", device_request()), pod("lone", resourceClaims=claims("lone"))]
    return docs, n


@settings(max_examples=60, deadline=None)
@given(clique_clusters())
def test_every_plan_keeps_a_gang_s_devices_in_one_clique(case: tuple[list[dict], int]) -> None:
    """Whatever the cliques: the checker passes the plan, the gang starts whole or not at all, every GPU its members
    get carries one clique (never none, never an empty one), no device goes twice, and the batch model is exact
    (Reserve never takes out a member the solver placed)."""
    docs, n = case
    plan = plan_for(docs, n=n)
    members = [k for k in plan.assignments if k.startswith("default/train-")]
    assert len(members) in (0, n)
    assert held(plan, docs) == []
    devices = [d for ds in allocated(plan).values() for d in ds]
    assert len(devices) == len(set(devices))
    assert not any("served after all" in r or "went to other pods" in r
                   for rs in plan.unschedulable.values() for r in rs), plan.unschedulable


def test_a_podgroup_gang_takes_the_device_attribute_of_a_podgroup_policy() -> None:
    """`gang by podgroup within device attribute` adds the clique to the pod's own PodGroup gang (its minMember
    kept): split across cliques it stays out, as a label gang does."""
    policy = f'policy groups {{\n  applies to all pods\n  gang by podgroup within device attribute "{CLIQUE}"\n}}\n'
    group = [podgroup("pg", 2), *(doc for i in range(2) for doc in (
        resource_claim(f"m-{i}", device_request(count=2)),
        pod(f"m-{i}", labels={POD_GROUP_LABEL: "pg"}, resourceClaims=claims(f"m-{i}"))))]
    split = [node("a1"), node("b1"), device_class(), gpus("a1", "A", "A"), gpus("b1", "B", "B"), *group]
    cluster = build_cluster([(f"doc{i}", d) for i, d in enumerate(split)], gangs=lower(check_sources(
        {"groups.policy": policy})).gangs)
    assert cluster.gangs["default/pg"].device_within == CLIQUE and cluster.gangs["default/pg"].min_member == 2
    assert plan_for(split, policy).assignments == {}
    together = [*split, node("a2"), gpus("a2", "A", "A")]
    assert sorted(plan_for(together, policy).assignments.values()) == ["a1", "a2"]


def test_the_checker_refuses_devices_of_two_cliques_none_or_an_empty_one() -> None:
    """testkit.devices.device_domain_violations on hand-made allocations: devices of two cliques, one without the
    attribute or with an empty value are refused; a NIC of a driver that never publishes it is not judged; a bound
    member's allocated devices count."""
    docs = [gpus("a1", "A", "A", None), gpus("b1", "B"), resource_slice("e1", [gpu("gpu-0", clique="")]),
            resource_slice("a1", [gpu("eth-0", model="nic")], driver="nic.example.com"),
            resource_claim("x", allocated=[("a1", "gpu-0")], node="a1"),
            pod("x", labels={"job": "train"}, node_name="a1", resourceClaims=claims("x"))]
    one = {"default/p": ["gpu.example.com/a1/gpu-1", "nic.example.com/a1/eth-0"]}
    assert device_domain_violations(docs, one, CLIQUE, bound=["default/x"]) == []
    assert any("in 2 values" in v for v in device_domain_violations(
        docs, {"default/p": ["gpu.example.com/b1/gpu-0"]}, CLIQUE, bound=["default/x"]))
    assert any("carries no value" in v for v in device_domain_violations(
        docs, {"default/p": ["gpu.example.com/a1/gpu-2"]}, CLIQUE))
    assert any("carries no value" in v for v in device_domain_violations(
        docs, {"default/p": ["gpu.example.com/e1/gpu-0"]}, CLIQUE))


def test_a_topology_key_and_a_device_attribute_hold_together() -> None:
    """A scheduling.k8s.io group kept in one zone by its topology constraint, and in one clique by a policy: zone z1
    alone fits it (n1 and n3, cliques A and B), clique A alone too (n1 and n2, zones z1 and z2), both at once do
    not, so it stays out; with a second node of A in z1 it starts there."""
    zone = "topology.kubernetes.io/zone"
    policy = f'policy groups {{\n  applies to all pods\n  gang by podgroup within device attribute "{CLIQUE}"\n}}\n'
    group = [native_group("train", 2, topology=zone), *(doc for i in range(2) for doc in (
        resource_claim(f"m-{i}", device_request(count=2)),
        pod(f"m-{i}", labels={POD_GROUP_LABEL: "train"}, schedulingGroup=in_group("train"),
            resourceClaims=claims(f"m-{i}"))))]
    docs = [node("n1", labels={zone: "z1"}), node("n2", labels={zone: "z2"}), node("n3", labels={zone: "z1"}),
            device_class(), gpus("n1", "A", "A"), gpus("n2", "A", "A"), gpus("n3", "B", "B"), *group]
    assert plan_for(docs, policy).assignments == {}
    assert len(plan_for(docs, PLAIN).assignments) == 2  # the zone alone
    roomy = [*docs, node("n4", labels={zone: "z1"}), gpus("n4", "A", "A")]
    assert sorted(plan_for(roomy, policy).assignments.values()) == ["n1", "n4"]
