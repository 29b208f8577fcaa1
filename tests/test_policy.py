"""The policy language: parsing, positioned errors, type checks, and each capability compiled into plans."""

from __future__ import annotations

import os
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.planning.plan import make_plan
from engine.policy import ast as A
from engine.policy.check import check
from engine.policy.lower import gang_rules, policy_rules
from engine.policy.parse import PolicyError, parse
from engine.reading.load import build_cluster
from testkit.checker import check_plan
from testkit.manifests import node, pod

ZONE = "topology.kubernetes.io/zone"

EXAMPLE = '''# a GPU training policy
policy ml-training {
  applies to pods where namespace == "ml" and label "team" in ["research", "vision"]
  require node label "accelerator" in ["a100", "h100"]
  tolerate taint nvidia.com/gpu=present:NoSchedule
  prefer node label "lifecycle" == "on-demand" weight 40
  minimize node annotation "price" weight 10
  separate from pods with same label "app" per node
  gang by label "job" min 8
}
'''


def problems(text: str, file: str = "p.policy") -> list[str]:
    try:
        policies = parse(text, file)
    except PolicyError as exc:
        return [d.render() for d in exc.diagnostics]
    return [d.render() for d in check(policies, {file: text})]


def plan_with(text: str, docs: list[dict], checked_docs: list[dict] | None = None):
    """Plan with the policy; the plan must still satisfy every pod's own spec (policies only add), judged
    by the independent checker on `checked_docs` (docs with what the policy grants written into them)."""
    policies = parse(text, "t.policy")
    assert check(policies, {"t.policy": text}) == []
    cluster = build_cluster([("test", d) for d in docs], gangs=gang_rules(policies))
    plan = make_plan(cluster, policy_rules(policies), time_limit=5, workers=1, seed=0)
    assert check_plan(checked_docs or docs, plan.assignments) == []
    return plan


# --- parsing ---------------------------------------------------------------------------------------

def test_example_parses_into_a_typed_ast():
    [policy] = parse(EXAMPLE, "ml.policy")
    assert policy.name == "ml-training" and policy.pos == A.Pos("ml.policy", 2, 1)
    kinds = [type(s).__name__ for s in policy.statements]
    assert kinds == ["Scope", "NodeRequirement", "Tolerate", "NodeRequirement", "Minimize", "Proximity", "GangBy"]
    tol = policy.statements[2]
    assert tol.taints[0] == A.TaintPattern("nvidia.com/gpu", "present", "NoSchedule", tol.taints[0].pos)
    assert policy.statements[1].pos.line == 4 and policy.statements[1].pos.column == 3
    assert check([policy], {"ml.policy": EXAMPLE}) == []


def test_several_policies_and_comments():
    text = "// one\npolicy a { applies to all pods }  # two\npolicy b { applies to pods where priority >= 100 }\n"
    assert [p.name for p in parse(text)] == ["a", "b"]


@pytest.mark.parametrize(
    "text,expected",
    [
        ('policy a { applies to all pods\n  requre node label "x" exists }', "p.policy:2:3: unexpected 'requre'"),
        ('policy a { applies to all pods\n  prefer node label "x" exists weigth 3 }', "(did you mean 'weight'?)"),
        ('policy a { applies to all pods\n  require node labl "x" exists }', "(did you mean 'label'?)"),
        ('policy a { applies to all pods\n  require node colour "x" exists }', "expected 'name', label, annotation"),
        ("policy a {", "unexpected end of file"),
        ("policy Bad { applies to all pods }", "expected a policy name"),
        ('policy a { applies to pods where label "x" ~= "y" }', "expected '!=', '=='"),
        ('policy a { applies to all pods "stray" }', "p.policy:1:32: unexpected"),
    ],
)
def test_syntax_errors_are_positioned_with_suggestions(text, expected):
    [message] = problems(text)
    assert expected in message
    assert "\n    " in message and message.rstrip().endswith("^")  # source line and caret


def test_caret_points_at_the_column():
    [message] = problems('policy a { applies to all pods\n  requre node label "x" exists }')
    _, source, caret = message.split("\n")
    assert source.index("requre") == caret.index("^")


@pytest.mark.parametrize(
    "body,expected",
    [
        ('require node label "cores" > "eight"', "'>' compares numbers"),
        ('prefer node label "x" exists weight 0', "weight must be a whole number from 1"),
        ('prefer node label "x" exists weight -5', "weight must be a whole number from 1"),
        ('avoid node label "x" exists weight 2.5', "weight must be a whole number from 1"),
        ("tolerate taint gpu=true:Sometimes", "unknown taint effect 'Sometimes'"),
        ('require node allocatable "memory" >= "lots"', "not a quantity"),
        ('require node allocatable "cpu" in ["1"]', "not 'in'"),
        ('gang by label "job" min 0', "gang min must be at least 1"),
        ('gang by label "job" min 200000', "can never be satisfied"),
        ('separate from pods with same label "bad key!" per node', "invalid label key 'bad key!'"),
        ('keep with pods where label "app" == "x" per label "-nope"', "invalid topology key"),
        ('minimize node taint "x" weight 3', "cannot minimise a node taint"),
    ],
)
def test_type_errors(body, expected):
    found = problems(f"policy a {{\n  applies to all pods\n  {body}\n}}\n")
    assert any(expected in m for m in found), found
    assert all(m.startswith("p.policy:3:") for m in found), found


def test_priority_must_be_compared_with_a_number():
    assert "priority is a number" in problems('policy a { applies to pods where priority > "high" }')[0]


def test_policy_level_errors():
    found = problems("policy a { }\npolicy a { applies to all pods\n applies to all pods }\n")
    assert any("p.policy:1:1: policy 'a' has no 'applies to' line" in m for m in found)
    assert any("p.policy:2:1: duplicate policy name 'a' (first defined at p.policy:1:1)" in m for m in found)
    assert any("p.policy:3:2: policy 'a' has a second 'applies to' line" in m for m in found)


@settings(max_examples=int(os.environ.get("POLICY_FUZZ_EXAMPLES", "300")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_fuzzed_policies_always_get_a_clean_error(data):
    """Mutations of a valid policy: parse + check either succeed or raise PolicyError; never anything else."""
    text = EXAMPLE
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(text)))
        op = data.draw(st.sampled_from(["insert", "delete", "replace", "duplicate"]))
        junk = data.draw(st.text(alphabet='abcxyz{}()[]"=!<>:,#/\\ \n0123456789-.', max_size=6))
        if op == "insert":
            text = text[:i] + junk + text[i:]
        elif op == "delete":
            text = text[:i] + text[i + len(junk):]
        elif op == "replace":
            text = text[:i] + junk + text[i + len(junk):]
        else:
            text = text[:i] + text[i:i + 40] + text[i:]
    try:
        policies = parse(text, "f.policy")
    except PolicyError as exc:
        assert exc.diagnostics and all(d.line >= 1 and d.column >= 1 for d in exc.diagnostics)
        return
    for d in check(policies, {"f.policy": text}):
        assert d.line >= 1 and d.column >= 1


def test_deep_nesting_is_bounded():
    text = "policy a { applies to pods where " + "(" * 5000 + 'label "x" exists' + ")" * 5000 + " }"
    try:
        parse(text)
    except PolicyError as exc:
        assert exc.diagnostics[0].line == 1


# --- semantics: each capability changes plans ----------------------------------------------------

def test_scope_selects_pods_and_require_is_hard():
    docs = [node("gpu", labels={"accelerator": "a100"}), node("plain")] + [
        pod("ml-0", ns="ml", labels={"team": "vision"}, cpu="3"),
        pod("ml-1", ns="ml", labels={"team": "vision"}, cpu="3"),
        pod("web", ns="web", cpu="3"),
    ]
    text = 'policy p { applies to pods where namespace == "ml" and label "team" in ["research", "vision"]\n require node label "accelerator" in ["a100"] }'
    plan = plan_with(text, docs)
    ml = {k: v for k, v in plan.assignments.items() if k.startswith("ml/")}
    assert list(ml.values()) == ["gpu"]  # only the gpu node is allowed, and it fits one
    assert plan.assignments["web/web"] in ("gpu", "plain")  # out of scope: unconstrained
    assert len(plan.assignments) == 2


def test_policy_rejection_cites_file_and_line():
    docs = [node("plain"), pod("p")]
    plan = plan_with('policy p {\n  applies to all pods\n  require node label "accelerator" exists\n}', docs)
    assert plan.unschedulable["default/p"] == [
        '0/1 nodes are available: 1 node(s) didn\'t match node label "accelerator" exists (t.policy:3 (policy p)).'
    ]


def test_forbid_and_numeric_label_comparison():
    docs = [node("big", labels={"cores": "16"}), node("small", labels={"cores": "4"}), node("spot", labels={"cores": "32", "spot": "1"}), pod("p")]
    plan = plan_with('policy p { applies to all pods\n require node label "cores" > 8\n forbid node label "spot" exists }', docs)
    assert plan.assignments == {"default/p": "big"}


def test_allocatable_comparison_uses_quantities():
    docs = [node("small", memory="16Gi"), node("large", memory="128Gi"), pod("p")]
    plan = plan_with('policy p { applies to all pods\n require node allocatable "memory" >= "64Gi" }', docs)
    assert plan.assignments == {"default/p": "large"}


def test_prefer_and_avoid_are_soft():
    docs = [node("a"), node("b", labels={"disk": "ssd"}), node("c", labels={"old": "yes"}), pod("p")]
    assert plan_with('policy p { applies to all pods\n prefer node label "disk" == "ssd" weight 10 }', docs).assignments == {"default/p": "b"}
    docs = [node("c", labels={"old": "yes"}), node("a"), pod("p")]
    assert plan_with('policy p { applies to all pods\n avoid node label "old" exists weight 10 }', docs).assignments == {"default/p": "a"}
    docs = [node("c", labels={"old": "yes"}), pod("p")]
    assert plan_with('policy p { applies to all pods\n avoid node label "old" exists weight 10 }', docs).assignments == {"default/p": "c"}


def test_policy_grants_tolerations():
    taint = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    docs = [node("gpu", taints=taint), pod("train", ns="ml"), pod("web")]
    granted = [node("gpu", taints=taint), pod("train", ns="ml", tolerations=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]), pod("web")]
    plan = plan_with('policy p { applies to pods where namespace == "ml"\n tolerate taint nvidia.com/gpu=present:NoSchedule }', docs, granted)
    assert plan.assignments == {"ml/train": "gpu"}
    assert "untolerated taint" in plan.unschedulable["default/web"][0]


def test_minimize_price_annotation_picks_the_cheapest_node():
    docs = [node(f"n{i}") for i in range(3)] + [pod("p")]
    for d, price in zip(docs, ["0.90", "0.12", "0.40"]):
        d["metadata"]["annotations"] = {"price": price}
    plan = plan_with('policy cheapest { applies to all pods\n minimize node annotation "price" weight 100 }', docs)
    assert plan.assignments == {"default/p": "n1"}


def test_separate_from_same_label_spreads_replicas():
    docs = [node("a"), node("b"), node("c")] + [pod(f"w{i}", labels={"app": "web"}) for i in range(3)]
    plan = plan_with('policy ha { applies to pods where label "app" exists\n separate from pods with same label "app" per node }', docs)
    assert sorted(plan.assignments.values()) == ["a", "b", "c"]
    docs = [node("a"), node("b")] + [pod(f"w{i}", labels={"app": "web"}) for i in range(3)]
    plan = plan_with('policy ha { applies to pods where label "app" exists\n separate from pods with same label "app" per node }', docs)
    assert len(plan.assignments) == 2


def test_keep_with_pods_where_per_zone():
    docs = [node("a1", labels={ZONE: "a"}), node("b1", labels={ZONE: "b"}),
            pod("cache", labels={"app": "cache"}, node_name="b1"), pod("web", labels={"app": "web"})]
    plan = plan_with('policy near { applies to pods where label "app" == "web"\n keep with pods where label "app" == "cache" per zone }', docs)
    assert plan.assignments == {"default/web": "b1"}


def test_soft_separation_is_a_preference():
    docs = [node("a")] + [pod(f"w{i}", labels={"app": "web"}) for i in range(2)]
    plan = plan_with('policy ha { applies to all pods\n separate from pods with same label "app" per node weight 10 }', docs)
    assert len(plan.assignments) == 2


def test_gang_by_label_is_all_or_nothing():
    job = [pod(f"j{i}", cpu="1", labels={"job": "train"}) for i in range(3)]
    text = 'policy g { applies to pods where label "job" exists\n gang by label "job" min 3 }'
    assert plan_with(text, [node("a", cpu="2")] + job).assignments == {}
    assert len(plan_with(text, [node("a", cpu="3")] + job).assignments) == 3
    reason = " ".join(plan_with(text, [node("a", cpu="2")] + job).unschedulable["default/j0"])
    assert "gang default/job=train could not be completed: needs 3" in reason


@pytest.mark.parametrize(
    "scope,placed",
    [
        ('namespace != "ml"', {"web/w"}),
        ('namespace in ["ml", "x"]', {"ml/m"}),
        ('label "team" not in ["a"]', {"web/w"}),
        ('label "team" exists', {"ml/m"}),
        ('label "team" not exists', {"web/w"}),
        ("priority >= 100", {"ml/m"}),
        ('owner kind == "Job"', {"ml/m"}),
        ('not (namespace == "ml" or priority < 0)', {"web/w"}),
    ],
)
def test_scope_operators(scope, placed):
    ml = pod("m", ns="ml", labels={"team": "a"}, priority=100)
    ml["metadata"]["ownerReferences"] = [{"kind": "Job", "name": "j", "controller": True}]
    docs = [node("n"), ml, pod("w", ns="web", priority=0)]
    plan = plan_with(f'policy p {{ applies to pods where {scope}\n forbid node name == "n" }}', docs)
    assert set(plan.assignments) == {"ml/m", "web/w"} - placed


LIMIT = 'policy per-zone { applies to pods where label "app" exists\n at most 2 per zone of pods with same label "app" }'


def test_at_most_k_per_zone():
    zones = [node(f"{z}{i}", cpu="8", labels={ZONE: z}) for z in "abc" for i in range(2)]
    pods = [pod(f"w{i}", labels={"app": "web"}) for i in range(7)]
    plan = plan_with(LIMIT, zones + pods)
    per_zone = Counter(v[0] for v in plan.assignments.values())
    assert per_zone == {"a": 2, "b": 2, "c": 2}
    assert len(plan.unschedulable) == 1


def test_at_most_k_counts_bound_pods_and_only_the_same_label():
    zones = [node("a1", cpu="8", labels={ZONE: "a"}), node("b1", cpu="8", labels={ZONE: "b"})]
    bound = [pod(f"old{i}", labels={"app": "web"}, node_name="a1") for i in range(2)]
    others = [pod(f"db{i}", labels={"app": "db"}, node_name="a1") for i in range(3)]
    pods = [pod(f"w{i}", labels={"app": "web"}) for i in range(2)]
    plan = plan_with(LIMIT, zones + bound + others + pods)
    assert set(plan.assignments.values()) == {"b1"}
    solo = plan_with(LIMIT, zones + bound + [pod("w9", labels={"app": "web"}, nodeSelector={ZONE: "a"})])
    assert "already holds the limit of 2 pod(s) (t.policy:2 (policy per-zone))" in solo.unschedulable["default/w9"][0]


def test_at_most_k_is_checked_before_use():
    assert "leaves no room at all" in problems('policy a { applies to all pods\n at most 0 per node of pods with same label "app" }')[0]


def test_cp_sat_model_alone_respects_the_limit():
    from engine.planning.compile import compile_cluster
    from engine.solve.cpsat import ClassModel

    policies = parse(LIMIT, "t.policy")
    zones = [node(f"{z}{i}", cpu="8", labels={ZONE: z}) for z in "ab" for i in range(2)]
    docs = zones + [pod(f"w{i}", labels={"app": "web"}) for i in range(6)] + [pod(f"x{i}", labels={"app": "web"}, cpu="200m") for i in range(3)]
    compiled = compile_cluster(build_cluster([("t", d) for d in docs]), policy_rules(policies))
    model = ClassModel(compiled.problem)
    result = model.solve_tier(model.tier1(), 5.0, 1, 0)
    assert result.proven
    placed = result.placed
    per_zone = Counter()
    for (_, n), k in placed.items():
        per_zone[compiled.cluster.nodes[n].labels[ZONE]] += k
    assert per_zone == {"a": 2, "b": 2}


WITHIN = 'policy train { applies to pods where label "job" exists\n gang by label "job" min 4 within zone }'


def test_gang_within_one_zone():
    # room for 4 across the two zones, but only 3 in either one
    nodes = [node("a1", cpu="2", labels={ZONE: "a"}), node("a2", cpu="1", labels={ZONE: "a"}),
             node("b1", cpu="1", labels={ZONE: "b"})]
    job = [pod(f"j{i}", cpu="1", labels={"job": "t"}) for i in range(4)]
    assert plan_with(WITHIN, nodes + job).assignments == {}
    nodes.append(node("b2", cpu="3", labels={ZONE: "b"}))
    plan = plan_with(WITHIN, nodes + job)
    assert len(plan.assignments) == 4 and {v[0] for v in plan.assignments.values()} == {"b"}


def test_gang_within_follows_bound_members():
    nodes = [node("a1", cpu="8", labels={ZONE: "a"}), node("b1", cpu="8", labels={ZONE: "b"})]
    bound = [pod("j-old", cpu="1", labels={"job": "t"}, node_name="b1")]
    job = [pod(f"j{i}", cpu="1", labels={"job": "t"}, affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "preference": {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["a"]}]}}]}})
        for i in range(3)]
    plan = plan_with(WITHIN, nodes + bound + job)
    assert set(plan.assignments.values()) == {"b1"}


def test_cp_sat_model_alone_keeps_a_gang_in_one_zone():
    from engine.planning.compile import compile_cluster
    from engine.solve.cpsat import ClassModel

    nodes = [node(f"{z}{i}", cpu="2", labels={ZONE: z}) for z in "abc" for i in range(2)]
    job = [pod(f"j{i}", cpu="1", labels={"job": "t"}) for i in range(4)]
    policies = parse(WITHIN, "t.policy")
    compiled = compile_cluster(build_cluster([("t", d) for d in nodes + job], gangs=gang_rules(policies)),
                               policy_rules(policies))
    model = ClassModel(compiled.problem)
    result = model.solve_tier(model.tier1(), 5.0, 1, 0)
    placed = result.placed
    zones = {compiled.cluster.nodes[n].labels[ZONE] for (c, n), k in placed.items() if k}
    assert result.proven and sum(placed.values()) == 4 and len(zones) == 1


def test_pack_and_spread_nodes():
    nodes = [node(f"n{i}", cpu="4") for i in range(4)]

    def likes(i):  # each pod mildly prefers its own node (weight 1)
        return {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [f"n{i}"]}]}}]}}

    pods = [pod(f"p{i}", labels={"app": f"a{i}"}, affinity=likes(i)) for i in range(4)]
    assert len(set(plan_with("policy none { applies to all pods }", nodes + pods).assignments.values())) == 4
    packed = plan_with("policy p { applies to all pods\n pack nodes weight 10 }", nodes + pods)
    assert len(set(packed.assignments.values())) == 1
    plain = [pod(f"p{i}", labels={"app": f"a{i}"}) for i in range(4)]  # first-fit alone would use one node
    spread = plan_with("policy s { applies to all pods\n spread nodes weight 10 }", nodes + plain)
    assert len(set(spread.assignments.values())) == 4


def test_missing_allocatable_counts_as_zero_and_labels_compare_as_text():
    docs = [node("gpu", **{"nvidia.com/gpu": "4"}), node("cpu-only"), pod("p")]
    assert plan_with('policy p { applies to all pods\n require node allocatable "nvidia.com/gpu" == 0 }', docs).assignments == {"default/p": "cpu-only"}
    docs = [node("a", labels={"gen": "03"}), node("b", labels={"gen": "3"}), pod("p")]
    assert plan_with('policy p { applies to all pods\n require node label "gen" == 3 }', docs).assignments == {"default/p": "b"}


def test_gang_within_explains_the_zone_and_limits_cite_their_rule():
    nodes = [node("a1", cpu="2", labels={ZONE: "a"}), node("b1", cpu="2", labels={ZONE: "b"})]
    job = [pod(f"j{i}", cpu="1", labels={"job": "t"}) for i in range(4)]
    reason = " ".join(plan_with(WITHIN, nodes + job).unschedulable["default/j0"])
    assert "needs 4 in one topology.kubernetes.io/zone domain" in reason and "only 2 fit" in reason
    assert "had no room left" not in reason
    zones = [node(f"{z}1", cpu="8", labels={ZONE: z}) for z in "ab"]
    plan = plan_with(LIMIT, zones + [pod(f"w{i}", labels={"app": "web"}) for i in range(5)])
    [lost] = plan.unschedulable.values()
    assert any("at most 2 per topology.kubernetes.io/zone" in r and "t.policy:2 (policy per-zone)" in r for r in lost)


def test_minimize_cost_from_per_resource_prices():
    # a cpu-heavy pod is cheapest where cpu is cheap, a memory-heavy one where memory is
    cpu_cheap = node("cpu-cheap", cpu="16", memory="64Gi")
    mem_cheap = node("mem-cheap", cpu="16", memory="64Gi")
    cpu_cheap["metadata"]["annotations"] = {"price/cpu": "0.02", "price/gib": "0.010"}
    mem_cheap["metadata"]["annotations"] = {"price/cpu": "0.05", "price/gib": "0.002"}
    text = ('policy priced { applies to all pods\n'
            ' minimize cost "cpu" at node annotation "price/cpu", "memory" at node annotation "price/gib" weight 100 }')
    docs = [cpu_cheap, mem_cheap, pod("crunch", cpu="8", memory="1Gi"), pod("cache", cpu="1", memory="32Gi")]
    plan = plan_with(text, docs)
    assert plan.assignments == {"default/crunch": "cpu-cheap", "default/cache": "mem-cheap"}
    assert "priced twice" in problems('policy a { applies to all pods\n minimize cost "cpu" at node label "p", "cpu" at node label "q" weight 5 }')[0]


def test_gang_by_podgroup_within_zone():
    from testkit.manifests import podgroup

    nodes = [node("a1", cpu="2", labels={ZONE: "a"}), node("b1", cpu="2", labels={ZONE: "b"})]
    job = [pod(f"j{i}", cpu="1", labels={"scheduling.x-k8s.io/pod-group": "pg"}) for i in range(3)]
    docs = nodes + [podgroup("pg", 3)] + job
    text = 'policy zonal { applies to all pods\n gang by podgroup within zone }'
    assert len(plan_with("policy none { applies to all pods }", docs).assignments) == 3  # across zones it fits
    assert plan_with(text, docs).assignments == {}  # in one zone it does not
    docs[1] = node("b1", cpu="3", labels={ZONE: "b"})
    assert set(plan_with(text, docs).assignments.values()) == {"b1"}


def test_separation_from_running_pods_cites_the_policy():
    docs = [node("a"), pod("old", labels={"app": "web"}, node_name="a"), pod("new", labels={"app": "web"})]
    plan = plan_with('policy ha { applies to all pods\n separate from pods with same label "app" per node }', docs)
    assert plan.unschedulable["default/new"] == [
        "0/1 nodes are available: 1 node(s) didn't match pod anti-affinity rules (t.policy:2 (policy ha))."]


def test_every_ast_node_has_a_position():
    text = ('policy p {\n  applies to pods where not (namespace == "a" or label "x" exists) and priority > 1\n'
            '  require (node label "a" exists or node name == "n") and not node taint "t" exists\n}\n')
    [policy] = parse(text, "x.policy")

    def walk(node):
        yield node
        for name in ("left", "right", "inner", "expr"):
            child = getattr(node, name, None)
            if child is not None:
                yield from walk(child)

    nodes = [n for s in policy.statements for n in walk(s)]
    assert len(nodes) > 10 and all(isinstance(n.pos, A.Pos) and n.pos.line >= 1 for n in nodes)
