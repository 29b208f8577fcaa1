"""Tests for the independent checker/oracle (they do not exercise ``engine``)."""
import itertools
import random
from functools import partial

import pytest

from oracle import best_placed, best_plan, placed_vector
from testkit import manifests
from testkit.checker import Cluster, check_plan
from testkit.manifests import namespace, pod, podgroup, priority_class

node = partial(manifests.node, cpu="1", memory="4Gi")  # the checker's own tests use small nodes


# --------------------------------------------------------------------------- helpers
def ok(docs, plan):
    v = check_plan(docs, plan)
    assert v == [], v


def bad(docs, plan, *fragments):
    v = check_plan(docs, plan)
    assert v, f"expected a violation for {plan}"
    text = " | ".join(v)
    for f in fragments:
        assert f in text, text


def affinity(kind, selector, topology="kubernetes.io/hostname", **term):
    t = {"topologyKey": topology, **term}
    if selector is not None:
        t["labelSelector"] = selector
    return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [t]}}


def node_affinity(*terms):
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                             {"nodeSelectorTerms": list(terms)}}}


# --------------------------------------------------------------------------- plan validity
def test_assignment_targets():
    docs = [node("n1"), pod("p"), pod("b", node_name="n1"), pod("other", scheduler="x"),
            pod("dflt", scheduler=None), pod("done", phase="Succeeded"), {"kind": "ConfigMap"}]
    ok(docs, {"default/p": "n1"})
    ok(docs, {})
    bad(docs, {"default/p": "n9"}, "unknown node")
    bad(docs, {"default/nope": "n1"}, "does not exist")
    for k in ("b", "other", "dflt", "done"):
        bad(docs, {f"default/{k}": "n1"}, "not pending")
    assert check_plan(docs, {"default/other": "n1"}, scheduler_name="x") == []
    assert check_plan(docs, {"default/dflt": "n1"}, scheduler_name="default-scheduler") == []


# --------------------------------------------------------------------------- resources
def test_resources_basic_and_bound_usage():
    docs = [node("n1", cpu="1"), pod("a", cpu="600m"), pod("b", cpu="400m"),
            pod("c", cpu="1m")]
    ok(docs, {"default/a": "n1", "default/b": "n1"})
    bad(docs, {"default/a": "n1", "default/b": "n1", "default/c": "n1"}, "cpu requested 1001 > allocatable 1000")
    docs2 = docs + [pod("run", cpu="500m", node_name="n1")]
    ok(docs2, {"default/b": "n1"})
    bad(docs2, {"default/a": "n1"}, "cpu")
    # terminal bound pods free their resources
    ok(docs + [pod("old", cpu="1", node_name="n1", phase="Succeeded")], {"default/a": "n1"})


def test_resources_init_overhead_limits_and_units():
    n = node("n1", cpu="2", memory="1Gi", **{"example.com/gpu": "1"})
    init = pod("init", cpu="100m", initContainers=[
        {"name": "i", "resources": {"requests": {"cpu": "1500m"}}}])
    over = pod("over", cpu="1", overhead={"cpu": "600m"})
    lim = pod("lim", resources={"limits": {"cpu": "1500m", "memory": "512Mi"}})
    gpu = pod("gpu", resources={"requests": {"example.com/gpu": "1"}})
    mem = pod("mem", resources={"requests": {"memory": "1Gi"}})
    docs = [n, init, over, lim, gpu, mem]
    ok(docs, {"default/init": "n1"})  # max(100m, 1500m) = 1500m
    bad(docs, {"default/init": "n1", "default/over": "n1"}, "cpu requested 3100")
    ok(docs, {"default/lim": "n1"})
    bad(docs, {"default/lim": "n1", "default/mem": "n1"}, "memory")  # limits -> requests
    ok(docs, {"default/gpu": "n1", "default/mem": "n1"})
    # a resource the node does not list has capacity 0
    bad([node("n2"), gpu], {"default/gpu": "n2"}, "example.com/gpu requested 1 > allocatable 0")
    # fractional cpu rounds up to whole millicores
    bad([node("n3", cpu="1"), pod("f", cpu="0.9999"), pod("g", cpu="1m")],
        {"default/f": "n3", "default/g": "n3"}, "cpu requested 1001")


def test_resources_pod_count_and_capacity_fallback():
    cap_only = node("n1", status={"capacity": {"cpu": "1", "pods": "1"}})
    docs = [cap_only, pod("a"), pod("b")]
    ok(docs, {"default/a": "n1"})
    bad(docs, {"default/a": "n1", "default/b": "n1"}, "pods requested 2 > allocatable 1")
    # allocatable wins over capacity
    both = node("n2", status={"allocatable": {"cpu": "100m"}, "capacity": {"cpu": "4"}})
    bad([both, pod("a", cpu="200m")], {"default/a": "n2"}, "cpu")
    # missing pods -> 110
    many = [pod(f"p{i}", cpu="1m") for i in range(110)]
    plan = {f"default/p{i}": "n3" for i in range(110)}
    ok([node("n3", status={"capacity": {"cpu": "1"}})] + many, plan)
    bad([node("n3", status={"capacity": {"cpu": "1"}}), pod("x", cpu="1m")] + many,
        {**plan, "default/x": "n3"}, "pods requested 111")


def test_resources_only_those_requested_by_placed_pods():
    """kube-scheduler only checks the resources the incoming pod asks for."""
    docs = [node("n1", cpu="1", memory="1Gi"),
            pod("hog", resources={"requests": {"memory": "2Gi"}}, node_name="n1"),
            pod("cpu", cpu="100m"), pod("mem", resources={"requests": {"memory": "1"}})]
    ok(docs, {"default/cpu": "n1"})
    bad(docs, {"default/mem": "n1"}, "memory")


# --------------------------------------------------------------------------- node filters
def test_unschedulable_node():
    tol = [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]
    docs = [node("n1", unschedulable=True), pod("a"), pod("t", tolerations=tol),
            pod("all", tolerations=[{"operator": "Exists"}])]
    bad(docs, {"default/a": "n1"}, "unschedulable")
    ok(docs, {"default/t": "n1"})
    ok(docs, {"default/all": "n1"})


def test_node_selector():
    docs = [node("n1", labels={"disk": "ssd"}), node("n2", labels={"disk": "hdd"}), node("n3"),
            pod("a", nodeSelector={"disk": "ssd"})]
    ok(docs, {"default/a": "n1"})
    bad(docs, {"default/a": "n2"}, "nodeSelector")
    bad(docs, {"default/a": "n3"}, "nodeSelector")


@pytest.mark.parametrize("expr,good,wrong", [
    ({"key": "zone", "operator": "In", "values": ["a", "b"]}, ["na", "nb"], ["nc", "nx"]),
    ({"key": "zone", "operator": "NotIn", "values": ["a"]}, ["nb", "nc", "nx"], ["na"]),
    ({"key": "zone", "operator": "Exists"}, ["na", "nb", "nc"], ["nx"]),
    ({"key": "zone", "operator": "DoesNotExist"}, ["nx"], ["na"]),
    ({"key": "gen", "operator": "Gt", "values": ["2"]}, ["nc"], ["na", "nb", "nx"]),
    ({"key": "gen", "operator": "Lt", "values": ["2"]}, ["na"], ["nb", "nc", "nx"]),
])
def test_node_affinity_operators(expr, good, wrong):
    nodes = [node("na", labels={"zone": "a", "gen": "1"}), node("nb", labels={"zone": "b", "gen": "2"}),
             node("nc", labels={"zone": "c", "gen": "10"}), node("nx", labels={"gen": "x"})]
    docs = nodes + [pod("p", affinity=node_affinity({"matchExpressions": [expr]}))]
    for n in good:
        ok(docs, {"default/p": n})
    for n in wrong:
        bad(docs, {"default/p": n}, "nodeAffinity")


def test_node_affinity_terms_fields_and_empty():
    nodes = [node("n1", labels={"zone": "a"}), node("n2", labels={"zone": "b"}), node("n3")]
    in_a = {"key": "zone", "operator": "In", "values": ["a"]}
    # terms are ORed, expressions and fields ANDed
    p = pod("p", affinity=node_affinity(
        {"matchExpressions": [in_a], "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n3"]}]}))
    ok(nodes + [p], {"default/p": "n3"})
    bad(nodes + [p], {"default/p": "n1"}, "nodeAffinity")
    bad(nodes + [p], {"default/p": "n2"}, "nodeAffinity")
    for empty in (pod("e", affinity=node_affinity({})), pod("e", affinity=node_affinity())):
        bad(nodes + [empty], {"default/e": "n1"}, "nodeAffinity")
    # preferred-only node affinity is soft
    soft = pod("s", affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "preference": {"matchExpressions": [in_a]}}]}})
    ok(nodes + [soft], {"default/s": "n2"})


def test_taints_and_tolerations():
    taint = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    docs = [node("n1", taints=[taint]),
            node("soft", taints=[{"key": "k", "effect": "PreferNoSchedule"}]),
            node("exec", taints=[{"key": "k", "value": "v", "effect": "NoExecute"}]),
            pod("none"),
            pod("eq", tolerations=[{"key": "dedicated", "operator": "Equal", "value": "gpu"}]),
            pod("dflt", tolerations=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]),
            pod("exists", tolerations=[{"key": "dedicated", "operator": "Exists"}]),
            pod("wrongval", tolerations=[{"key": "dedicated", "value": "cpu"}]),
            pod("wrongeff", tolerations=[{"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}]),
            pod("any", tolerations=[{"operator": "Exists"}]),
            pod("emptykey", tolerations=[{"operator": "Equal", "value": "gpu"}]),
            pod("novalue", tolerations=[{"key": "k", "effect": "NoExecute"}])]
    for good in ("eq", "dflt", "exists", "any"):
        ok(docs, {f"default/{good}": "n1"})
    for wrong in ("none", "wrongval", "wrongeff", "emptykey"):
        bad(docs, {f"default/{wrong}": "n1"}, "untolerated taint dedicated=gpu:NoSchedule")
    ok(docs, {"default/none": "soft"})
    bad(docs, {"default/none": "exec"}, "NoExecute")
    bad(docs, {"default/novalue": "exec"}, "NoExecute")  # missing value == ""


# --------------------------------------------------------------------------- host ports
def test_host_ports():
    def hp(port, proto=None, ip=None):
        d = {"containerPort": 80, "hostPort": port}
        if proto:
            d["protocol"] = proto
        if ip:
            d["hostIP"] = ip
        return [d]
    docs = [node("n1", cpu="4"), node("n2", cpu="4"),
            pod("a", ports=hp(80)), pod("b", ports=hp(80, "TCP")), pod("udp", ports=hp(80, "UDP")),
            pod("ip1", ports=hp(80, ip="10.0.0.1")), pod("ip2", ports=hp(80, ip="10.0.0.2")),
            pod("ip1b", ports=hp(80, ip="10.0.0.1")), pod("any", ports=hp(80, ip="0.0.0.0")),
            pod("other", ports=hp(81)), pod("noport", ports=[{"containerPort": 80}]),
            pod("run", ports=hp(9000), node_name="n2"), pod("c", ports=hp(9000))]
    bad(docs, {"default/a": "n1", "default/b": "n1"}, "hostPort 80/TCP")
    ok(docs, {"default/a": "n1", "default/b": "n2"})
    ok(docs, {"default/a": "n1", "default/udp": "n1", "default/other": "n1", "default/noport": "n1"})
    ok(docs, {"default/ip1": "n1", "default/ip2": "n1"})
    bad(docs, {"default/ip1": "n1", "default/ip1b": "n1"}, "hostPort")
    bad(docs, {"default/ip1": "n1", "default/any": "n1"}, "hostPort")
    bad(docs, {"default/ip2": "n1", "default/a": "n1"}, "hostPort")
    bad(docs, {"default/c": "n2"}, "default/run")  # conflict with a bound pod
    ok(docs, {"default/c": "n1"})


# --------------------------------------------------------------------------- inter-pod anti-affinity
def _zones():
    return [node("a1", cpu="8", labels={"zone": "a"}), node("a2", cpu="8", labels={"zone": "a"}),
            node("b1", cpu="8", labels={"zone": "b"}), node("x1", cpu="8")]


def test_anti_affinity_forward_and_topology():
    sel = {"matchLabels": {"app": "web"}}
    docs = _zones() + [pod("w1", labels={"app": "web"}, affinity=affinity("podAntiAffinity", sel, "zone")),
                       pod("w2", labels={"app": "web"}, affinity=affinity("podAntiAffinity", sel, "zone")),
                       pod("db", labels={"app": "db"})]
    bad(docs, {"default/w1": "a1", "default/w2": "a2"}, "anti-affinity (zone)")
    ok(docs, {"default/w1": "a1", "default/w2": "b1"})
    ok(docs, {"default/w1": "a1", "default/db": "a1"})
    ok(docs, {"default/w1": "x1", "default/w2": "x1"})  # no zone label -> unconstrained
    ok(docs, {"default/w1": "a1", "default/w2": "x1"})


def test_anti_affinity_reverse_from_bound_pod():
    term = affinity("podAntiAffinity", {"matchLabels": {"app": "web"}})
    docs = _zones() + [pod("guard", labels={"app": "guard"}, node_name="a1", affinity=term),
                       pod("web", labels={"app": "web"}), pod("other", labels={"app": "x"})]
    bad(docs, {"default/web": "a1"}, "violates anti-affinity", "default/guard")
    ok(docs, {"default/web": "a2"})
    ok(docs, {"default/other": "a1"})
    # bound/bound conflicts are not the plan's fault
    ok(docs + [pod("oldweb", labels={"app": "web"}, node_name="a1")], {"default/other": "a2"})


def test_anti_affinity_selectors_and_namespaces():
    nodes = _zones() + [namespace("team", {"tier": "prod"}), namespace("dev", {"tier": "dev"})]

    def anti(sel, **kw):
        return pod("p", labels={"app": "p"}, affinity=affinity("podAntiAffinity", sel, "zone", **kw))
    other_ns = pod("q", ns="team", labels={"app": "web"})
    same_ns = pod("r", labels={"app": "web"})
    web = {"matchLabels": {"app": "web"}}
    # default namespace scope: own namespace only
    ok(nodes + [anti(web), other_ns], {"default/p": "a1", "team/q": "a2"})
    bad(nodes + [anti(web), same_ns], {"default/p": "a1", "default/r": "a2"}, "anti-affinity")
    # explicit namespaces
    bad(nodes + [anti(web, namespaces=["team"]), other_ns], {"default/p": "a1", "team/q": "a2"}, "anti")
    # namespaceSelector on Namespace labels; {} = all namespaces
    bad(nodes + [anti(web, namespaceSelector={"matchLabels": {"tier": "prod"}}), other_ns],
        {"default/p": "a1", "team/q": "a2"}, "anti")
    ok(nodes + [anti(web, namespaceSelector={"matchLabels": {"tier": "dev"}}), other_ns],
       {"default/p": "a1", "team/q": "a2"})
    bad(nodes + [anti(web, namespaceSelector={}), other_ns], {"default/p": "a1", "team/q": "a2"}, "anti")
    # null labelSelector matches nothing, {} matches everything (but never the pod itself)
    ok(nodes + [anti(None), same_ns], {"default/p": "a1", "default/r": "a1"})
    bad(nodes + [anti({}), same_ns], {"default/p": "a1", "default/r": "a1"}, "anti")
    ok(nodes + [anti({})], {"default/p": "a1"})
    # matchExpressions
    expr = {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["db"]}]}
    bad(nodes + [anti(expr), same_ns], {"default/p": "a1", "default/r": "a2"}, "anti")
    ok(nodes + [anti(expr), pod("r", labels={"app": "db"})], {"default/p": "a1", "default/r": "a2"})


# --------------------------------------------------------------------------- inter-pod affinity
def test_affinity_needs_matching_pod_in_domain():
    term = affinity("podAffinity", {"matchLabels": {"app": "db"}}, "zone")
    docs = _zones() + [pod("db", labels={"app": "db"}, node_name="a1"),
                       pod("web", labels={"app": "web"}, affinity=term)]
    ok(docs, {"default/web": "a2"})
    bad(docs, {"default/web": "b1"}, "pod affinity")
    bad(docs, {"default/web": "x1"}, "pod affinity")  # node lacks topology key


def test_affinity_chain_and_first_of_series():
    self_term = affinity("podAffinity", {"matchLabels": {"app": "grp"}}, "zone")
    g = [pod(f"g{i}", labels={"app": "grp"}, affinity=self_term) for i in range(3)]
    docs = _zones() + g
    ok(docs, {"default/g0": "a1", "default/g1": "a2", "default/g2": "a1"})
    bad(docs, {"default/g0": "a1", "default/g1": "b1"}, "pod affinity")
    ok(docs, {"default/g0": "b1"})  # first of a series
    # pod whose own labels do not match its term cannot start a series
    lonely = pod("l", labels={"app": "other"}, affinity=self_term)
    bad(_zones() + [lonely], {"default/l": "a1"}, "pod affinity")
    # an existing matching pod elsewhere blocks the exception
    bad(docs + [pod("old", labels={"app": "grp"}, node_name="b1")], {"default/g0": "a1"}, "pod affinity")
    # ...but not if it sits on a node without the topology key
    ok(docs + [pod("old", labels={"app": "grp"}, node_name="x1")], {"default/g0": "a1"})


def test_affinity_order_with_plain_pod_matching():
    """A starts the series via the exception, plain pod B (same label) comes after."""
    term = affinity("podAffinity", {"matchLabels": {"app": "x"}}, "zone")
    docs = _zones() + [pod("a", labels={"app": "x"}, affinity=term), pod("b", labels={"app": "x"})]
    ok(docs, {"default/a": "a1", "default/b": "b1"})
    # a dependent chain placed via an intermediate pending pod
    dep = pod("c", labels={"app": "c"}, affinity=term)
    ok(docs + [dep], {"default/a": "a1", "default/c": "a2"})
    bad(docs + [dep], {"default/c": "a2"}, "default/c")


def test_affinity_multiple_terms_need_pod_matching_all():
    t = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone"},
        {"labelSelector": {"matchLabels": {"tier": "gold"}}, "topologyKey": "zone"}]}}
    base = _zones() + [pod("p", labels={"app": "web"}, affinity=t)]
    both = pod("both", labels={"app": "db", "tier": "gold"}, node_name="a1")
    ok(base + [both], {"default/p": "a2"})
    split = [pod("db", labels={"app": "db"}, node_name="a1"), pod("gold", labels={"tier": "gold"}, node_name="a1")]
    bad(base + split, {"default/p": "a2"}, "pod affinity")


# --------------------------------------------------------------------------- topology spread
def _spread(max_skew=1, key="zone", when="DoNotSchedule", **kw):
    return [{"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when,
             "labelSelector": {"matchLabels": {"app": "s"}}, **kw}]


def test_topology_spread_skew():
    docs = _zones() + [pod(f"s{i}", labels={"app": "s"}, topologySpreadConstraints=_spread())
                       for i in range(3)]
    ok(docs, {"default/s0": "a1", "default/s1": "b1"})
    ok(docs, {"default/s0": "a1", "default/s1": "b1", "default/s2": "a2"})
    bad(docs, {"default/s0": "a1", "default/s1": "a2"}, "topology spread", "has 2, min 0")
    bad(docs, {"default/s0": "x1"}, "lacks topology spread key")
    # bound matching pods count; other namespaces / labels do not
    extra = [pod("r1", labels={"app": "s"}, node_name="b1"), pod("r2", ns="o", labels={"app": "s"}, node_name="a1"),
             pod("r3", labels={"app": "t"}, node_name="a1")]
    ok(docs + extra, {"default/s0": "a1", "default/s1": "a2"})


def test_topology_spread_soft_min_domains_and_policies():
    soft = [pod(f"s{i}", labels={"app": "s"}, topologySpreadConstraints=_spread(when="ScheduleAnyway"))
            for i in range(2)]
    ok(_zones() + soft, {"default/s0": "a1", "default/s1": "a2"})
    md = [pod(f"m{i}", labels={"app": "s"}, topologySpreadConstraints=_spread(minDomains=3)) for i in range(3)]
    plan = {"default/m0": "a1", "default/m1": "b1", "default/m2": "a2"}
    bad(_zones() + md, plan, "has 2, min 0")  # only 2 eligible domains < minDomains -> min 0
    md_off = [pod(f"m{i}", labels={"app": "s"}, topologySpreadConstraints=_spread()) for i in range(3)]
    ok(_zones() + md_off, plan)
    # nodeAffinityPolicy Honor: zone b excluded by nodeSelector, so zone a alone is balanced
    sel = [pod(f"n{i}", labels={"app": "s"}, nodeSelector={"zone": "a"},
               topologySpreadConstraints=_spread()) for i in range(2)]
    ok(_zones() + sel, {"default/n0": "a1", "default/n1": "a2"})
    ign = [pod(f"n{i}", labels={"app": "s"}, nodeSelector={"zone": "a"},
               topologySpreadConstraints=_spread(nodeAffinityPolicy="Ignore")) for i in range(2)]
    bad(_zones() + ign, {"default/n0": "a1", "default/n1": "a2"}, "topology spread")
    # nodeTaintsPolicy Honor drops the tainted zone from the domains
    tainted = _zones()[:2] + [node("b1", cpu="8", labels={"zone": "b"},
                                   taints=[{"key": "k", "effect": "NoSchedule"}])]
    ign_t = [pod(f"t{i}", labels={"app": "s"}, topologySpreadConstraints=_spread()) for i in range(2)]
    bad(tainted + ign_t, {"default/t0": "a1", "default/t1": "a2"}, "topology spread")
    hon = [pod(f"t{i}", labels={"app": "s"}, topologySpreadConstraints=_spread(nodeTaintsPolicy="Honor"))
           for i in range(2)]
    ok(tainted + hon, {"default/t0": "a1", "default/t1": "a2"})


# --------------------------------------------------------------------------- gangs
def test_gangs():
    lbl = {"scheduling.x-k8s.io/pod-group": "g"}
    docs = [node("n1", cpu="8"), podgroup("g", 3)] + [pod(f"m{i}", labels=lbl) for i in range(3)]
    ok(docs, {})
    ok(docs, {f"default/m{i}": "n1" for i in range(3)})
    bad(docs, {"default/m0": "n1", "default/m1": "n1"}, "minMember 3")
    with_bound = docs + [pod("old", labels=lbl, node_name="n1")]
    ok(with_bound, {"default/m0": "n1", "default/m1": "n1"})
    # label without PodGroup, or PodGroup in another namespace: no gang
    ok([node("n1")] + [pod("x", labels=lbl), podgroup("g", 3, ns="other")], {"default/x": "n1"})


# --------------------------------------------------------------------------- oracle
def test_oracle_tight_packing():
    docs = [node("n1", cpu="1"), node("n2", cpu="1")] + [pod(f"p{i}", cpu="600m") for i in range(3)]
    assert best_placed(docs) == (2,)
    vec, plan = best_plan(docs)
    assert check_plan(docs, plan) == [] and placed_vector(docs, plan) == vec == (2,)


def test_oracle_gang_without_room():
    lbl = {"scheduling.x-k8s.io/pod-group": "g"}
    docs = [node("n1", cpu="1")] + [pod(f"m{i}", cpu="500m", labels=lbl) for i in range(3)] + [podgroup("g", 3)]
    assert best_placed(docs) == (0,)
    assert best_placed(docs[:-1]) == (2,)  # without the PodGroup they are independent


def test_oracle_is_lexicographic_by_priority():
    docs = [node("n1", cpu="1"), pod("hi", cpu="800m", priority=100),
            pod("lo1", cpu="500m", priority=1), pod("lo2", cpu="500m", priority=1)]
    assert best_placed(docs) == (1, 0)
    assert placed_vector(docs, {"default/lo1": "n1", "default/lo2": "n1"}) == (0, 2)
    assert placed_vector(docs, {"default/hi": "n1"}) == (1, 0) > (0, 2)
    pc = priority_class("high", 7)
    docs2 = [node("n1", cpu="1"), pc, pod("a", cpu="1", priorityClassName="high"), pod("b", cpu="1")]
    assert best_placed(docs2) == (1, 0)


def test_oracle_respects_affinity_and_anti_affinity():
    sel = {"matchLabels": {"app": "w"}}
    anti = [pod(f"w{i}", labels={"app": "w"}, affinity=affinity("podAntiAffinity", sel, "zone"))
            for i in range(3)]
    assert best_placed(_zones()[:3] + anti) == (2,)
    assert best_placed(_zones() + anti) == (3,)  # x1 has no zone label: unconstrained
    aff = [pod(f"f{i}", labels={"app": "f"}, affinity=affinity("podAffinity", {"matchLabels": {"app": "f"}}, "zone"))
           for i in range(3)]
    assert best_placed(_zones() + aff) == (3,)


def test_oracle_matches_python_constraint_on_resources():
    """Cross-check the oracle with python-constraint2 on a pure bin-packing instance."""
    constraint = pytest.importorskip("constraint")
    cpus = {"n1": 1000, "n2": 1500}
    reqs = {"a": 700, "b": 600, "c": 500, "d": 400, "e": 300}
    docs = [node(n, cpu=f"{c}m") for n, c in cpus.items()] + [pod(k, cpu=f"{v}m") for k, v in reqs.items()]
    prob = constraint.Problem()
    prob.addVariables(list(reqs), list(cpus) + ["-"])
    for n, cap in cpus.items():
        prob.addConstraint(lambda *a, n=n, cap=cap: sum(r for r, x in zip(reqs.values(), a) if x == n) <= cap,
                           list(reqs))
    best = max(sum(v != "-" for v in s.values()) for s in prob.getSolutions())
    assert best_placed(docs) == (best,)
    # and every constraint solution is accepted by the checker
    for s in itertools.islice(prob.getSolutions(), 50):
        assert check_plan(docs, {f"default/{k}": v for k, v in s.items() if v != "-"}) == []


def _sequential_affinity_ok(c, placed, order):
    """Simulate kube-scheduler's InterPodAffinity filter for pods bound in ``order``."""
    present = dict(c.bound)
    for p in order:
        terms, labels = c.pods[p].aff_terms, c.nodes[placed[p]].labels
        if terms:
            if any(t.topology_key not in labels for t in terms):
                return False
            counts = set()
            for q, qn in present.items():
                if all(t.matches(c.pods[q]) for t in terms):
                    counts |= {(t.topology_key, c.nodes[qn].labels[t.topology_key])
                               for t in terms if t.topology_key in c.nodes[qn].labels}
            if not all((t.topology_key, labels[t.topology_key]) in counts for t in terms) and (
                    counts or not all(t.matches(c.pods[p]) for t in terms)):
                    return False
        present[p] = placed[p]
    return True


def test_affinity_order_search_matches_sequential_simulation():
    rnd = random.Random(7)
    for _ in range(400):
        nodes = [node(f"n{i}", cpu="64", labels={"zone": rnd.choice("ab"),
                                                  **({"rack": rnd.choice("rs")} if rnd.random() < .6 else {})})
                 for i in range(3)]
        pods = []
        for j in range(rnd.randint(1, 5)):
            terms = [{"topologyKey": rnd.choice(["zone", "rack"]),
                      "labelSelector": {"matchLabels": {rnd.choice(["app", "tier"]): rnd.choice("xy")}}}
                     for _ in range(rnd.choice([0, 0, 1, 1, 2]))]
            spec = {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": terms}}}
            pods.append(pod(f"p{j}", labels={"app": rnd.choice("xy"), "tier": rnd.choice("xy")},
                            node_name=f"n{rnd.randrange(3)}" if rnd.random() < .2 else None, **spec))
        docs = nodes + pods
        c = Cluster(docs)
        placed = {k: f"n{rnd.randrange(3)}" for k in c.pending}
        want = any(_sequential_affinity_ok(c, placed, o) for o in itertools.permutations(placed))
        assert (check_plan(docs, placed) == []) == want, (docs, placed)


def test_oracle_pruning_matches_naive_enumeration():
    rnd = random.Random(1)
    for _ in range(25):
        nodes = [node(f"n{i}", cpu=rnd.choice(["1", "2"]), labels={"zone": rnd.choice("ab")})
                 for i in range(rnd.randint(1, 3))]
        pods = []
        for j in range(rnd.randint(1, 4)):
            kind = rnd.choice(["anti", "aff", "spread", None, None])
            sel = {"matchLabels": {"app": "x"}}
            kw = {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "labelSelector": sel,
                                                 "whenUnsatisfiable": "DoNotSchedule"}]} if kind == "spread" else \
                {"affinity": affinity("podAntiAffinity" if kind == "anti" else "podAffinity", sel, "zone")} if kind else {}
            pods.append(pod(f"p{j}", cpu=rnd.choice(["300m", "600m", "1"]), labels={"app": rnd.choice("xy")},
                            priority=rnd.choice([0, 5]), **kw))
        docs = nodes + pods
        names = [n["metadata"]["name"] for n in nodes] + [None]
        keys = [f"default/p{j}" for j in range(len(pods))]
        plans = ({k: n for k, n in zip(keys, combo) if n} for combo in itertools.product(names, repeat=len(keys)))
        naive = max(placed_vector(docs, p) for p in plans if check_plan(docs, p) == [])
        assert best_placed(docs) == naive
