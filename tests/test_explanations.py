"""Explanations name the constraint that blocks a pod in the batch's plan; "no room" only where room lacks.

They assert the facts a plan's `Explanation` carries (which check, which rule, how many nodes, whose pods took
the room), not the sentences made from them."""

from __future__ import annotations

from engine.solve.problem import Check
from runner import run
from testkit.manifests import affinity, anti, node, pod, term

ZONE = "topology.kubernetes.io/zone"


def test_required_affinity_is_named_not_no_room():
    # zone a has room for the cache only; zone b has room but no cache: the worker's affinity blocks it
    docs = [node("a1", cpu="1", labels={ZONE: "a"}), node("b1", cpu="8", labels={ZONE: "b"}),
            pod("cache", cpu="1", labels={"app": "cache"}, priority=100, nodeSelector={ZONE: "a"}),
            pod("worker", cpu="1", labels={"app": "worker"}, affinity=affinity(term({"app": "cache"}, ZONE)))]
    plan = run(docs)
    assert plan.assignments == {"default/cache": "a1"}
    facts = plan.details.explanations["default/worker"]
    assert facts.count(Check.AFFINITY) == 1  # b1: room, but no cache in zone b
    [rule] = facts.rules(Check.AFFINITY)
    assert "required affinity" in rule and "app In [cache]" in rule and "spec.affinity.podAffinity" in rule
    assert facts.count(Check.RESOURCES) == 1  # a1 only
    assert facts.taken == {100: 1}  # the cache took a1


def test_required_anti_affinity_is_named_with_its_side():
    docs = [node("a1", cpu="8", labels={ZONE: "a"}), node("a2", cpu="8", labels={ZONE: "a"})]
    docs += [pod("db", labels={"app": "db"}, priority=100, affinity=anti(term({"app": "web"}, ZONE))),
             pod("web", labels={"app": "web"})]
    plan = run(docs)
    assert plan.assignments == {"default/db": "a1"} or plan.assignments == {"default/db": "a2"}
    facts = plan.details.explanations["default/web"]
    assert facts.count(Check.SEPARATION) == 2
    [rule] = facts.rules(Check.SEPARATION)
    assert "required anti-affinity" in rule and "app In [web]" in rule  # the db's rule, which selects web
    assert facts.count(Check.RESOURCES) == 0 and not facts.taken


def test_host_ports_are_named_not_no_room():
    port = [{"containerPort": 80, "hostPort": 8080}]
    docs = [node("n1", cpu="8"), pod("a", ports=port, labels={"app": "a"}, priority=10),
            pod("b", ports=port, labels={"app": "b"})]
    plan = run(docs)
    facts = plan.details.explanations["default/b"]
    assert facts.count(Check.PORTS) == 1
    assert facts.count(Check.RESOURCES) == 0 and not facts.taken


def test_room_taken_says_by_whom():
    docs = [node("n1", cpu="1"), pod("hi", cpu="1", labels={"p": "hi"}, priority=100),
            pod("lo", cpu="1", labels={"p": "lo"})]
    facts = run(docs).details.explanations["default/lo"]
    assert facts.count(Check.RESOURCES) == 1
    assert facts.taken == {100: 1} and facts.priority == 0  # one pod of higher priority took it


def test_explain_says_why_this_node(tmp_path):
    import json

    import yaml
    from click.testing import CliRunner

    from engine.cli import main
    from testkit.manifests import expr

    preferred = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 40, "preference": {"matchExpressions": [expr("disk", "In", "ssd")]}}]}}
    docs = [node("hdd", cpu="8", labels={"disk": "hdd"}), node("ssd", cpu="8", labels={"disk": "ssd"}),
            pod("db", labels={"app": "db"}, affinity=preferred)]
    snapshot = tmp_path / "snap.yaml"
    snapshot.write_text(yaml.safe_dump_all(docs))
    result = CliRunner().invoke(main, ["explain", "--cluster", str(snapshot), "db", "-o", "json"])
    out = json.loads(result.stdout)
    assert out["node"] == "ssd"
    [term] = [t for t in out["score"] if "nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]" in t["term"]]
    assert term["points"] == 40
    assert out["score"][-1]["points"] == 40  # the best any candidate scores: this one



def test_the_score_breakdown_is_what_the_solver_weighed():
    # on every candidate node, not only the plan's: the terms explain names add up to that node's score in the
    # solver's problem, and its last line is the best of those scores
    from engine.planning.explain import score_breakdown
    from testkit.manifests import expr

    def preferred(weight: int, labels: dict) -> dict:
        return {"weight": weight, "podAffinityTerm": term(labels, ZONE)}
    prefer = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                  {"weight": 40, "preference": {"matchExpressions": [expr("disk", "In", "ssd")]}}]},
              "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [preferred(30, {"app": "cache"})]},
              "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [preferred(50, {"app": "noisy"})]}}
    soft = [{"key": "soft", "value": "x", "effect": "PreferNoSchedule"}]
    docs = [node(f"n{i}", cpu="8", labels={ZONE: "abcd"[i % 4], "disk": "ssd" if i % 3 == 0 else "hdd"},
                 taints=soft if i % 4 == 1 else None) for i in range(8)]
    docs += [pod("cache", labels={"app": "cache"}, node_name="n2"), pod("noisy", labels={"app": "noisy"}, node_name="n4"),
             pod("web", labels={"app": "web"}, affinity=prefer)]
    compiled = run(docs).details.compiled
    assert compiled is not None
    [c] = [c for c, info in enumerate(compiled.classes) if info.sample.name == "web"]
    cls = compiled.problem.classes[c]
    said = {compiled.cluster.nodes[n].name: score_breakdown(compiled, c, compiled.cluster.nodes[n].name)
            for n in cls.candidates}
    assert len(set(cls.scores)) > 3  # the nodes score apart: a term read off the wrong node would not add up
    for n, score in zip(cls.candidates, cls.scores):
        *terms, (_, best) = said[compiled.cluster.nodes[n].name]
        assert sum(points for _, points in terms) == score and best == max(cls.scores)
    n6 = dict(said["n6"])  # ssd, in the cache's zone c
    assert [p for t, p in n6.items() if "nodeAffinity.preferred" in t] == [40]
    assert [p for t, p in n6.items() if "podAffinity.preferred" in t] == [30]
    n0 = dict(said["n0"])  # ssd, in the noisy pod's zone a
    assert [p for t, p in n0.items() if "podAntiAffinity.preferred" in t] == [-50]
    assert any("PreferNoSchedule" in t and p < 0 for t, p in said["n1"])

def gang_behind_higher_priority_pods() -> list[dict]:
    """4 nodes of 4 cpu; two 4-cpu pods of priority 100 take two of them; a gang of four 3-cpu members (minMember
    4) fits alone but only two of its members fit beside them."""
    from testkit.manifests import POD_GROUP_LABEL, podgroup

    docs = [node(f"n{i}", cpu="4") for i in range(4)] + [pod(f"h{i}", cpu="4", priority=100) for i in range(2)]
    return docs + [podgroup("g", 4)] + [pod(f"g{i}", cpu="3", labels={POD_GROUP_LABEL: "g"}) for i in range(4)]


def test_a_gang_left_out_of_a_proven_plan_is_told_why_not_the_time_limit():
    plan = run(gang_behind_higher_priority_pods())
    assert plan.stats.status == "OPTIMAL" and set(plan.assignments) == {"default/h0", "default/h1"}
    said = " ".join(plan.unschedulable["default/g0"])
    assert "time limit" not in said
    assert "2 node(s) had no room left in this batch's plan (Insufficient cpu)" in said
    assert "2 node(s) passed the filters and had room for a member, but not the whole gang" in said
    assert ("gang default/g could not be completed: needs 4 (minMember 4); only 2 of its 4 pending member(s) fit "
            "beside the rest of the plan (4 fit alone), and the plan is proven optimal") in said
    assert "the room on those nodes went to 2 higher-priority pod(s) of this batch" in said


def test_a_gang_left_out_of_a_plan_not_proven_keeps_the_time_limit_wording(monkeypatch):
    import dataclasses

    from engine.planning import plan as plan_module
    from engine.solve.problem import Status

    real = plan_module.solve
    monkeypatch.setattr(plan_module, "solve", lambda *a, **kw: dataclasses.replace(real(*a, **kw), status=Status.FEASIBLE))
    plan = run(gang_behind_higher_priority_pods())
    said = " ".join(plan.unschedulable["default/g0"])
    assert "2 node(s) passed the filters and had room, but the solver did not place it within the time limit" in said
    assert "4 fit alone, but the rest of the batch took the room" in said and "proven" not in said


def test_classes_left_out_after_the_time_for_explanations_are_said_so_and_back_off() -> None:
    """Explanations replay the plan node by node for every class left out: bounded by the plan's time limit plus a
    grace (a 5,000-node batch whose start was cut short once spent 44 s on them). Past it, a class gets the static
    filters' part and its other nodes said as not checked, with no kind to wait on (the queue backs it off)."""
    from clocks import StoppedClock
    from engine.planning.compile import Deadline, compile_cluster
    from engine.planning.plan import plan_from_solution
    from engine.reading.load import build_cluster
    from engine.solve import solve

    docs = [node("n1", cpu="1"), node("n2", cpu="1"), node("small", cpu="500m")]
    docs += [pod(f"p{i}", cpu="1") for i in range(3)]
    compiled = compile_cluster(build_cluster([("t", d) for d in docs]))
    solution = solve(compiled.problem, time_limit=5, workers=1)
    clock = StoppedClock()
    on_time = plan_from_solution(compiled, solution, 0.0, explain_by=Deadline(clock.now + 5, clock))
    late = plan_from_solution(compiled, solution, 0.0, explain_by=Deadline(clock.now, clock))
    assert on_time.assignments == late.assignments and len(late.unschedulable) == 1
    (key,) = late.unschedulable
    assert on_time.details.explanations[key].plugins() == {"NodeResourcesFit"}
    assert late.details.explanations[key].plugins() is None
    assert late.unschedulable[key] == ["0/3 nodes are available: 2 node(s) passed the filters; the cycle's time ran out "
                                       "before the plan was checked against them, 1 Insufficient cpu."]


def test_a_gang_short_of_members_is_rejected_before_the_nodes_and_its_message_does_not_change_as_they_fill():
    """As upstream's PreFilter (Coscheduling) and PreEnqueue (native gangs): a gang with fewer members pending
    than its quorum is told so alone, with no node counts, and the same words however full or tainted the nodes
    are and however many members have arrived: in the loop each change of the message is a status write on every
    waiting member."""
    from testkit.manifests import POD_GROUP_LABEL, podgroup

    def said(running: int, members: int, tainted: bool) -> tuple[str, frozenset[str] | None]:
        taints = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}] if tainted else []
        docs = [node(f"n{i}", cpu="4", taints=taints if i == 0 else []) for i in range(4)]
        docs += [pod(f"r{i}", cpu="4", node_name=f"n{i}") for i in range(running)]
        docs += [podgroup("g", 5)] + [pod(f"g{i}", cpu="1", labels={POD_GROUP_LABEL: "g"}) for i in range(members)]
        plan = run(docs)
        assert not any(k.startswith("default/g") for k in plan.assignments)
        return " ".join(plan.unschedulable["default/g0"]), plan.details.explanations["default/g0"].plugins()

    first, plugins = said(running=0, members=1, tainted=False)
    assert first == ("0/4 nodes are available: gang default/g could not be completed: waiting for 5 of its members "
                     "to be pending (minMember 5).")
    assert plugins == frozenset({"Coscheduling"})  # the queue wakes it on what helps a gang: a new member
    assert said(running=3, members=4, tainted=True)[0] == first
    # with its quorum pending, the nodes are looked at and counted again
    assert "Insufficient cpu" in said(running=3, members=5, tainted=False)[0]


def test_a_gang_short_of_members_is_told_so_before_any_other_prefilter():
    """The gang's verdict comes before every other PreFilter (upstream's PreEnqueue holds a native gang's pods before
    any PreFilter runs): a member whose claim is missing too is told what the gang waits for, and woken by what helps
    a gang, as its siblings are."""
    from testkit.manifests import POD_GROUP_LABEL, claims, podgroup

    group = {POD_GROUP_LABEL: "g"}
    docs = [node("n0"), podgroup("g", 3), pod("g0", labels=group), pod("g1", labels=group, resourceClaims=claims("gone"))]
    plan = run(docs)
    for key in ("default/g0", "default/g1"):
        assert plan.unschedulable[key] == ["0/1 nodes are available: gang default/g could not be completed: waiting for 3 "
                                           "of its members to be pending (minMember 3)."]
        assert plan.details.explanations[key].plugins() == frozenset({"Coscheduling"})
    plan = run([*docs, pod("g2", labels=group)])  # its quorum pending: the missing claim is what it is told
    assert "gone" in " ".join(plan.unschedulable["default/g1"])
