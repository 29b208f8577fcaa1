"""A gang's topology levels (issue 49, point 1): one domain of a required level, the fewest domains of preferred
levels (the first first), at least N members per domain of a level, for policy gangs and native groups alike. Each
test would fail if its rule were ignored; plans are checked against the hard rules by `least_violations` and the
independent checker."""
from __future__ import annotations

import io
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from engine.kinds.gangs import GangSpan
from engine.model.ir import Rules
from engine.output import print_table
from engine.planning.planner import Options, TimeInputs, plan_batch
from engine.policy.lower import lower
from engine.policy.sources import PolicyError, check_sources
from engine.reading.load import build_cluster
from engine.solve import solve
from engine.solve.greedy import greedy
from engine.solve.problem import NO_DOMAIN, GangRow, LeastPerDomain, PodClass, PreferredLevel, Problem
from engine.solve.topology import least_violations, span_cost
from engine.time.timeline import seconds
from testkit.checker import check_plan
from testkit.manifests import in_group, native_group, node, pod

HOST = "kubernetes.io/hostname"


def rules(text: str):
    return lower(check_sources({"t.policy": text}))


def gang_policy(topology: str, min_member: int = 4) -> str:
    return f'policy g {{\n  applies to pods where label "job" exists\n  gang by label "job" min {min_member} {topology}\n}}\n'


def plan_for(docs: list[dict], policy: str | None = None, time_limit: float = 5):
    found = rules(policy) if policy else None
    cluster = build_cluster([(f"doc{i}", d) for i, d in enumerate(docs)], gangs=found.gangs if found else None)
    plan = plan_batch(cluster, found or Rules(), Options(time_limit=time_limit, workers=1))
    assert check_plan(docs, plan.assignments) == []
    return plan


def gpu_node(name: str, gpus: int, **labels: str) -> dict:
    return node(name, cpu="64", labels={HOST: name, **labels}, **{"nvidia.com/gpu": str(gpus)})


def job(name: str, count: int, gpus: int = 1, **extra) -> list[dict]:
    return [pod(f"{name}-{i}", cpu="1", labels={"job": name}, requests={"nvidia.com/gpu": str(gpus)}, **extra)
            for i in range(count)]


def where(plan, name: str, racks: dict[str, str] | None = None) -> Counter:
    at = [n for k, n in plan.assignments.items() if k.startswith(f"default/{name}-")]
    return Counter(racks[n] if racks else n for n in at)


# --- the language --------------------------------------------------------------------------------------------------

def test_the_gang_statement_takes_levels_and_a_minimum_per_domain() -> None:
    found = rules(gang_policy('within label "block" prefer within label "rack", node with at least 2 per node'))
    docs = [gpu_node("n1", 4, block="b1", rack="r1"), *job("j", 4)]
    cluster = build_cluster([(f"d{i}", d) for i, d in enumerate(docs)], gangs=found.gangs)
    gang = cluster.gangs["default/job=j"]
    assert (gang.within, gang.prefer, gang.least) == ("block", ("rack", HOST), (HOST, 2))


@pytest.mark.parametrize("topology, message, column", [
    ('prefer within label "rack", label "rack"', "already named by prefer within", 54),
    ('within zone prefer within zone', "already named by within", 73),
    ('prefer within label "bad key!"', "invalid topology key 'bad key!'", 60),
    ('with at least 0 per node', "with at least 0: must be at least 1", 46),
])
def test_a_bad_level_is_an_error_at_its_place(topology, message, column) -> None:
    with pytest.raises(PolicyError) as err:
        rules(gang_policy(topology))
    text = str(err.value)
    assert message in text and "t.policy:3:" in text, text


def test_gang_by_podgroup_needs_some_topology() -> None:
    with pytest.raises(PolicyError, match="gang by podgroup adds a topology"):
        rules('policy p {\n  applies to all pods\n  gang by podgroup\n}\n')


def test_prefer_alone_still_starts_a_node_preference_after_a_gang() -> None:
    text = ('policy p {\n  applies to pods where label "job" exists\n  gang by label "job" min 2\n'
            '  prefer node label "fast" == "yes" weight 5\n}\n')
    assert rules(text).placement  # parsed as two statements, not as a gang level


# --- preferred levels: the fewest domains --------------------------------------------------------------------------

def racked(spec: dict[str, list[tuple[str, int]]]) -> tuple[list[dict], dict[str, str]]:
    """Nodes by rack: {"r1": [("n1", 4), …]} -> the node documents and node -> rack."""
    docs, racks = [], {}
    for rack, members in spec.items():
        for name, gpus in members:
            docs.append(gpu_node(name, gpus, rack=rack))
            racks[name] = rack
    return docs, racks


def test_a_gang_that_fits_one_rack_is_placed_in_one() -> None:
    """Four racks of two 2-GPU nodes; 4 × 1 GPU fits each rack. Without the preference first fit may still pick one
    rack, so a filler makes the first rack's first node half full: first fit then starts there and spills into the
    next rack; the preference keeps the job in one rack."""
    docs, racks = racked({f"r{i}": [(f"n{i}a", 2), (f"n{i}b", 2)] for i in range(4)})
    filler = pod("filler", cpu="1", requests={"nvidia.com/gpu": "1"}, node_name="n0a")
    plan = plan_for([*docs, filler, *job("j", 4)], gang_policy('prefer within label "rack"'))
    assert sum(where(plan, "j").values()) == 4
    assert len(where(plan, "j", racks)) == 1
    without = plan_for([*docs, filler, *job("j", 4)], gang_policy(""))
    assert sum(where(without, "j").values()) == 4  # (the plan without the preference may span racks)


def test_when_no_rack_holds_the_job_it_spans_the_fewest_racks() -> None:
    """Racks of 4, 4, 2 and 2 free GPUs (filled unevenly), a job of 8: no rack holds it; the fewest racks is 2 (the two
    4s), never 3 or 4."""
    docs, racks = racked({"r1": [("a", 2), ("b", 2)], "r2": [("c", 1), ("d", 1)], "r3": [("e", 2), ("f", 2)],
                          "r4": [("g", 1), ("h", 1)]})
    plan = plan_for([*docs, *job("j", 8)], gang_policy('prefer within label "rack"', 8))
    assert where(plan, "j", racks) == Counter({"r1": 4, "r3": 4})


def test_levels_are_minimised_widest_first_then_tighter() -> None:
    """prefer within rack, node: one rack first, then the fewest nodes inside it. Rack r1 has four 1-GPU nodes, rack
    r2 one 4-GPU node and one 1-GPU node: both racks hold the 4-GPU job, r2 on one node."""
    docs, _ = racked({"r1": [(f"a{i}", 1) for i in range(4)], "r2": [("big", 4), ("small", 1)]})
    plan = plan_for([*docs, *job("j", 4)], gang_policy('prefer within label "rack", node'))
    assert where(plan, "j") == Counter({"big": 4})


def test_a_required_level_holds_while_the_preferred_one_is_minimised_inside_it() -> None:
    """within block, prefer within rack: block b1's racks hold 2 + 2, block b2's one rack 3. A job of 4 must stay in
    one block (b1, the only one with room), spanning its two racks; a job of 3 goes to b2's single rack."""
    docs = [gpu_node("a", 2, block="b1", rack="r1"), gpu_node("b", 2, block="b1", rack="r2"),
            gpu_node("c", 3, block="b2", rack="r3")]
    policy = gang_policy('within label "block" prefer within label "rack"', 3)
    plan = plan_for([*docs, *job("four", 4)], policy)
    assert where(plan, "four") == Counter({"a": 2, "b": 2})
    plan = plan_for([*docs, *job("three", 3)], policy)
    assert where(plan, "three") == Counter({"c": 3})


def test_the_batch_chooses_racks_jointly() -> None:
    """Three jobs that each prefer one rack, in line a (4 GPUs), b (4), c (5); racks of 8 (two 4-GPU nodes) and 5
    (3 + 2) free GPUs. Best fit one job at a time puts a in the 5-rack, b in the 8-rack, and c has no rack left that
    holds it (4 + 1 across both); jointly a and b share the 8-rack and c takes the 5-rack: every job in one rack."""
    docs, racks = racked({"r1": [("a1", 4), ("a2", 4)], "r2": [("b1", 3), ("b2", 2)]})
    jobs = []
    for minute, (name, size) in enumerate((("a", 4), ("b", 4), ("c", 5))):
        for d in job(name, size):
            d["metadata"]["creationTimestamp"] = f"2026-11-29T10:0{minute}:00Z"
            jobs.append(d)
    plan = plan_for([*docs, *jobs], gang_policy('prefer within label "rack"', 4))
    assert {name: len(where(plan, name, racks)) for name in "abc"} == {"a": 1, "b": 1, "c": 1}
    assert where(plan, "c", racks) == Counter({"r2": 5})


# --- at least N per domain -----------------------------------------------------------------------------------------

def test_at_least_n_per_node_refuses_a_spread_of_fewer() -> None:
    """with at least 4 per node: three nodes with 3 free GPUs each hold 9, but no node 4: the job of 8 waits. Two
    4-GPU nodes take it as 4 + 4."""
    small = [gpu_node(f"s{i}", 3) for i in range(3)]
    policy = gang_policy('with at least 4 per node', 8)
    assert not where(plan_for([*small, *job("j", 8)], policy), "j")
    assert sum(where(plan_for([*small, *job("j", 8)], gang_policy("", 8)), "j").values()) == 8  # without: it fits
    plan = plan_for([*small, gpu_node("x", 4), gpu_node("y", 4), *job("j", 8)], policy)
    assert where(plan, "j") == Counter({"x": 4, "y": 4})


def test_bound_members_count_towards_a_domains_minimum() -> None:
    """A member already runs on node x; with at least 2 per node, the new one joins it there (2 on x), not node a,
    which comes first and has room (1 there would be too few), and is not refused (x's bound member counts)."""
    docs = [gpu_node("a", 1), gpu_node("x", 2), pod("j-old", cpu="1", labels={"job": "j"},
                                                   requests={"nvidia.com/gpu": "1"}, node_name="x"), *job("j", 1)]
    plan = plan_for(docs, gang_policy("with at least 2 per node", 2))
    assert where(plan, "j") == Counter({"x": 1})


def test_native_groups_take_a_policys_preferred_levels() -> None:
    """A scheduling.k8s.io PodGroup keeps its own required topology (block) and a `gang by podgroup` policy adds the
    preferred rack (1.38's objects carry one key per group; levels below it come from policy)."""
    docs = [gpu_node("a", 2, block="b1", rack="r1"), gpu_node("b", 2, block="b1", rack="r2"),
            gpu_node("c", 4, block="b1", rack="r3"), gpu_node("d", 8, block="b2", rack="r4")]
    group = native_group("g", 4, topology="block")
    members = [pod(f"g-{i}", cpu="1", requests={"nvidia.com/gpu": "1"}, schedulingGroup=in_group("g"))
               for i in range(4)]
    blocker = pod("blocker", cpu="1", requests={"nvidia.com/gpu": "8"}, node_name="d")
    policy = 'policy p {\n  applies to all pods\n  gang by podgroup prefer within label "rack"\n}\n'
    plan = plan_for([*docs, blocker, group, *members], policy)
    assert Counter(plan.assignments.values()) == Counter({"c": 4})


# --- the solver: every plan it returns keeps the hard levels -------------------------------------------------------

@st.composite
def level_problems(draw) -> Problem:
    nodes = draw(st.integers(2, 8))
    racks = [draw(st.integers(0, 2)) for _ in range(nodes)]
    free = [[draw(st.integers(0, 4))] for _ in range(nodes)]
    classes, gangs = [], []
    for g in range(draw(st.integers(1, 3))):
        count = draw(st.integers(1, 6))
        classes.append(PodClass(count, (1,), 1, tuple(range(nodes))))
        least = LeastPerDomain(1, draw(st.integers(1, 3))) if draw(st.booleans()) else None
        prefer = (PreferredLevel(0),) if draw(st.booleans()) else ()
        within = 0 if draw(st.booleans()) else None
        gangs.append(GangRow((g,), draw(st.integers(1, count)), within, None, prefer, least))
    for c in range(len(gangs)):
        classes[c].gang = c
    return Problem(resources=["gpu"], free=free, classes=classes, partitions=[racks, list(range(nodes))], gangs=gangs)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(level_problems())
def test_every_plan_keeps_one_required_domain_and_each_domains_minimum(problem: Problem) -> None:
    solution = solve(problem, time_limit=2, workers=1)
    placed = solution.placed
    assert least_violations(problem, placed) == []
    for gang in problem.gangs:
        nodes = [n for (c, n), k in placed.items() if k and c in gang.classes]
        total = sum(k for (c, _), k in placed.items() if c in gang.classes)
        assert total == 0 or total >= gang.need
        if gang.partition is not None and nodes:
            assert len({problem.partitions[gang.partition][n] for n in nodes}) == 1
            assert NO_DOMAIN not in {problem.partitions[gang.partition][n] for n in nodes}
    assert span_cost(problem, placed) >= 0


# --- explanations name the topology --------------------------------------------------------------------------------

def test_a_gang_spanning_racks_is_told_why_in_the_plan() -> None:
    """The job of 8 spans racks r1 and r3 (4 free GPUs each, the most in one rack): the plan's topology says so, names
    the rack with the most room, and that 2 racks are the fewest (the plan is proven)."""
    docs, _ = racked({"r1": [("a", 2), ("b", 2)], "r2": [("c", 1), ("d", 1)], "r3": [("e", 2), ("f", 2)]})
    plan = plan_for([*docs, *job("j", 8)], gang_policy('prefer within label "rack", node', 8))
    span = plan.topology["default/job=j"]
    assert dict(span.levels) == {"rack": ("r1", "r3"), HOST: ("a", "b", "e", "f")}
    assert "spans 2 rack domains (r1, r3): no one rack domain has room for its 8 pending member(s)" in span.note
    assert "(rack r1 has room for 4, the most); the fewest that fit; preferred level rack not held" in span.note
    assert plan.to_dict()["topology"]["default/job=j"]["levels"]["rack"] == ["r1", "r3"]
    buffer = io.StringIO()
    print_table(plan, Console(width=200, file=buffer, highlight=False, color_system=None))
    table = buffer.getvalue()
    assert "Gang topology (1)" in table and "rack: r1, r3; kubernetes.io/hostname: a, b, e, f" in table


def test_a_gang_in_one_rack_has_no_note_and_a_required_level_names_its_best_domain() -> None:
    docs, _ = racked({"r1": [("a", 2), ("b", 2)], "r2": [("c", 3)]})
    plan = plan_for([*docs, *job("j", 4)], gang_policy('prefer within label "rack"'))
    assert plan.topology["default/job=j"] == GangSpan((("rack", ("r1",)),))
    plan = plan_for([*docs, *job("j", 5)], gang_policy('within label "rack"', 5))
    reasons = " ".join(plan.unschedulable["default/j-0"])
    assert "only 4 fit in one rack domain, even alone (rack r1 has room for 4, the most)" in reasons


# --- topology with priority, quotas and time -----------------------------------------------------------------------

def native_job(name: str, size: int, gpus: int, ns: str = "default", topology: str = "rack", **extra) -> list[dict]:
    group = native_group(name, size, ns=ns, topology=topology, priority=extra.pop("priority", None))
    return [group, *[pod(f"{name}-{i}", cpu="1", ns=ns, requests={"nvidia.com/gpu": str(gpus)},
                         schedulingGroup=in_group(name), **extra) for i in range(size)]]


def test_the_higher_priority_gang_gets_the_only_rack_that_holds_it() -> None:
    """Rack r1 holds 4 GPUs, r2 only 2: of two 4-GPU gangs that each keep to one rack, the younger one of priority
    1000 takes r1, the older one of priority 0 waits (in line, the older would have gone first)."""
    docs, racks = racked({"r1": [("a", 2), ("b", 2)], "r2": [("c", 2)]})
    old = native_job("old", 4, 1, priority=0)
    new = native_job("new", 4, 1, priority=1000)
    for d in old:
        d["metadata"]["creationTimestamp"] = "2026-11-29T10:00:00Z"
    plan = plan_for([*docs, *old, *new])
    assert where(plan, "new", racks) == Counter({"r1": 4})
    assert not where(plan, "old")


def test_a_tenants_quota_keeps_its_gang_out_of_the_rack_another_tenant_gets() -> None:
    """Team a may use 2 GPUs (quota max): its 4-GPU gang cannot start, and team b's gang takes the only rack."""
    docs, _ = racked({"r1": [("a", 2), ("b", 2)]})
    quota = ('policy team-a {\n  applies to pods where namespace == "team-a"\n  quota max "nvidia.com/gpu" 2\n}\n'
             'policy team-b {\n  applies to pods where namespace == "team-b"\n  quota max "nvidia.com/gpu" 8\n}\n')
    plan = plan_for([*docs, *native_job("ga", 4, 1, ns="team-a"), *native_job("gb", 4, 1, ns="team-b")], quota)
    placed = Counter(k.split("/")[0] for k in plan.assignments)
    assert placed == Counter({"team-b": 4})


def test_a_gang_that_waits_is_reserved_in_one_rack() -> None:
    """Two 8-GPU members that keep to one rack; all four 8-GPU nodes are busy: rack A's free at 12:10 and 14:00, rack
    B's at 12:20 and 12:30. Without the rack, the two earliest (12:10 in A, 12:20 in B) would be held from 12:20; in
    one rack, B's pair from 12:30."""
    start = "2026-11-25T11:00:00Z"

    def busy(node_name: str, until: str) -> dict:
        doc = pod(f"busy-{node_name}", cpu="1", requests={"nvidia.com/gpu": "8"}, node_name=node_name)
        doc["status"]["startTime"] = start
        doc["spec"]["activeDeadlineSeconds"] = int(seconds(f"2026-11-25T{until}:00Z") - seconds(start))
        return doc

    nodes = [gpu_node("n1", 8, rack="A"), gpu_node("n2", 8, rack="A"), gpu_node("n3", 8, rack="B"),
             gpu_node("n4", 8, rack="B")]
    ends = {"n1": "12:10", "n2": "14:00", "n3": "12:20", "n4": "12:30"}
    docs = [*nodes, *[busy(n, t) for n, t in ends.items()], *native_job("train", 2, 8)]
    cluster = build_cluster([(f"doc{i}", d) for i, d in enumerate(docs)])
    got = plan_batch(cluster, options=Options(time_limit=5.0, workers=1),
                     time_inputs=TimeInputs(seconds("2026-11-25T12:00:00Z")))
    [held] = [r for r in got.reservations if r.holder == "default/train"]
    assert held.start == seconds("2026-11-25T12:30:00Z")
    assert sorted(node for _, node in held.pods) == ["n3", "n4"]


# --- the greedy start alone keeps the levels (the solver's tier only improves on it) ----------------------------------

def _gang_problem(racks: list[int], free: list[int], count: int, prefer: tuple[PreferredLevel, ...] = (),
                  within: int | None = None, least: LeastPerDomain | None = None,
                  partitions: list[list[int]] | None = None) -> Problem:
    nodes = len(free)
    problem = Problem(resources=["gpu"], free=[[f] for f in free], classes=[PodClass(count, (1,), 1, tuple(range(nodes)))],
                      partitions=partitions or [racks, list(range(nodes))], gangs=[GangRow((0,), count, within, None,
                                                                                           prefer, least)])
    problem.classes[0].gang = 0
    return problem


def _racks_used(problem: Problem, placed: dict[tuple[int, int], int], partition: int = 0) -> Counter:
    used: Counter = Counter()
    for (_, n), k in placed.items():
        used[problem.partitions[partition][n]] += k
    return +used


def test_the_greedy_start_puts_a_gang_in_the_rack_that_fits_it_best() -> None:
    """Racks of 2, 4 and 6 free GPUs (node order: the 2 first): first fit alone spans racks 0 and 1; the preferred
    level's start tries each rack best fit first and takes rack 1, which the job fills exactly."""
    racks, free = [0, 0, 1, 1, 2, 2], [1, 1, 2, 2, 3, 3]
    plain = _gang_problem(racks, free, 4)
    assert len(_racks_used(plain, greedy(plain))) > 1  # without the level, the start spans racks
    problem = _gang_problem(racks, free, 4, prefer=(PreferredLevel(0),))
    assert _racks_used(problem, greedy(problem)) == Counter({1: 4})


def test_the_greedy_start_spans_the_fewest_racks_largest_first() -> None:
    """No rack holds 8 (free 2, 4, 2, 4 by rack): the start takes the two racks of 4, never three or four racks."""
    racks, free = [0, 0, 1, 1, 2, 2, 3, 3], [1, 1, 2, 2, 1, 1, 2, 2]
    problem = _gang_problem(racks, free, 8, prefer=(PreferredLevel(0),))
    assert _racks_used(problem, greedy(problem)) == Counter({1: 4, 3: 4})


def test_the_greedy_start_keeps_the_required_block_and_prefers_a_rack_inside_it() -> None:
    """Blocks 0 and 1; block 0's racks hold 3 and 3, block 1's rack 2 holds 4. Within a block, prefer a rack: the
    job of 4 goes to block 1's rack 2 (one rack), not across block 0's two racks."""
    blocks, racks, free = [0, 0, 0, 0, 1, 1], [0, 0, 1, 1, 2, 2], [2, 1, 2, 1, 2, 2]
    problem = _gang_problem(racks, free, 4, prefer=(PreferredLevel(1),), within=0,
                            partitions=[blocks, racks, list(range(6))])
    placed = greedy(problem)
    assert _racks_used(problem, placed, 1) == Counter({2: 4})
    assert least_violations(problem, placed) == []


def test_the_greedy_start_keeps_at_least_n_per_node() -> None:
    """At least 2 per node: nodes of 1 free GPU take none; the 4 go two by two (or four) onto nodes of 2+."""
    free = [1, 1, 1, 2, 2, 4]
    problem = _gang_problem([0] * 6, free, 4, least=LeastPerDomain(1, 2))
    placed = greedy(problem)
    assert sum(placed.values()) == 4
    assert least_violations(problem, placed) == []
    assert all(k >= 2 for k in placed.values() if k)
