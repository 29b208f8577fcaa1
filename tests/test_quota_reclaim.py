"""Reclaim by preemption (issue 19, point 3): a tenant below its min evicts what other tenants use beyond theirs
(borrowed room first, lowest priority first, budgets kept, gangs whole), through the batch preemption; each rule
has a test that fails without it, and a property test judges random plans with the independent checker."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.model.ir import Rules
from engine.planning.planner import Options, plan_batch
from engine.policy.lower import lower
from engine.policy.sources import check_sources
from engine.reading.load import build_cluster
from testkit.checker import check_evictions, check_plan, check_reclaim
from testkit.manifests import budget, in_group, native_group, node, pod

QUOTA_A = "ElasticQuota team-a/quota"
QUOTA_B = "ElasticQuota team-b/quota"


def elastic_quota(ns: str, low: dict[str, str] | None = None, high: dict[str, str] | None = None) -> dict:
    spec = {k: v for k, v in (("min", low), ("max", high)) if v is not None}
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota",
            "metadata": {"name": "quota", "namespace": ns}, "spec": spec}


def plan_for(*docs: dict, policy: str = "", preemption: bool = True):
    rules = lower(check_sources({"test.policy": policy})) if policy else Rules()
    cluster = build_cluster([(f"doc{i}", d) for i, d in enumerate(docs)], gangs=rules.gangs)
    return plan_batch(cluster, rules, Options(time_limit=3, workers=1, preemption=preemption))


def victims(plan) -> set[str]:
    return {v.pod for v in plan.evictions}


def by_preemptor(plan) -> dict[str, list[str]]:
    return {k: [v.pod for v in p.victims] for k, p in plan.preemptions.items()}


def valid(docs: list[dict], plan) -> list[str]:
    """What the independent checker finds wrong: the plan once its victims are gone, the victims themselves, and
    who evicted whom under the quotas."""
    gone = victims(plan)
    remaining = [d for d in docs if f"{d['metadata'].get('namespace', 'default')}/{d['metadata']['name']}" not in gone]
    return (check_plan(remaining, plan.assignments) + check_evictions(docs, gone)
            + check_reclaim(docs, plan.assignments, by_preemptor(plan)))


def team_a_borrowing(nodes: int = 2, per_node: int = 4) -> list[dict]:
    """team-a (min 4, max 8) runs 8 one-cpu pods on 8 cpu, priorities 10..17 spread over the nodes (the four
    lowest on both nodes); team-b's min of 4 lies idle, borrowed."""
    docs = [*(node(f"n{i}", cpu=str(per_node)) for i in range(nodes)),
            elastic_quota("team-a", {"cpu": "4"}, {"cpu": "8"}), elastic_quota("team-b", {"cpu": "4"}, {"cpu": "8"})]
    return docs + [pod(f"a{i}", cpu="1", ns="team-a", node_name=f"n{i % nodes}", priority=10 + i) for i in range(8)]


def team_b(count: int, priority: int = 0, **extra) -> list[dict]:
    return [pod(f"b{i}", cpu="1", ns="team-b", priority=priority, **extra) for i in range(count)]


# --- the rule ----------------------------------------------------------------------------------------------------

def test_a_tenant_below_its_min_evicts_borrowed_room_lowest_priority_first() -> None:
    docs = team_a_borrowing() + team_b(4)
    plan = plan_for(*docs)
    assert sorted(plan.assignments) == [f"team-b/b{i}" for i in range(4)]
    assert victims(plan) == {f"team-a/a{i}" for i in range(4)}  # priorities 10-13: lowest first, whatever the node
    assert valid(docs, plan) == []
    off = plan_for(*docs, preemption=False)
    assert off.assignments == {} and not off.evictions


def test_reclaim_ignores_priority_and_names_both_quotas() -> None:
    docs = team_a_borrowing() + team_b(1, priority=-5)  # below every team-a pod: ordinary preemption could not help
    plan = plan_for(*docs)
    assert victims(plan) == {"team-a/a0"}
    out = plan.to_dict()["preemptions"]["team-b/b0"]
    assert out["reclaims"] == QUOTA_B
    assert out["victims"] == [{"pod": "team-a/a0", "priority": 10, "budget": "no PodDisruptionBudget covers it",
                               "reclaimedFrom": QUOTA_A, "why": "NodeResourcesFit: Insufficient cpu"}]


def test_reclaim_makes_room_in_the_quota_rows_when_nodes_have_room() -> None:
    """A third node stands empty, but the tenants' total of mins holds team-b: evictions anywhere free that row."""
    docs = team_a_borrowing() + [node("n2", cpu="4")] + team_b(4)
    before = plan_for(*docs, preemption=False)
    assert before.assignments == {}
    assert all("mins add up to" in " ".join(r) for r in before.unschedulable.values())
    plan = plan_for(*docs)
    assert len(plan.assignments) == 4 and victims(plan) == {f"team-a/a{i}" for i in range(4)}
    assert valid(docs, plan) == []


def test_borrowed_room_goes_before_the_preemptors_own_lower_priority_pods() -> None:
    """team-b (min 3, within it with b0) could evict its own priority-0 pod on n1 or one of team-a's priority-50 pods
    on n0 (team-a borrows 1): reclaim takes the borrowed room."""
    docs = [node("n0", cpu="2"), node("n1", cpu="1"), elastic_quota("team-a", {"cpu": "1"}),
            elastic_quota("team-b", {"cpu": "3"}),
            *(pod(f"a{i}", cpu="1", ns="team-a", node_name="n0", priority=50) for i in range(2)),
            pod("own", cpu="1", ns="team-b", node_name="n1", priority=0), pod("b0", cpu="1", ns="team-b", priority=100)]
    plan = plan_for(*docs)
    assert plan.assignments == {"team-b/b0": "n0"} and len(victims(plan)) == 1
    assert victims(plan) < {"team-a/a0", "team-a/a1"}
    assert valid(docs, plan) == []


def test_a_pending_pod_that_may_not_preempt_does_not_reclaim() -> None:
    plan = plan_for(*team_a_borrowing(), *team_b(1, preemptionPolicy="Never"))
    assert not plan.evictions and plan.assignments == {}


def test_policy_tenants_reclaim_as_elastic_quotas_do() -> None:
    """The same case with tenants written in the policy language (label-selected here), not ElasticQuotas."""
    teams = "".join(f'policy {t} {{\n  applies to pods where label "team" == "{t}"\n  quota min "cpu" 4\n}}\n'
                    for t in ("team-a", "team-b"))
    docs = [d for d in team_a_borrowing() if d["kind"] != "ElasticQuota"] + team_b(4)
    for d in docs:
        if d["kind"] == "Pod":
            d["metadata"]["labels"] = {"team": d["metadata"]["namespace"]}
    plan = plan_for(*docs, policy=teams)
    assert len(plan.assignments) == 4 and victims(plan) == {f"team-a/a{i}" for i in range(4)}
    assert plan.preemptions["team-b/b0"].reclaim is not None and "team-b" in plan.preemptions["team-b/b0"].reclaim


# --- who gains no power --------------------------------------------------------------------------------------------

def test_a_tenant_that_would_go_beyond_its_min_does_not_reclaim() -> None:
    """team-b (min 4) runs 2 and asks for 3 more: two are within its min and reclaim; the third would borrow, and may
    only evict lower-priority pods of team-b (there are none)."""
    docs = [node("n0", cpu="4"), node("n1", cpu="4"), elastic_quota("team-a", {"cpu": "4"}, {"cpu": "8"}),
            elastic_quota("team-b", {"cpu": "4"}, {"cpu": "8"}),
            *(pod(f"a{i}", cpu="1", ns="team-a", node_name=f"n{i % 2}", priority=i) for i in range(6)),
            *(pod(f"r{i}", cpu="1", ns="team-b", node_name=f"n{i}", priority=100) for i in range(2)),
            *team_b(3, priority=100)]
    plan = plan_for(*docs)
    assert len(plan.assignments) == 2 and victims(plan) == {"team-a/a0", "team-a/a1"}
    (left,) = plan.unschedulable
    assert "goes beyond its min" in " ".join(plan.unschedulable[left])
    assert valid(docs, plan) == []


def test_a_borrowing_pod_of_high_priority_does_not_evict_another_tenants_pods() -> None:
    docs = [node("n0", cpu="4"), elastic_quota("team-a", {"cpu": "1"}), elastic_quota("team-b", {"cpu": "3"}),
            pod("a0", cpu="1", ns="team-a", node_name="n0", priority=2000),  # team-a has no lower-priority pod
            *(pod(f"r{i}", cpu="1", ns="team-b", node_name="n0", priority=0) for i in range(3)),
            pod("urgent", cpu="1", ns="team-a", priority=1000)]
    plan = plan_for(*docs)
    assert not plan.evictions and plan.assignments == {}  # without quotas it would evict a team-b pod
    unquoted = [d for d in docs if d["kind"] != "ElasticQuota"]
    assert len(plan_for(*unquoted).evictions) == 1


def test_pods_with_and_without_a_quota_do_not_preempt_each_other() -> None:
    """As upstream: a pod without a quota evicts only pods without one, and a tenant's pod never evicts them."""
    docs = [node("n0", cpu="2"), elastic_quota("team-a", {"cpu": "1"}),
            pod("a0", cpu="1", ns="team-a", node_name="n0", priority=0),
            pod("free0", cpu="1", ns="other", node_name="n0", priority=0),
            pod("urgent", cpu="2", ns="other", priority=1000)]
    plan = plan_for(*docs)
    assert not plan.evictions and plan.assignments == {}
    tenant = plan_for(*docs[:4], pod("mine", cpu="2", ns="team-a", priority=1000))
    assert not tenant.evictions


# --- budgets, protection, gangs, mins ------------------------------------------------------------------------------

def test_a_borrowers_pods_under_a_budget_are_not_evicted_while_others_serve() -> None:
    docs = team_a_borrowing() + team_b(4)
    for d in docs:
        if d["metadata"]["name"] in {"a0", "a1", "a2", "a3"}:
            d["metadata"]["labels"] = {"app": "db"}
    docs.append(budget("db", {"app": "db"}, allowed=0, ns="team-a"))
    plan = plan_for(*docs)
    assert len(plan.assignments) == 4 and victims(plan) == {f"team-a/a{i}" for i in range(4, 8)}
    assert plan.stats.preemption.budget_violations == 0
    assert valid(docs, plan) == []


def test_protected_pods_are_not_reclaimed() -> None:
    keep = 'policy keep {\n  applies to pods where namespace == "team-a"\n  protect from preemption\n}\n'
    plan = plan_for(*team_a_borrowing(), *team_b(2), policy=keep)
    assert not plan.evictions and plan.assignments == {}
    assert all(any("protected" in r for r in reasons) for reasons in plan.unschedulable.values())


def test_an_eviction_cap_bounds_reclaim() -> None:
    cap = "policy gentle {\n  applies to all pods\n  at most 1 eviction per cycle\n}\n"
    plan = plan_for(*team_a_borrowing(), *team_b(3), policy=cap)
    assert len(plan.evictions) == 1 and len(plan.assignments) == 1


def test_no_eviction_takes_a_tenant_below_its_min() -> None:
    """team-a (min 4) runs two 3-cpu pods: it borrows 2 cpu, and evicting either pod would leave it 3 < 4. Upstream
    would evict one; reclaim takes back only borrowed room, so team-b waits and says why."""
    docs = [node("n0", cpu="3"), node("n1", cpu="3"), elastic_quota("team-a", {"cpu": "4"}), elastic_quota("team-b", {"cpu": "4"}),
            pod("a0", cpu="3", ns="team-a", node_name="n0"), pod("a1", cpu="3", ns="team-a", node_name="n1"), *team_b(2)]
    plan = plan_for(*docs)
    assert not plan.evictions and plan.assignments == {}
    assert "reclaim for ElasticQuota team-b/quota cannot make room" in " ".join(plan.unschedulable["team-b/b0"])
    exact = [node("n0", cpu="4"), node("n1", cpu="2"), *docs[2:4],  # three 2-cpu pods: one goes, leaving it at its min
             *(pod(f"a{i}", cpu="2", ns="team-a", node_name="n0" if i < 2 else "n1") for i in range(3)), *team_b(2)]
    plan = plan_for(*exact)
    assert len(plan.assignments) == 2 and len(plan.evictions) == 1
    assert valid(exact, plan) == []


def test_reclaim_stops_at_the_victims_min_when_several_tenants_borrow() -> None:
    """team-a borrows 1, team-c borrows 3: team-b's 4 pods take 1 from a and 3 from c, never more from a."""
    docs = [node("n0", cpu="4"), node("n1", cpu="4"), elastic_quota("team-a", {"cpu": "3"}), elastic_quota("team-b", {"cpu": "4"}),
            elastic_quota("team-c", {"cpu": "1"}),
            *(pod(f"a{i}", cpu="1", ns="team-a", node_name="n0", priority=0) for i in range(4)),
            *(pod(f"c{i}", cpu="1", ns="team-c", node_name="n1", priority=50) for i in range(4)), *team_b(4)]
    plan = plan_for(*docs)
    assert len(plan.assignments) == 4
    gone = victims(plan)
    assert len([v for v in gone if v.startswith("team-a/")]) == 1 and len([v for v in gone if v.startswith("team-c/")]) == 3
    assert valid(docs, plan) == []


def test_a_resource_the_victim_does_not_borrow_does_not_stop_reclaim() -> None:
    """team-a's min names cpu and memory; it borrows cpu only (its memory is exactly its min): reclaim takes its
    borrowed cpu back, with the memory those pods hold."""
    docs = [node("n0", cpu="4", memory="8Gi"), node("n1", cpu="4", memory="8Gi"),
            elastic_quota("team-a", {"cpu": "4", "memory": "8Gi"}), elastic_quota("team-b", {"cpu": "4", "memory": "8Gi"}),
            *(pod(f"a{i}", cpu="1", memory="1Gi", ns="team-a", node_name=f"n{i % 2}", priority=i) for i in range(8)),
            *(pod(f"b{i}", cpu="1", memory="1Gi", ns="team-b") for i in range(2))]
    plan = plan_for(*docs)
    assert len(plan.assignments) == 2 and victims(plan) == {"team-a/a0", "team-a/a1"}


def _gang_docs(team_a_min: str) -> list[dict]:
    """team-a runs a PodGroup-mode group of 4 (priority 0) and 4 single pods (priority 5) on 8 cpu."""
    return [node("n0", cpu="4"), node("n1", cpu="4"), elastic_quota("team-a", {"cpu": team_a_min}),
            elastic_quota("team-b", {"cpu": "4"}), native_group("train", 4, ns="team-a", priority=0, disruption="PodGroup"),
            *(pod(f"train-{i}", cpu="1", ns="team-a", node_name=f"n{i % 2}", schedulingGroup=in_group("train"))
              for i in range(4)),
            *(pod(f"a{i}", cpu="1", ns="team-a", node_name=f"n{i % 2}", priority=5) for i in range(4))]


def test_a_gang_is_reclaimed_whole() -> None:
    docs = _gang_docs("4") + team_b(4)
    plan = plan_for(*docs)
    assert len(plan.assignments) == 4
    assert victims(plan) == {f"team-a/train-{i}" for i in range(4)}  # the lowest priority, as one unit
    assert {v.group for v in plan.evictions} == {"team-a/train"}
    assert valid(docs, plan) == []


def test_a_gang_larger_than_the_borrowed_room_is_not_reclaimed_at_all() -> None:
    docs = _gang_docs("6") + team_b(2)  # team-a borrows 2: the group of 4 would take it below its min
    plan = plan_for(*docs)
    assert len(plan.assignments) == 2
    assert len(victims(plan)) == 2 and not any("train" in v for v in victims(plan))  # two single pods instead
    assert valid(docs, plan) == []


def test_a_victim_given_back_takes_back_the_room_a_borrower_was_planned_in() -> None:
    """t0 (no min) borrows 6 of t1's min of 8; t1 reclaims. The re-plan without two t0 victims also lets t0's own
    pending pod borrow a cpu the second victim freed; that victim is not needed by t1, so it comes back, and with it
    the room t0's pod borrowed: t0's pod is taken out again (else the tenants' borrowing exceeds the idle mins)."""
    docs = [node("n0", cpu="1"), node("n1", cpu="3"), elastic_quota("t1", {"cpu": "8"}), elastic_quota("t0", {})]
    docs += [pod("p0", cpu="1", ns="t0"), pod("p1", cpu="2", ns="t0", node_name="n0"),
             pod("p2", cpu="3", ns="t0", node_name="n0"), pod("p6", cpu="1", ns="t0", node_name="n0"),
             pod("p3", cpu="1", ns="t1"), pod("p4", cpu="1", ns="t1"), pod("p5", cpu="2", ns="t1"),
             pod("p7", cpu="2", ns="t1", node_name="n0")]
    plan = plan_for(*docs)
    assert victims(plan) == {"t0/p2"}
    assert set(plan.assignments) == {"t1/p3", "t1/p4"}
    assert valid(docs, plan) == []


def test_room_the_batch_lends_a_tenant_is_not_reclaimed_in_the_same_batch() -> None:
    """t0 runs its min of 3; the first plan lets its pending p0 borrow n1's last cpu. t2 (below its min) may reclaim
    only t1's borrowed cpu, which is not enough: t0's running r8 is not evicted to make room that the same batch
    just lent t0 (a running pod swapped for its tenant's pending one of the same priority)."""
    docs = [node("n0", cpu="2"), node("n1", cpu="3"),
            elastic_quota("t0", {"cpu": "3"}), elastic_quota("t1", {"cpu": "0"}), elastic_quota("t2", {"cpu": "4"}),
            pod("r0", cpu="2", ns="t0", node_name="n0"), pod("r8", cpu="1", ns="t0", node_name="n1"),
            pod("r9", cpu="1", ns="t1", node_name="n1"), pod("p0", cpu="1", ns="t0"), pod("p1", cpu="2", ns="t2")]
    plan = plan_for(*docs)
    assert "t0/r8" not in victims(plan)
    assert valid(docs, plan) == []


def test_a_victim_given_back_to_keep_a_min_takes_its_room_in_the_mins_total_back() -> None:
    """t1 (min 2) runs 3 cpu, t2 (min 1) 2: the tenants use 5 of their mins' total of 3. t1's p0 may evict only
    t1's lower pods, and needs all three gone to fit the total (2 + 1 <= 3); but that takes t1 below its min of 2,
    so one comes back (reclaim takes only borrowed room), and with it the total is over again: p0 waits, nobody is
    evicted."""
    docs = [node("n0", cpu="4", pods=12), node("n1", cpu="2", pods=12),
            elastic_quota("t1", {"cpu": "2"}), elastic_quota("t2", {"cpu": "1"}),
            pod("r0", cpu="1", ns="t1", node_name="n0"), pod("r1", cpu="1", ns="t1", node_name="n1"),
            pod("r2", cpu="1", ns="t1", node_name="n0"), pod("r3", cpu="2", ns="t2", node_name="n0"),
            pod("p0", cpu="1", ns="t1", priority=20)]
    plan = plan_for(*docs)
    assert plan.assignments == {} and victims(plan) == set()
    assert valid(docs, plan) == []


# --- the command line ---------------------------------------------------------------------------------------------

def test_dry_run_names_the_quota_reclaimed_for(tmp_path) -> None:
    from test_cli import cli, snapshot

    path = snapshot(tmp_path, *team_a_borrowing(), *team_b(1))
    table = cli("dry-run", "--cluster", path, "-q")
    assert table.returncode == 0, table.stderr
    assert f"reclaims the min of {QUOTA_B}" in table.stdout and f"beyond the min of {QUOTA_A}" in table.stdout
    out = json.loads(cli("dry-run", "--cluster", path, "-o", "json", "-q").stdout)
    assert out["preemptions"]["team-b/b0"]["reclaims"] == QUOTA_B


# --- property: every reclaim the plan makes is one the rules allow -------------------------------------------------

@st.composite
def tenant_clusters(draw) -> list[dict]:
    nodes = draw(st.integers(1, 3))
    docs: list[dict] = [node(f"n{i}", cpu=str(draw(st.integers(2, 4))), pods=12) for i in range(nodes)]
    for ns in ("t0", "t1", "t2"):
        if draw(st.integers(0, 3)):
            low = draw(st.integers(0, 4))
            high = draw(st.none() | st.integers(low, 8))
            docs.append(elastic_quota(ns, {"cpu": str(low)}, None if high is None else {"cpu": str(high)}))
    free = {f"n{i}": int(d["status"]["allocatable"]["cpu"]) for i, d in enumerate(docs[:nodes])}
    for j in range(draw(st.integers(0, 10))):
        n, cpu = f"n{draw(st.integers(0, nodes - 1))}", draw(st.integers(1, 2))
        if free[n] >= cpu:
            free[n] -= cpu
            docs.append(pod(f"r{j}", cpu=str(cpu), ns=draw(st.sampled_from(["t0", "t1", "t2", "free"])), node_name=n,
                            priority=draw(st.sampled_from([0, 10, 50])), labels={"app": draw(st.sampled_from(["x", "y"]))}))
    for k in range(draw(st.integers(1, 5))):
        docs.append(pod(f"p{k}", cpu=str(draw(st.integers(1, 2))), ns=draw(st.sampled_from(["t0", "t1", "t2", "free"])),
                        priority=draw(st.sampled_from([0, 20, 100]))))
    if draw(st.booleans()):
        docs.append(budget("x", {"app": "x"}, allowed=draw(st.integers(0, 1)), ns=draw(st.sampled_from(["t0", "t1"]))))
    return docs


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tenant_clusters())
def test_every_reclaim_is_one_the_rules_allow(docs) -> None:
    plan = plan_for(*docs)
    assert len(victims(plan)) == len(plan.evictions)  # no pod evicted twice
    assert valid(docs, plan) == []
