"""System-default spreading as upstream's PodTopologySpread defaults (hostname maxSkew 3, zone maxSkew 5,
ScheduleAnyway) for pods a Service, ReplicaSet, StatefulSet or ReplicationController selects: each test places
pods that would pile onto one node or zone without it, and batch pods that must keep packing."""
from __future__ import annotations

from collections import Counter

from engine.model.ir import Rules
from engine.planning.planner import Options, plan_batch
from engine.policy.lower import lower
from engine.policy.sources import check_sources
from engine.reading.load import build_cluster
from testkit.checker import check_plan
from testkit.manifests import (
    ZONE_KEY,
    node,
    owned,
    pod,
    podgroup,
    replica_set,
    service,
    spread,
    stateful_set,
)

WEB = {"app": "web"}


def plan_for(docs: list[dict], policy: str = "", time_limit: float = 5, preference_limit: float | None = None):
    rules = lower(check_sources({"test.policy": policy})) if policy else Rules()
    cluster = build_cluster([(f"doc{i}", d) for i, d in enumerate(docs)], gangs=rules.gangs)
    plan = plan_batch(cluster, rules, Options(time_limit=time_limit, workers=1, preference_limit=preference_limit))
    assert check_plan(docs, plan.assignments) == []
    return plan


def empty_nodes(count: int = 4, zones: int = 1, cpu: str = "8") -> list[dict]:
    return [node(f"n{i}", cpu=cpu, labels={ZONE_KEY: f"z{i % zones}"}) for i in range(count)]


def replicas(count: int, owner: tuple[str, str] | None = ("ReplicaSet", "web-1"), labels: dict = WEB,
             prefix: str = "web") -> list[dict]:
    pods = [pod(f"{prefix}-{i}", cpu="100m", labels=labels) for i in range(count)]
    return [owned(p, *owner) for p in pods] if owner else pods


def per_node(plan) -> list[int]:
    return sorted(Counter(plan.assignments.values()).values(), reverse=True)


def per_zone(plan, zones: int) -> list[int]:
    counts = Counter(f"z{int(n[1:]) % zones}" for n in plan.assignments.values())
    return sorted(counts.values(), reverse=True)


def test_a_deployments_replicas_spread_over_empty_nodes_as_kube_scheduler_does() -> None:
    plan = plan_for(empty_nodes(4) + [replica_set("web-1", WEB, 8)] + replicas(8))
    assert per_node(plan) == [2, 2, 2, 2]


def test_bare_pods_keep_packing() -> None:
    plan = plan_for(empty_nodes(4) + replicas(8, owner=None))
    assert per_node(plan) == [8]


def test_a_service_alone_selects_pods_for_spreading() -> None:
    plan = plan_for(empty_nodes(4) + [service("web", WEB)] + replicas(8, owner=None))
    assert per_node(plan) == [2, 2, 2, 2]


def test_replicas_spread_over_zones() -> None:
    plan = plan_for(empty_nodes(6, zones=3) + [replica_set("web-1", WEB, 6)] + replicas(6))
    assert per_zone(plan, 3) == [2, 2, 2]


def test_running_replicas_count_so_new_ones_go_to_the_emptier_zone() -> None:
    running = [owned(pod(f"old-{i}", labels=WEB, node_name="n0"), "ReplicaSet", "web-1") for i in range(4)]
    plan = plan_for(empty_nodes(4, zones=2) + [replica_set("web-1", WEB, 8)] + running + replicas(4))
    assert all(int(n[1:]) % 2 == 1 for n in plan.assignments.values())  # all in z1, where none run yet


def test_stateful_set_pods_spread() -> None:
    pods = replicas(4, owner=("StatefulSet", "db"), labels={"app": "db"}, prefix="db")
    plan = plan_for(empty_nodes(4) + [stateful_set("db", {"app": "db"}, 4)] + pods)
    assert per_node(plan) == [1, 1, 1, 1]


def test_job_pods_keep_packing_even_under_a_headless_service() -> None:
    job = {"job-name": "train"}
    pods = replicas(8, owner=("Job", "train"), labels=job, prefix="train")
    for p in pods:
        p["metadata"]["ownerReferences"][0]["apiVersion"] = "batch/v1"
    plan = plan_for(empty_nodes(4) + [service("train", job)] + pods)
    assert per_node(plan) == [8]


def test_gang_members_keep_packing() -> None:
    labels = {**WEB, "scheduling.x-k8s.io/pod-group": "g"}
    plan = plan_for(empty_nodes(4) + [replica_set("web-1", WEB, 8), podgroup("g", 8)] + replicas(8, labels=labels))
    assert per_node(plan) == [8]


def test_the_pods_own_spread_constraints_replace_the_defaults() -> None:
    pods = replicas(8)
    for p in pods:  # a zone spread only: on one zone it says nothing, and hostname spreading is gone with it
        p["spec"]["topologySpreadConstraints"] = [spread(WEB, hard=False)]
    plan = plan_for(empty_nodes(4) + [replica_set("web-1", WEB, 8)] + pods)
    assert per_node(plan) == [8]


def test_a_policy_turns_default_spreading_off() -> None:
    policy = 'policy pack {\n  applies to pods where label "app" == "web"\n  default spreading off\n}\n'
    plan = plan_for(empty_nodes(4) + [replica_set("web-1", WEB, 8)] + replicas(8), policy)
    assert per_node(plan) == [8]


def test_a_policy_replaces_default_spreading() -> None:
    # zone only, max skew 1: two zones take 4 each, and without the hostname default each zone's 4 share a node
    policy = 'policy zones {\n  applies to all pods\n  default spreading per zone max skew 1\n}\n'
    plan = plan_for(empty_nodes(4, zones=2) + [replica_set("web-1", WEB, 8)] + replicas(8), policy)
    assert per_zone(plan, 2) == [4, 4]
    assert per_node(plan) == [4, 4]


def test_the_reason_and_classes_name_the_default() -> None:
    cluster = build_cluster([(f"d{i}", d) for i, d in enumerate(empty_nodes(2) + [replica_set("web-1", WEB, 2)]
                                                                 + replicas(2))])
    assert {str(p.default_spread) for p in cluster.pending} == {"app In [web]"}


def test_a_missing_controller_is_a_note() -> None:
    plan = plan_for(empty_nodes(2) + replicas(2))
    assert any("ReplicaSets, StatefulSets or ReplicationControllers the snapshot lacks" in n for n in plan.notes)


def test_policy_words_for_default_spreading_are_checked() -> None:
    import pytest

    from engine.policy.parse import PolicyError
    for text, said in (("default spreading per zone max skew 0", "max skew must be at least 1"),
                       ("default spreading per zone max skew 1, per zone max skew 2", "is spread twice")):
        with pytest.raises(PolicyError) as caught:
            check_sources({"p.policy": f"policy p {{\n  applies to all pods\n  {text}\n}}\n"})
        assert said in str(caught.value) and "p.policy:3" in str(caught.value)


def test_at_scale_the_starting_plan_already_spreads() -> None:
    """300 nodes, 10 ReplicaSets of 30: with no time for CP-SAT to improve preferences once every pod is placed, the
    starting plan itself keeps every ReplicaSet within the defaults (zone skew ≤ 5, at most 3 more on a node than on
    the emptiest)."""
    docs = empty_nodes(300, zones=3, cpu="16")
    for d in range(10):
        labels = {"app": f"app{d}"}
        docs += [replica_set(f"rs{d}", labels, 30)] + replicas(30, ("ReplicaSet", f"rs{d}"), labels, f"a{d}")
    plan = plan_for(docs, preference_limit=0.0)
    assert len(plan.assignments) == 300 and plan.stats.phases.model == 0.0  # the starting plan, no CP-SAT
    for d in range(10):
        nodes = [n for k, n in plan.assignments.items() if k.startswith(f"default/a{d}-")]
        zones = Counter(int(n[1:]) % 3 for n in nodes)
        assert max(zones.values()) - min(zones.values()) <= 5, zones
        assert max(Counter(nodes).values()) <= 3


def test_a_namespace_selector_without_namespace_objects_is_a_note() -> None:
    from testkit.manifests import anti, namespace, term
    selecting = pod("p", affinity=anti(term(WEB, namespaceSelector={"matchLabels": {"team": "a"}})))
    without = build_cluster([("n", node("n")), ("p", selecting)])
    assert any("namespaceSelector but the snapshot has no Namespace objects" in n for n in without.notes)
    with_ns = build_cluster([("n", node("n")), ("ns", namespace("default", {"team": "a"})), ("p", selecting)])
    assert not any("namespaceSelector" in n for n in with_ns.notes)


def test_an_even_split_is_proven_best_without_cp_sat() -> None:
    """The soft spreads' bound knows pods cannot split evenly over domains that do not divide them, so a start
    that spreads as evenly as possible is proven optimal and CP-SAT is not run (it could not prove it in time)."""
    docs = empty_nodes(60, zones=3, cpu="16")
    for d in range(2):
        labels = {"app": f"app{d}"}
        docs += [replica_set(f"rs{d}", labels, 30)] + replicas(30, ("ReplicaSet", f"rs{d}"), labels, f"a{d}")
    plan = plan_for(docs)
    assert plan.stats.status == "OPTIMAL" and plan.stats.phases.solve == 0
