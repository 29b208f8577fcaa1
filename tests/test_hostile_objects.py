"""Nothing a user creates may stall scheduling (issue 25): plan_batch over a cluster with malformed-but-admitted
objects of every kind we read. For each generated cluster: planning raises for no pod (no `Plan.details.failures`: every
error about an object is a refusal that was foreseen where the object is read), every pending pod is in exactly
one of placed / unschedulable / skipped with at least one reason, every pod that depends on no bad object is
placed (there is room for all of them), and every pod that depends on a bad object and is not placed is told
something. `HOSTILE_EXAMPLES=2000 python -m pytest tests/test_hostile_objects.py` searches much harder."""
from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.planning.planner import Options, plan_batch
from engine.reading.load import build_cluster
from testkit.manifests import (
    GPU_DRIVER,
    claims,
    device_class,
    device_request,
    gpu,
    native_group,
    node,
    pod,
    podgroup,
    resource_claim,
    resource_slice,
)

EXAMPLES = int(os.environ.get("HOSTILE_EXAMPLES", "60"))
INT32 = 2**31 - 1
GANG_LABEL = "scheduling.x-k8s.io/pod-group"

ODD_QUANTITIES = ["0", "1e3", "0.001", "1m", "9Ei", "123456789012345678", "1.5Gi", "100Mi", "7E", "0.5", "1n"]
BIG_INTS = [0, 1, 2, 3, 64, 1000, 2**16, INT32, 2**53, 2**62]
HUGE_LIST = [f"v{i}" for i in range(3000)]
D = 'device.attributes["gpu.example.com"]'
CEL_FORMS = [  # each admitted by the apiserver unless said otherwise
    f'{D}.model == "a100"',
    f"{D}.?model.orValue('') == 'a100'",  # optional field selection: crashed every cycle containing its pod
    f"{D}.model.lowerAscii() == 'a100'",
    f"{D}.model.split('1')[0] == 'a'",
    f"{D}.model.matches('^a[0-9]+$') && {D}.?nope.hasValue() == false",
    'device.capacity["gpu.example.com"].memory.compareTo(quantity("10Gi")) >= 0',
    'device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("9Ei"))',
    f"{D}.nosuchattr == 'x'",  # runtime error: no such key
    f"{D}.model",  # not a bool: upstream refuses at admission; a snapshot may hold it
    "1 / 0 == 1",  # runtime error: division by zero
    "device.driver ==",  # does not parse (only a snapshot can hold it)
    f"{D}.model.sortBy(x, x) == 'a'",  # a macro this engine does not evaluate
    "[" + ",".join(str(i) for i in range(500)) + "].all(a, [" + ",".join(str(i) for i in range(500))
    + "].exists(b, a + b == 999999))",  # over the cost limit
    "true || " * 2000 + "true",  # over the length limit
]


def _selector(draw) -> dict[str, Any]:
    """A label selector the apiserver admits, sometimes pathological: thousands of values, many expressions."""
    size = draw(st.sampled_from([1, 2, 50, 3000]))
    expressions = [{"key": f"k{i}", "operator": draw(st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]))}
                   for i in range(draw(st.sampled_from([1, 3, 40])))]
    for e in expressions:
        if e["operator"] in ("In", "NotIn"):
            e["values"] = HUGE_LIST[:size]
    return {"matchExpressions": expressions}


@st.composite
def hostile_pod(draw, name: str) -> tuple[dict, list[dict]]:
    """A pod with one hostile trait, and the objects it names."""
    trait = draw(st.sampled_from(["affinity", "anti", "spread", "priority", "ports", "claim", "class", "gang",
                                  "native", "requests", "overhead", "tolerations"]))
    key = draw(st.sampled_from(["kubernetes.io/hostname", "topology.kubernetes.io/zone", "no/such-key"]))
    term = {"labelSelector": _selector(draw), "topologyKey": key}
    if trait == "affinity":
        return pod(name, affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}), []
    if trait == "anti":
        weight = {"weight": 100, "podAffinityTerm": term}
        return pod(name, affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term] * 3,
                                                       "preferredDuringSchedulingIgnoredDuringExecution": [weight] * 50}}), []
    if trait == "spread":
        spread = {"maxSkew": draw(st.sampled_from([1, INT32])), "topologyKey": key,
                  "whenUnsatisfiable": draw(st.sampled_from(["DoNotSchedule", "ScheduleAnyway"])),
                  "labelSelector": _selector(draw), "minDomains": draw(st.sampled_from([1, 5, INT32]))}
        if spread["whenUnsatisfiable"] == "ScheduleAnyway":
            del spread["minDomains"]
        return pod(name, topologySpreadConstraints=[spread] * draw(st.sampled_from([1, 8]))), []
    if trait == "priority":
        return pod(name, priority=draw(st.sampled_from([-INT32 - 1, INT32, 2_000_001_000]))), []
    if trait == "ports":
        return pod(name, ports=[{"containerPort": 1 + i, "hostPort": 65535 - i, "protocol": "UDP"}
                                for i in range(draw(st.sampled_from([1, 200])))]), []
    if trait == "requests":
        return pod(name, cpu=draw(st.sampled_from(ODD_QUANTITIES)),
                   requests={"example.com/widget": draw(st.sampled_from(["1", "9Ei", "123456789012345678"]))}), []
    if trait == "overhead":
        return pod(name, overhead={"cpu": draw(st.sampled_from(ODD_QUANTITIES))}), []
    if trait == "tolerations":
        return pod(name, tolerations=[{"operator": "Exists"}] * 100), []
    if trait == "gang":
        group = podgroup(f"g-{name}", draw(st.sampled_from(BIG_INTS[1:])))
        group["spec"]["minResources"] = {"cpu": draw(st.sampled_from(ODD_QUANTITIES))}
        return pod(name, labels={GANG_LABEL: f"g-{name}"}), [group]
    if trait == "native":
        group = native_group(f"n-{name}", draw(st.sampled_from(BIG_INTS[1:6])))
        return pod(name, schedulingGroup={"podGroupName": f"n-{name}"}), [group]
    count = draw(st.sampled_from([1, 2, 32, INT32]))
    expression = draw(st.sampled_from(CEL_FORMS))
    if trait == "class":
        cls = device_class(f"cls-{name}", GPU_DRIVER, expression)
        claim = resource_claim(f"c-{name}", device_request("gpu", f"cls-{name}", count))
        return pod(name, resourceClaims=claims(f"c-{name}")), [cls, claim]
    claim = resource_claim(f"c-{name}", device_request("gpu", "gpu", count, (expression,)))
    return pod(name, resourceClaims=claims(f"c-{name}")), [claim]


@st.composite
def hostile_cluster(draw) -> tuple[list[dict], set[str], set[str]]:
    """Nodes with room for every good pod, good plain pods, hostile pods and their objects, odd cluster-wide
    objects (a slice with huge capacities, quotas with odd quantities). Returns (docs, good pods, hostile pods)."""
    docs: list[dict] = [node(f"n{i}", cpu="16", memory="64Gi", labels={"topology.kubernetes.io/zone": f"z{i % 2}"})
                        for i in range(4)]
    docs += [device_class("gpu"),
             resource_slice("n0", [gpu(f"g{i}", memory=draw(st.sampled_from(ODD_QUANTITIES))) for i in range(4)])]
    good = {f"default/good-{i}" for i in range(6)}
    docs += [pod(f"good-{i}", cpu="100m") for i in range(6)]
    hostile = set()
    for i in range(draw(st.integers(1, 4))):
        manifest, extra = draw(hostile_pod(f"bad-{i}"))
        docs += [manifest, *extra]
        hostile.add(f"default/bad-{i}")
    if draw(st.booleans()):
        docs.append({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota",
                     "metadata": {"name": "odd", "namespace": "other"},
                     "spec": {"min": {"cpu": draw(st.sampled_from(ODD_QUANTITIES))},
                              "max": {"cpu": "9Ei", "memory": draw(st.sampled_from(ODD_QUANTITIES))}}})
    return docs, good, hostile


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(hostile_cluster())
def test_hostile_objects_never_fail_planning_and_refuse_only_their_own_pods(drawn) -> None:
    docs, good, hostile = drawn
    cluster = build_cluster([(f"doc{i}", d) for i, d in enumerate(docs)], strict=False)
    plan = plan_batch(cluster, options=Options(time_limit=2, workers=1))
    assert not plan.details.failures, [f.trace for f in plan.details.failures]
    pending = {p.key for p in cluster.pending}
    refused = {f"default/{r.ref.name}" for r in cluster.refused if r.ref is not None and r.ref.kind == "Pod"}
    placed, unschedulable, skipped = set(plan.assignments), set(plan.unschedulable), set(plan.skipped)
    assert not (placed & unschedulable) and not (placed & skipped) and not (unschedulable & skipped)
    assert pending <= placed | unschedulable
    assert good <= placed, {k: plan.unschedulable.get(k) or plan.skipped.get(k) for k in good - placed}
    for key in hostile - placed:
        said = plan.unschedulable.get(key) or ([plan.skipped[key]] if key in plan.skipped else [])
        assert said or key in refused, f"{key} is neither placed nor told why"
        assert all(reason.strip() for reason in said)


def test_a_malformed_pods_affinity_is_refused_not_raised_beside_pods_with_affinity() -> None:
    """The loop builds with strict=False: a pod whose spec.affinity.podAntiAffinity is `true` (or whose spec is a
    list) is refused, and the note about namespaceSelectors that reads every pod's terms must not raise on it."""
    from testkit.manifests import anti, term

    good = pod("good", affinity=anti(term({"app": "w"})))
    odd = pod("odd")
    odd["spec"]["affinity"] = {"podAntiAffinity": True}
    listed = pod("listed")
    listed["spec"] = [listed["spec"]]
    cluster = build_cluster([("t", node("n1")), ("t", good), ("t", odd), ("t", listed)], strict=False)
    assert [p.key for p in cluster.pending] == ["default/good"]
    assert {r.ref.name for r in cluster.refused if r.ref} == {"odd", "listed"}
