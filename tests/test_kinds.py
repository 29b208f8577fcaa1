"""The constraint-kind protocol: one registry in upstream's filter order, every starting-plan check explained by
exactly one kind, typed rejections (resolvable or not, as upstream's status codes; the policy rule behind
them), and the cluster events each kind says can help a pod it rejected."""
from __future__ import annotations

from dataclasses import replace

from engine.kinds import (
    BY_CHECK,
    KINDS,
    REQUEUES,
    Action,
    ClassReason,
    Explain,
    Filter,
    ModelChange,
    PreFilter,
    Requeue,
    Resource,
    Waiting,
    helped_by,
)
from engine.model.cluster import Node, Pod
from engine.planning.compile import compile_cluster
from engine.policy.lower import policy_rules
from engine.policy.sources import check_sources
from engine.reading.load import build_cluster
from engine.solve.problem import Check
from runner import run
from testkit.manifests import affinity, anti, node, pod, term

ZONE = "topology.kubernetes.io/zone"


def rejections(docs, policy: str = ""):
    """pod name -> node name -> its Rejection (None: passes)."""
    rules = policy_rules(check_sources({"t.policy": policy})) if policy else None
    compiled = compile_cluster(build_cluster([("t", d) for d in docs]), rules)
    return {p.name: {n.name: info.rejected.get(i) for i, n in enumerate(compiled.cluster.nodes)}
            for info in compiled.classes for p in info.pods}


def test_the_registry_is_in_upstream_filter_order_and_names_each_kind_once() -> None:
    names = [k.name for k in KINDS]
    assert len(set(names)) == len(names)
    upstream = ["NodeUnschedulable", "TaintToleration", "NodeAffinity", "NodePorts", "NodeResourcesFit",
                "InterPodAffinity", "PodTopologySpread"]
    assert [n for n in names if n in upstream] == upstream
    assert set(BY_CHECK) == set(Check)  # every check the starting plans raise has one kind to explain it
    for kind in KINDS:
        assert not isinstance(kind, Explain) or (kind.checks and all(BY_CHECK[c] is kind for c in kind.checks))


def test_rejections_are_typed_as_upstream_statuses() -> None:
    docs = [node("small", cpu="1"), node("busy", cpu="4"), node("tainted", taints=[{"key": "gpu", "effect": "NoSchedule"}]),
            node("other", labels={"disk": "hdd"}),
            pod("hog", cpu="3", node_name="busy"),
            pod("p", cpu="2")]
    got = rejections(docs)["p"]
    assert got["small"].plugin == "NodeResourcesFit" and not got["small"].resolvable  # 2 > 1 allocatable: hopeless
    assert got["busy"].plugin == "NodeResourcesFit" and got["busy"].resolvable  # evicting the hog would help
    assert got["tainted"].plugin == "TaintToleration" and not got["tainted"].resolvable
    assert got["other"] is None


def test_affinity_and_spread_rejections_say_whether_eviction_could_help() -> None:
    docs = [node("a1", labels={ZONE: "a"}), node("b1", labels={ZONE: "b"}), node("nozone"),
            pod("db", labels={"app": "db"}, node_name="a1", affinity=anti(term({"app": "web"}, ZONE))),
            pod("web", labels={"app": "web"}),
            pod("follower", labels={"app": "f"}, affinity=affinity(term({"app": "db"}, ZONE)))]
    got = rejections(docs)
    assert got["web"]["a1"].plugin == "InterPodAffinity" and got["web"]["a1"].resolvable  # the db could be evicted
    assert got["follower"]["b1"].plugin == "InterPodAffinity" and not got["follower"]["b1"].resolvable
    spread = {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
              "labelSelector": {"matchLabels": {"app": "s"}}}
    got = rejections([node("a1", labels={ZONE: "a"}), node("nozone"),
                      pod("s", labels={"app": "s"}, topologySpreadConstraints=[spread])])
    assert got["s"]["nozone"].plugin == "PodTopologySpread" and not got["s"]["nozone"].resolvable
    assert got["s"]["a1"] is None


def test_a_rejection_names_the_policy_rule_behind_it_and_never_a_pod_s_own_spec() -> None:
    docs = [node("ssd", labels={"disk": "ssd"}), node("hdd", labels={"disk": "hdd"}),
            pod("own", nodeSelector={"disk": "ssd"}), pod("ruled", labels={"app": "x"})]
    got = rejections(docs, 'policy fast {\n  applies to pods where label "app" == "x"\n  require node label "disk" == "ssd"\n}\n')
    assert got["own"]["hdd"].source is None
    assert got["ruled"]["hdd"].source is not None and got["ruled"]["hdd"].source.line == 3
    assert "t.policy:3 (policy fast)" in got["ruled"]["hdd"].reasons[0]


def _waiting(doc: dict, nodes: tuple[str, ...] = ("n1",), policy: str = "") -> Waiting:
    """A pod as the loop's queue keeps it: the model pod, its class's rules, the nodes it could use."""
    rules = policy_rules(check_sources({"t.policy": policy})) if policy else None
    info = compile_cluster(build_cluster([("t", node("n1")), ("t", doc)]), rules).classes[0]
    return Waiting(info.pods[0], info.constraints, frozenset(nodes))


def _node(name: str, **kw) -> Node:
    return build_cluster([("t", node(name, **kw))]).nodes[0]


def _bound(name: str, where: str = "n1", **kw) -> Pod:
    return build_cluster([("t", node(where)), ("t", pod(name, node_name=where, **kw))]).bound[0]


def test_each_kind_says_which_cluster_events_can_help_a_pod_it_rejected() -> None:
    plain = _waiting(pod("p", cpu="1"))
    added, gone = ModelChange(Resource.NODE, Action.ADD, None, _node("n2")), ModelChange(
        Resource.POD, Action.DELETE, _bound("x"), None, _node("n1"))
    assert helped_by(frozenset({"NodeAffinity"}), plain, added)
    assert helped_by(frozenset({"NodeAffinity"}), plain, replace(added, action=Action.UPDATE_NODE_LABEL))
    assert not helped_by(frozenset({"NodeAffinity"}), plain, gone)  # a pod leaving changes no label
    assert not helped_by(frozenset({"NodeAffinity"}), plain, replace(added, action=Action.UPDATE_NODE_ALLOCATABLE))
    assert helped_by(frozenset({"NodeResourcesFit"}), plain, gone)
    assert not helped_by(frozenset({"NodeResourcesFit"}), plain, replace(gone, action=Action.ADD))  # takes room
    assert helped_by(frozenset({"InterPodAffinity"}), _waiting(pod("q", affinity=affinity(term({"app": "x"})))),
                     ModelChange(Resource.POD, Action.ADD, None, _bound("s", labels={"app": "x"})))  # support
    assert not helped_by(frozenset({"TaintToleration"}), plain, replace(added, action=Action.UPDATE_NODE_LABEL))
    assert helped_by(frozenset({"TaintToleration", "NodeResourcesFit"}), plain, gone)  # any of them
    assert helped_by(frozenset({"TimeLimit"}), plain, gone)  # not a kind: never known not to help
    rejecting = [k for k in KINDS if isinstance(k, PreFilter | Filter | Explain | ClassReason)]  # may keep a pod out
    assert all(isinstance(k, Requeue) and k.events for k in rejecting) and all(k.events for k in REQUEUES.values())


def test_queueing_hints_skip_changes_that_cannot_help() -> None:
    """Upstream's QueueingHints: each would wake the pod if the kind only listed its events."""
    big = _waiting(pod("big", cpu="8"))
    small_node, big_node = _node("n2", cpu="4"), _node("n3", cpu="16")
    joined = lambda n: ModelChange(Resource.NODE, Action.ADD, None, n)  # noqa: E731
    assert not helped_by(frozenset({"NodeResourcesFit"}), big, joined(small_node))  # joins too small for it
    assert helped_by(frozenset({"NodeResourcesFit"}), big, joined(big_node))
    grown = ModelChange(Resource.NODE, Action.UPDATE_NODE_ALLOCATABLE, small_node, big_node)
    assert helped_by(frozenset({"NodeResourcesFit"}), big, grown)
    assert not helped_by(frozenset({"NodeResourcesFit"}), big, replace(grown, old=big_node))  # it did not grow
    left = lambda where: ModelChange(Resource.POD, Action.DELETE, _bound("x", where), None, _node(where))  # noqa: E731
    assert helped_by(frozenset({"NodeResourcesFit"}), big, left("n1"))
    assert not helped_by(frozenset({"NodeResourcesFit"}), big, left("elsewhere"))  # a node it cannot use anyway
    tainted = _node("n4", taints=[{"key": "gpu", "value": "yes", "effect": "NoSchedule"}])
    assert not helped_by(frozenset({"TaintToleration"}), big, joined(tainted))
    granted = _waiting(pod("t"), policy='policy g {\n  applies to pods where label "app" not exists\n'
                                       '  tolerate taint gpu=yes:NoSchedule\n}\n')
    assert helped_by(frozenset({"TaintToleration"}), granted, joined(tainted))  # a policy's toleration counts
    assert not helped_by(frozenset({"NodeUnschedulable"}), big, joined(_node("n5", unschedulable=True)))
    picky = _waiting(pod("s", nodeSelector={"disk": "ssd"}))
    assert not helped_by(frozenset({"NodeAffinity"}), picky, joined(_node("n6")))
    assert helped_by(frozenset({"NodeAffinity"}), picky, joined(_node("n7", labels={"disk": "ssd"})))
    shy = _waiting(pod("a", affinity=anti(term({"app": "db"}))))
    gone = lambda labels: ModelChange(Resource.POD, Action.DELETE, _bound("x", labels=labels), None)  # noqa: E731
    assert helped_by(frozenset({"InterPodAffinity"}), shy, gone({"app": "db"}))
    assert not helped_by(frozenset({"InterPodAffinity"}), shy, gone({"app": "web"}))  # no rule of it counts that pod
    spread = {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
              "labelSelector": {"matchLabels": {"app": "web"}}}
    even = _waiting(pod("e", labels={"app": "web"}, topologySpreadConstraints=[spread]))
    assert helped_by(frozenset({"PodTopologySpread"}), even, gone({"app": "web"}))
    assert not helped_by(frozenset({"PodTopologySpread"}), even, gone({"app": "db"}))
    port = [{"containerPort": 80, "hostPort": 8080}]
    bound_with = lambda ports: ModelChange(Resource.POD, Action.DELETE, _bound("x", ports=ports), None)  # noqa: E731
    wants = _waiting(pod("w", ports=port))
    assert helped_by(frozenset({"NodePorts"}), wants, bound_with(port))
    assert not helped_by(frozenset({"NodePorts"}), wants, bound_with([{"containerPort": 80, "hostPort": 9090}]))


def test_every_batch_check_is_worded_by_its_kind() -> None:
    """One plan per check: the unplaced pod's explanation counts the node under that check."""
    port = [{"containerPort": 80, "hostPort": 8080}]
    cases = {
        Check.RESOURCES: [node("n1", cpu="1"), pod("hi", cpu="1", priority=9, labels={"a": "1"}), pod("lo", cpu="1")],
        Check.PORTS: [node("n1"), pod("hi", ports=port, priority=9, labels={"a": "1"}), pod("lo", ports=port)],
        Check.SEPARATION: [node("n1"), pod("hi", priority=9, labels={"app": "x"}),
                           pod("lo", labels={"app": "y"}, affinity=anti(term({"app": "x"})))],
    }
    for check, docs in cases.items():
        facts = run(docs).details.explanations["default/lo"]
        assert facts.count(check) == 1, (check, facts.lines())
