"""One test (at least) per constraint kind, each of which fails if the engine ignored that constraint.

Every plan is also validated by the independent checker (testkit/checker.py).
"""

from __future__ import annotations

from collections import Counter

import pytest

from runner import run
from testkit.checker import check_plan
from testkit.manifests import affinity, anti, expr, namespace, node, node_affinity, pod, podgroup, spread, term

ZONE = "topology.kubernetes.io/zone"


def plan_ok(docs, **kw):
    plan = run(docs, **kw)
    assert set(plan.assignments) | set(plan.unschedulable) == {
        f"{d['metadata']['namespace']}/{d['metadata']['name']}" for d in docs
        if d["kind"] == "Pod" and not d["spec"].get("nodeName") and d["spec"]["schedulerName"] == "policy-scheduler"
    }
    assert not set(plan.assignments) & set(plan.unschedulable)
    assert all(plan.unschedulable.values()), "every unschedulable pod has a reason"
    violations = check_plan(docs, plan.assignments)
    assert violations == [], violations
    return plan


def where(plan, name, ns="default"):
    return plan.assignments.get(f"{ns}/{name}")


# --- resources ---------------------------------------------------------------------------------

def test_cpu_fit_limits_pods_per_node():
    plan = plan_ok([node("n1", cpu="1"), pod("a", cpu="600m"), pod("b", cpu="600m")])
    assert len(plan.assignments) == 1
    assert len(plan.unschedulable) == 1


def test_insufficient_cpu_is_explained_like_upstream():
    plan = plan_ok([node("n1", cpu="1"), node("n2", cpu="1"), pod("big", cpu="2")])
    assert plan.unschedulable["default/big"][0] == "0/2 nodes are available: 2 Insufficient cpu."


def test_memory_and_extended_resources():
    docs = [node("cpu-only", memory="1Gi"), node("gpu", memory="64Gi", **{"nvidia.com/gpu": "2"}),
            pod("train", cpu="1", memory="2Gi", requests={"nvidia.com/gpu": "1"}),
            pod("fat", cpu="1", memory="32Gi")]
    plan = plan_ok(docs)
    assert where(plan, "train") == "gpu"
    assert where(plan, "fat") == "gpu"


def test_extended_resource_exhausted():
    docs = [node("gpu", **{"nvidia.com/gpu": "1"})] + [pod(f"t{i}", requests={"nvidia.com/gpu": "1"}) for i in range(2)]
    plan = plan_ok(docs)
    assert len(plan.assignments) == 1
    assert any("nvidia.com/gpu" in r or "batch" in r for r in next(iter(plan.unschedulable.values())))


def test_pods_slot_counts():
    plan = plan_ok([node("n1", pods=2), pod("bound", node_name="n1"), pod("a"), pod("b")])
    assert len(plan.assignments) == 1


def test_init_containers_take_the_max_not_the_sum():
    init = [{"name": "init", "image": "busybox", "resources": {"requests": {"cpu": "3"}}}]
    docs = [node("n1", cpu="2"), pod("p", cpu="1", initContainers=init)]
    plan = plan_ok(docs)
    assert "Insufficient cpu" in plan.unschedulable["default/p"][0]
    docs = [node("n1", cpu="4"), pod("p", cpu="1", initContainers=init), pod("q", cpu="1")]
    plan = plan_ok(docs)
    assert len(plan.assignments) == 2  # p counts as 3 cpu, q as 1: both fit in 4


def test_sidecar_init_containers_add_up():
    sidecar = [{"name": "proxy", "image": "envoy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}}]
    plan = plan_ok([node("n1", cpu="2"), pod("p", cpu="1500m", initContainers=sidecar)])
    assert "Insufficient cpu" in plan.unschedulable["default/p"][0]


def test_overhead_counts():
    plan = plan_ok([node("n1", cpu="1"), pod("p", cpu="900m", overhead={"cpu": "200m"})])
    assert "Insufficient cpu" in plan.unschedulable["default/p"][0]


def test_bound_pods_consume_capacity_and_terminal_ones_do_not():
    docs = [node("n1", cpu="4"), node("n2", cpu="4"),
            pod("old", cpu="3", node_name="n1"), pod("done", cpu="4", node_name="n2", phase="Succeeded"),
            pod("p", cpu="2")]
    assert where(plan_ok(docs), "p") == "n2"


# --- node selection ------------------------------------------------------------------------------

def test_unschedulable_node_is_avoided_unless_tolerated():
    docs = [node("cordoned", unschedulable=True), pod("p")]
    plan = plan_ok(docs)
    assert plan.unschedulable["default/p"][0] == "0/1 nodes are available: 1 node(s) were unschedulable."
    tol = [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]
    assert where(plan_ok([node("cordoned", unschedulable=True), pod("p", tolerations=tol)]), "p") == "cordoned"


def test_node_selector():
    docs = [node("a", labels={"disk": "hdd"}), node("b", labels={"disk": "ssd"}), pod("p", nodeSelector={"disk": "ssd"})]
    assert where(plan_ok(docs), "p") == "b"


@pytest.mark.parametrize(
    "expression,expected",
    [
        (expr("tier", "In", "gold", "silver"), {"gold"}),
        (expr("tier", "NotIn", "gold"), {"bronze", "plain"}),
        (expr("tier", "Exists"), {"gold", "bronze"}),
        (expr("tier", "DoesNotExist"), {"plain"}),
        (expr("cores", "Gt", "8"), {"gold"}),
        (expr("cores", "Lt", "8"), {"bronze"}),
    ],
)
def test_required_node_affinity_operators(expression, expected):
    nodes = [node("gold", labels={"tier": "gold", "cores": "16"}), node("bronze", labels={"tier": "bronze", "cores": "4"}),
             node("plain")]
    pods = [pod(f"p{i}", affinity=node_affinity([expression])) for i in range(3)]
    plan = plan_ok(nodes + pods)
    assert set(plan.assignments.values()) <= expected
    assert len(plan.assignments) == 3  # plenty of room: all land on allowed nodes


def test_node_affinity_terms_are_ored_and_match_fields_works():
    nodes = [node("a", labels={"x": "1"}), node("b"), node("c")]
    aff = node_affinity([expr("x", "In", "1")], fields=[expr("metadata.name", "In", "c")])
    plan = plan_ok(nodes + [pod(f"p{i}", cpu="3", affinity=aff) for i in range(3)])
    assert sorted(plan.assignments.values()) == ["a", "c"]


def test_preferred_node_affinity_is_followed():
    pref = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 50, "preference": {"matchExpressions": [expr("fast", "Exists")]}}]}}
    docs = [node("a"), node("b"), node("c", labels={"fast": "yes"}), pod("p", affinity=pref)]
    assert where(plan_ok(docs), "p") == "c"


# --- taints --------------------------------------------------------------------------------------

@pytest.mark.parametrize("effect", ["NoSchedule", "NoExecute"])
def test_hard_taints_repel(effect):
    taint = [{"key": "gpu", "value": "true", "effect": effect}]
    plan = plan_ok([node("g", taints=taint), pod("p")])
    assert plan.unschedulable["default/p"][0] == "0/1 nodes are available: 1 node(s) had untolerated taint {gpu: true}."


@pytest.mark.parametrize(
    "toleration",
    [
        {"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"},
        {"key": "gpu", "value": "true"},  # operator defaults to Equal, empty effect matches all
        {"key": "gpu", "operator": "Exists"},
        {"operator": "Exists"},  # empty key + Exists tolerates everything
    ],
)
def test_tolerations(toleration):
    plan = plan_ok([node("g", taints=[{"key": "gpu", "value": "true", "effect": "NoSchedule"}]),
                    pod("p", tolerations=[toleration])])
    assert where(plan, "p") == "g"


def test_wrong_toleration_does_not_tolerate():
    plan = plan_ok([node("g", taints=[{"key": "gpu", "value": "true", "effect": "NoSchedule"}]),
                    pod("p", tolerations=[{"key": "gpu", "value": "false"}])])
    assert "default/p" in plan.unschedulable


def test_prefer_no_schedule_is_soft():
    soft = [{"key": "spot", "value": "yes", "effect": "PreferNoSchedule"}]
    assert where(plan_ok([node("a", taints=soft), node("b"), pod("p")]), "p") == "b"
    assert where(plan_ok([node("a", taints=soft), pod("p")]), "p") == "a"


# --- inter-pod affinity --------------------------------------------------------------------------

def test_anti_affinity_within_the_batch():
    web = {"app": "web"}
    docs = [node("a"), node("b")] + [pod(f"w{i}", labels=web, affinity=anti(term(web))) for i in range(3)]
    plan = plan_ok(docs)
    assert sorted(plan.assignments.values()) == ["a", "b"]
    assert len(plan.unschedulable) == 1


def test_anti_affinity_against_bound_pods():
    docs = [node("a"), node("b"), pod("cache", labels={"app": "cache"}, node_name="a"),
            pod("p", affinity=anti(term({"app": "cache"})))]
    assert where(plan_ok(docs), "p") == "b"


def test_existing_pods_anti_affinity_repels_incoming():
    docs = [node("a"), node("b"), pod("loner", node_name="a", affinity=anti(term({"app": "web"}))),
            pod("p", labels={"app": "web"})]
    assert where(plan_ok(docs), "p") == "b"


def test_anti_affinity_by_zone_and_namespaces():
    nodes = [node("a1", labels={ZONE: "a"}), node("a2", labels={ZONE: "a"}), node("b1", labels={ZONE: "b"})]
    bound = pod("db", ns="data", labels={"app": "db"}, node_name="a1")
    same_ns = pod("p", affinity=anti(term({"app": "db"}, ZONE)))  # default namespace only: db is elsewhere
    other_ns = pod("q", cpu="3500m", affinity=anti(term({"app": "db"}, ZONE, namespaces=["data"])))
    plan = plan_ok(nodes + [bound, same_ns, other_ns])
    assert where(plan, "q") == "b1"
    assert "default/p" in plan.assignments


def test_namespace_selector_resolves_against_namespace_labels():
    ns = namespace("data", {"team": "db"})
    docs = [ns, node("a"), node("b"), pod("db", ns="data", labels={"app": "db"}, node_name="a"),
            pod("p", affinity=anti(term({"app": "db"}, namespaceSelector={"matchLabels": {"team": "db"}})))]
    assert where(plan_ok(docs), "p") == "b"


def test_affinity_to_bound_pod():
    nodes = [node("a1", labels={ZONE: "a"}), node("b1", labels={ZONE: "b"}), node("b2", labels={ZONE: "b"})]
    docs = nodes + [pod("cache", labels={"app": "cache"}, node_name="b2"),
                    pod("p", affinity=affinity(term({"app": "cache"}, ZONE)))]
    assert where(plan_ok(docs), "p") in ("b1", "b2")


def test_affinity_within_the_batch():
    nodes = [node("a1", labels={ZONE: "a"}), node("b1", labels={ZONE: "b"})]
    pinned = pod("cache", labels={"app": "cache"}, nodeSelector={ZONE: "b"})
    follower = pod("web", affinity=affinity(term({"app": "cache"}, ZONE)))
    plan = plan_ok(nodes + [pinned, follower])
    assert where(plan, "web") == "b1"


def test_affinity_without_any_match_is_unschedulable():
    plan = plan_ok([node("a"), pod("p", affinity=affinity(term({"app": "ghost"})))])
    assert "pod affinity" in plan.unschedulable["default/p"][0]


def test_self_affinity_first_pod_may_start_anywhere_then_the_rest_follow():
    nodes = [node(f"{z}{i}", labels={ZONE: z}) for z in "abc" for i in range(2)]
    job = {"job": "j1"}
    pods = [pod(f"j{i}", labels=job, affinity=affinity(term(job, ZONE))) for i in range(4)]
    plan = plan_ok(nodes + pods)
    assert len(plan.assignments) == 4
    assert len({v[0] for v in plan.assignments.values()}) == 1, plan.assignments


def test_preferred_pod_anti_affinity_spreads_when_possible():
    web = {"app": "web"}
    pref = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "podAffinityTerm": term(web)}]}}
    plan = plan_ok([node("a"), node("b"), node("c")] + [pod(f"w{i}", labels=web, affinity=pref) for i in range(3)])
    assert len(set(plan.assignments.values())) == 3


def test_preferred_pod_affinity_pulls_towards_bound_pod():
    pref = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 80, "podAffinityTerm": term({"app": "cache"})}]}}
    docs = [node("a"), node("b"), node("c"), pod("cache", labels={"app": "cache"}, node_name="c"),
            pod("p", affinity=pref)]
    assert where(plan_ok(docs), "p") == "c"


# --- topology spread -----------------------------------------------------------------------------

def test_hard_topology_spread_balances_zones():
    nodes = [node("a1", cpu="16", labels={ZONE: "a"}), node("b1", cpu="16", labels={ZONE: "b"})]
    pref = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "preference": {"matchExpressions": [expr(ZONE, "In", "a")]}}]}}
    app = {"app": "api"}
    pods = [pod(f"p{i}", labels=app, topologySpreadConstraints=[spread(app)], affinity=pref) for i in range(4)]
    plan = plan_ok(nodes + pods)
    assert Counter(plan.assignments.values()) == {"a1": 2, "b1": 2}


def test_hard_spread_accounts_for_bound_pods():
    nodes = [node("a1", cpu="16", labels={ZONE: "a"}), node("b1", cpu="16", labels={ZONE: "b"})]
    app = {"app": "api"}
    bound = [pod(f"old{i}", labels=app, node_name="a1") for i in range(2)]
    pods = [pod(f"p{i}", labels=app, topologySpreadConstraints=[spread(app)]) for i in range(2)]
    plan = plan_ok(nodes + bound + pods)
    assert set(plan.assignments.values()) == {"b1"}


def test_hard_spread_leaves_pods_out_rather_than_skew():
    nodes = [node("a1", cpu="16", labels={ZONE: "a"}), node("b1", cpu="1", labels={ZONE: "b"})]
    app = {"app": "api"}
    pods = [pod(f"p{i}", cpu="500m", labels=app, topologySpreadConstraints=[spread(app)]) for i in range(6)]
    plan = plan_ok(nodes + pods)
    assert Counter(plan.assignments.values()) == {"a1": 3, "b1": 2}


def test_soft_spread_places_everything_but_prefers_balance():
    nodes = [node("a1", cpu="16", labels={ZONE: "a"}), node("b1", cpu="1", labels={ZONE: "b"})]
    app = {"app": "api"}
    pods = [pod(f"p{i}", cpu="500m", labels=app, topologySpreadConstraints=[spread(app, hard=False)]) for i in range(6)]
    plan = plan_ok(nodes + pods)
    assert Counter(plan.assignments.values()) == {"a1": 4, "b1": 2}


def test_spread_node_without_topology_label_is_rejected():
    app = {"app": "api"}
    plan = plan_ok([node("nolabel"), pod("p", labels=app, topologySpreadConstraints=[spread(app)])])
    assert "missing required label" in plan.unschedulable["default/p"][0]


# --- host ports ----------------------------------------------------------------------------------

def test_host_ports_conflict_within_batch_and_with_bound():
    port = [{"containerPort": 80, "hostPort": 8080}]
    plan = plan_ok([node("a"), pod("p1", ports=port), pod("p2", ports=port)])
    assert len(plan.assignments) == 1
    plan = plan_ok([node("a"), node("b"), pod("old", node_name="a", ports=port), pod("p", ports=port)])
    assert where(plan, "p") == "b"
    udp = [{"containerPort": 80, "hostPort": 8080, "protocol": "UDP"}]
    plan = plan_ok([node("a"), pod("p1", ports=port), pod("p2", ports=udp)])
    assert len(plan.assignments) == 2


# --- priority and gangs --------------------------------------------------------------------------

def test_priority_decides_who_waits():
    docs = [node("a", cpu="1"), pod("low", cpu="1", priority=0), pod("high", cpu="1", priority=1000)]
    plan = plan_ok(docs)
    assert where(plan, "high") == "a"
    assert any("higher-priority" in r for r in plan.unschedulable["default/low"])


def test_one_high_priority_pod_outweighs_many_low_ones():
    docs = [node("a", cpu="2")] + [pod(f"low{i}", cpu="1", priority=0) for i in range(2)] + [
        pod("high", cpu="2", priority=10)]
    plan = plan_ok(docs)
    assert list(plan.assignments) == ["default/high"]


def gang(name, n, cpu="1", ns="default"):
    return [pod(f"{name}-{i}", cpu=cpu, ns=ns, labels={"scheduling.x-k8s.io/pod-group": name}) for i in range(n)]


def test_gang_is_all_or_nothing():
    plan = plan_ok([node("a", cpu="2"), podgroup("g", 3)] + gang("g", 3))
    assert plan.assignments == {}
    reason = " ".join(plan.unschedulable["default/g-0"])
    assert "gang default/g could not be completed: needs 3" in reason
    assert "only 2 fit, even alone" in reason


def test_gang_counts_bound_members():
    bound = pod("g-old", node_name="a", labels={"scheduling.x-k8s.io/pod-group": "g"})
    plan = plan_ok([node("a", cpu="3"), podgroup("g", 3), bound] + gang("g", 2))
    assert len(plan.assignments) == 2


def test_two_gangs_do_not_deadlock():
    # the coscheduling example: room for 4 pods, two gangs of 3 -> exactly one gang starts, whole
    docs = [node("a", cpu="2"), node("b", cpu="2"), podgroup("g1", 3), podgroup("g2", 3)] + gang("g1", 3) + gang("g2", 3)
    plan = plan_ok(docs)
    groups = Counter(k.split("/")[1].split("-")[0] for k in plan.assignments)
    assert list(groups.values()) == [3]


def test_gang_without_enough_pending_members():
    plan = plan_ok([node("a", cpu="8"), podgroup("g", 4)] + gang("g", 2))
    assert "waiting for 4 of its members to be pending (minMember 4)" in " ".join(plan.unschedulable["default/g-0"])


def test_pods_of_other_schedulers_and_bound_pods_are_not_planned():
    docs = [node("a"), pod("mine"), pod("theirs", scheduler="default-scheduler"), pod("old", node_name="a")]
    plan = plan_ok(docs)
    assert list(plan.assignments) == ["default/mine"]
    assert any("other schedulers" in n for n in plan.notes)


def test_spread_match_label_keys_counts_only_the_same_revision():
    nodes = [node("a1", cpu="16", labels={ZONE: "a"}), node("b1", cpu="16", labels={ZONE: "b"})]
    old = [pod(f"old{i}", labels={"app": "api", "rev": "1"}, node_name="a1") for i in range(3)]
    c = spread({"app": "api"}, matchLabelKeys=["rev"])
    new = [pod(f"p{i}", labels={"app": "api", "rev": "2"}, topologySpreadConstraints=[c]) for i in range(2)]
    plan = plan_ok(nodes + old + new)
    # the old revision does not count, so the new pods split 1/1 instead of both going to zone b
    assert Counter(plan.assignments.values()) == {"a1": 1, "b1": 1}


def test_affinity_mismatch_label_keys():
    tenant = {"tenant": "x"}
    term_ = term({}, mismatchLabelKeys=["tenant"])
    # keep away from every other tenant's pods, but not from my own tenant's
    docs = [node("a"), node("b"), pod("mine", labels=tenant, node_name="a"), pod("other", labels={"tenant": "y"}, node_name="b"),
            pod("p", labels=tenant, affinity=anti(term_))]
    assert where(plan_ok(docs), "p") == "a"


def test_anti_affinity_does_not_bind_nodes_without_the_topology_label():
    web = {"app": "web"}
    n = node("a")
    del n["metadata"]["labels"]["kubernetes.io/hostname"]
    plan = plan_ok([n] + [pod(f"w{i}", labels=web, affinity=anti(term(web))) for i in range(2)])
    assert len(plan.assignments) == 2  # upstream: a node without the key is not constrained by the term
