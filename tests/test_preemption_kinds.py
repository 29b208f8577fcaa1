"""Every constraint kind takes part in eviction (issue 26, point 1): per kind, a case where only evicting a
lower-priority pod clears that kind's rejection (it fails when the kind is not asked again on the trial's view: see
`test_each_case_needs_its_kinds_hook`), and one where eviction cannot help, told in upstream's words."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import kinds
from engine.model.ir import Rules
from engine.planning.planner import Options, plan_batch
from engine.policy.lower import lower
from engine.policy.sources import check_sources
from engine.reading.load import build_cluster
from preempting import SEARCH, preempted
from testkit.checker import check_in_order
from testkit.manifests import (
    budget,
    claim,
    csinode,
    device_class,
    gpu,
    mounts,
    node,
    pod,
    resource_claim,
    resource_slice,
    storage_class,
    volume,
)
from testkit.manifests import claims as dra_claims

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def plan_for(*docs, policy: str = ""):
    rules = lower(check_sources({"test.policy": policy})) if policy else Rules()
    cluster = build_cluster([(f"doc{i}", d) for i, d in enumerate(docs)], gangs=rules.gangs)
    plan = plan_batch(cluster, rules, Options(time_limit=2, workers=1, preemption=True))
    assert check_in_order(list(docs), plan.assignments, set(plan.preemptions), {v.pod for v in plan.evictions}) == []
    return plan


def victims(plan) -> set[str]:
    return {v.pod.split("/", 1)[1] for v in plan.evictions}


def anti(selector: dict, key: str = HOST) -> dict:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": selector}, "topologyKey": key}]}}


def spread(selector: dict, key: str = ZONE, skew: int = 1) -> list[dict]:
    return [{"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": {"matchLabels": selector}}]


def zones(*names: str) -> list[dict]:
    return [node(n, cpu="8", labels={ZONE: n.rstrip("0123456789")}) for n in names]


# --- each case: the running pods, the preemptor, the victim expected, the kind whose hook clears it ------------

CASES = {
    "resources": ("NodeResourcesFit", "low", lambda: [
        node("n1", cpu="2"), pod("low", cpu="2", node_name="n1", priority=0), pod("high", cpu="1", priority=100)]),
    "ports": ("NodePorts", "low", lambda: [
        node("n1", cpu="8"), pod("low", node_name="n1", priority=0, ports=[{"containerPort": 80, "hostPort": 8080}]),
        pod("high", priority=100, ports=[{"containerPort": 80, "hostPort": 8080}])]),
    "existing anti-affinity": ("InterPodAffinity", "low", lambda: [
        node("n1", cpu="8"), pod("low", node_name="n1", priority=0, affinity=anti({"app": "web"})),
        pod("high", priority=100, labels={"app": "web"})]),
    "own anti-affinity": ("InterPodAffinity", "low", lambda: [
        node("n1", cpu="8"), pod("low", node_name="n1", priority=0, labels={"app": "batch"}),
        pod("high", priority=100, affinity=anti({"app": "batch"}))]),
    "zone spread": ("PodTopologySpread", "a-low", lambda: [
        # zone a: 2 replicas (one of them low priority), zone b: 1 on a full node; maxSkew 1 keeps the pod out of a
        node("a1", cpu="8", labels={ZONE: "a"}), node("b1", cpu="1", labels={ZONE: "b"}),
        pod("a-low", node_name="a1", priority=0, labels={"app": "s"}),
        pod("a-top", node_name="a1", priority=2000, labels={"app": "s"}),
        pod("b-top", cpu="1", node_name="b1", priority=2000, labels={"app": "s"}),
        pod("high", priority=1000, labels={"app": "s"}, topologySpreadConstraints=spread({"app": "s"}))]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_only_evicting_the_lower_priority_pod_places_it(case: str) -> None:
    _, victim, docs = CASES[case]
    plan = plan_for(*docs())
    assert "default/high" in plan.assignments, plan.unschedulable
    assert victims(plan) == {victim}
    (eviction,) = plan.preemptions["default/high"].victims
    assert eviction.why and CASES[case][0] in eviction.why


def searched(docs: list[dict]):
    """The plan after preemption by the per-pod search alone (the batch model compiles every kind's rows, so it
    would make the room without the search asking any kind about its trials)."""
    return preempted(docs, SEARCH)


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_case_needs_its_kinds_hook(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The search makes the room by asking the kind about its trials, and not without: the kind, not something else,
    makes it."""
    name, victim, docs = CASES[case]
    assert victims(searched(docs())) == {victim}
    kind = kinds.BY_NAME[name]
    monkeypatch.setattr(kinds, "READ_PODS", tuple(k for k in kinds.READ_PODS if k is not kind))
    plan = searched(docs())
    assert "default/high" not in plan.assignments or not plan.evictions


def test_a_policy_limit_is_a_kind_like_any_other() -> None:
    policy = 'policy one-db {\n  applies to pods where label "app" == "db"\n  at most 1 per node of pods with same label "app"\n}\n'
    docs = [node("n1", cpu="8"), pod("low", node_name="n1", priority=0, labels={"app": "db"}),
            pod("high", priority=100, labels={"app": "db"})]
    plan = plan_for(*docs, policy=policy)
    assert plan.assignments == {"default/high": "n1"} and victims(plan) == {"low"}


def test_a_read_write_once_pod_claim_is_freed_by_evicting_its_user() -> None:
    docs = [node("n1", cpu="8"), volume("pv", claim_ref=("default", "solo"), modes=("ReadWriteOncePod",)),
            claim("solo", modes=("ReadWriteOncePod",), volume="pv"),
            pod("low", node_name="n1", priority=0, volumes=mounts("solo")),
            pod("high", priority=100, volumes=mounts("solo"))]
    plan = plan_for(*docs)
    assert plan.assignments == {"default/high": "n1"} and victims(plan) == {"low"}


def test_an_attach_limit_is_freed_by_evicting_the_pod_using_the_volume() -> None:
    ebs = "ebs.csi.aws.com"
    docs = [node("n1", cpu="8"), csinode("n1", {ebs: 1}), storage_class("ebs", provisioner=ebs),
            volume("held", storage_class="ebs", claim_ref=("default", "held"), csi=(ebs, "vol-1")),
            claim("held", storage_class="ebs", volume="held"), pod("low", node_name="n1", priority=0, volumes=mounts("held")),
            volume("mine", storage_class="ebs", claim_ref=("default", "mine"), csi=(ebs, "vol-2")),
            claim("mine", storage_class="ebs", volume="mine"), pod("high", priority=100, volumes=mounts("mine"))]
    plan = plan_for(*docs)
    assert plan.assignments == {"default/high": "n1"} and victims(plan) == {"low"}
    assert "NodeVolumeLimits" in (plan.preemptions["default/high"].victims[0].why or "")


# --- eviction cannot help ---------------------------------------------------------------------------------------

def test_an_equal_priority_blocker_is_no_victim_and_the_pod_is_told_which_kind() -> None:
    docs = [node("n1", cpu="8"), pod("peer", node_name="n1", priority=100, affinity=anti({"app": "web"})),
            pod("low", node_name="n1", priority=0),
            pod("high", priority=100, labels={"app": "web"})]
    plan = plan_for(*docs)
    assert plan.assignments == {} and not plan.evictions
    said = " ".join(plan.unschedulable["default/high"])
    assert "No preemption victims found for incoming pod" in said
    assert "didn't satisfy existing pods anti-affinity rules (InterPodAffinity)" in said


def test_evicting_the_only_support_of_required_affinity_cannot_help() -> None:
    # the pod needs a pod of app=db beside it: the one there is its only support, evicting it helps nothing
    docs = [node("n1", cpu="2"), pod("db", cpu="2", node_name="n1", priority=0, labels={"app": "db"}),
            pod("high", cpu="1", priority=100, affinity={"podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": HOST}]}})]
    plan = plan_for(*docs)
    assert plan.assignments == {} and not plan.evictions
    said = " ".join(plan.unschedulable["default/high"])
    assert "1 Preemption is not helpful for scheduling" in said  # upstream: affinity unmet is unresolvable
    assert "didn't match pod affinity rules (InterPodAffinity)" in said


def test_spread_skew_made_by_a_higher_priority_replica_cannot_be_cleared() -> None:
    docs = [node("a1", cpu="8", labels={ZONE: "a"}), node("b1", cpu="2", labels={ZONE: "b"}),
            pod("a-mid", node_name="a1", priority=500, labels={"app": "s"}),
            pod("a-mid2", node_name="a1", priority=500, labels={"app": "s"}),
            pod("b-big", cpu="1900m", node_name="b1", priority=2000),
            pod("b-low", node_name="b1", priority=0, labels={"app": "s"}),
            pod("high", cpu="1", priority=100, labels={"app": "s"}, topologySpreadConstraints=spread({"app": "s"}))]
    plan = plan_for(*docs)
    assert plan.assignments == {} and not plan.evictions  # b-low frees too little on b1, and is not on a1
    said = " ".join(plan.unschedulable["default/high"])
    assert "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod" in said
    assert "1 node(s) didn't match pod topology spread constraints (PodTopologySpread)" in said
    assert "1 Insufficient cpu (NodeResourcesFit)" in said


def test_a_device_a_lower_priority_pod_holds_is_not_freed_in_the_same_cycle() -> None:
    """As upstream's DynamicResources (no PreFilterExtensions): a victim's claim stays allocated until the resourceclaim
    controller deallocates it after the pod is gone, so evicting it frees no device now: nothing is evicted."""
    held = resource_claim("held", allocated=[("gpu-1", "g0")], node="gpu-1")
    docs = [node("gpu-1", cpu="8"), resource_slice("gpu-1", [gpu("g0")]), device_class(), held,
            pod("low", node_name="gpu-1", priority=0, resourceClaims=dra_claims("held")),
            resource_claim("want"), pod("high", priority=100, resourceClaims=dra_claims("want"))]
    plan = plan_for(*docs)
    assert plan.assignments == {} and not plan.evictions
    said = " ".join(plan.unschedulable["default/high"])
    assert "No preemption victims found" in said
    assert "cannot allocate all claims (request gpu: every device it selects on the node is in use by other claims) " \
           "(DynamicResources)" in said


def test_a_victim_that_would_break_a_placed_preemptors_spread_is_kept_out() -> None:
    """Given back only if every kind still passes the preemptors beside it: the anti-affinity victim stays evicted."""
    docs = [node("n1", cpu="8"), pod("low", node_name="n1", priority=0, affinity=anti({"app": "web"})),
            pod("high", priority=100, labels={"app": "web"}), pod("high2", priority=100, labels={"app": "web"})]
    plan = plan_for(*docs)
    assert set(plan.assignments) == {"default/high", "default/high2"} and victims(plan) == {"low"}


# --- property: with every kind in play, each plan with evictions holds once the victims are gone ------------------

@st.composite
def crowded_clusters(draw) -> list[dict]:
    """Zoned nodes with running pods carrying anti-affinity, host ports and spread, and preemptors with the same."""
    docs: list[dict] = []
    nodes = draw(st.integers(1, 4))
    apps = ["web", "db", "batch"]

    def rules(prefix: str) -> dict:
        extra: dict = {}
        if draw(st.integers(0, 2)) == 0:
            extra["affinity"] = anti({"app": draw(st.sampled_from(apps))}, draw(st.sampled_from([HOST, ZONE])))
        if draw(st.integers(0, 3)) == 0:
            extra["ports"] = [{"containerPort": 80, "hostPort": 8080}]
        if prefix == "p" and draw(st.integers(0, 2)) == 0:
            extra["topologySpreadConstraints"] = spread({"app": draw(st.sampled_from(apps))},
                                                        draw(st.sampled_from([HOST, ZONE])))
        return extra

    for i in range(nodes):
        docs.append(node(f"n{i}", cpu=str(draw(st.integers(2, 4))), pods=10, labels={ZONE: f"z{i % 2}"}))
        for j in range(draw(st.integers(0, 3))):
            docs.append(pod(f"r{i}-{j}", cpu=str(draw(st.integers(1, 2))), node_name=f"n{i}",
                            priority=draw(st.sampled_from([0, 10, 500])),
                            labels={"app": draw(st.sampled_from(apps))}, **rules("r")))
    for k in range(draw(st.integers(1, 4))):
        docs.append(pod(f"p{k}", cpu=str(draw(st.integers(1, 2))), priority=draw(st.sampled_from([20, 100])),
                        labels={"app": draw(st.sampled_from(apps))}, **rules("p")))
    if draw(st.booleans()):
        docs.append(budget("web", {"app": "web"}, allowed=draw(st.integers(0, 1))))
    return docs


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(crowded_clusters())
def test_every_plan_with_evictions_holds_for_every_kind(docs) -> None:
    plan = plan_for(*docs)  # plan_for checks the plan in the order things happen (testkit.checker.check_in_order)
    pods = {f"{d['metadata']['namespace']}/{d['metadata']['name']}": d for d in docs if d["kind"] == "Pod"}
    local = ("NodeResourcesFit", "NodePorts", "NodeVolumeLimits", "Reservations")  # kinds reading their node alone
    for preemptor, p in plan.preemptions.items():
        for v in p.victims:  # on its preemptor's node, unless a domain-wide kind (spread, affinity) needs it gone
            assert v.why and (pods[v.pod]["spec"]["nodeName"] == p.node or not v.why.startswith(local))
            assert pods[v.pod]["spec"].get("priority", 0) < pods[preemptor]["spec"]["priority"]
