"""Victims chosen for the whole batch in the same model (issue 26, point 2; issue 48: a strategy of its own,
disruption budgets as rows): engine/preempt/model.py.

The per-pod search serves the preemptors highest priority first; the batch model weighs every placement and eviction
at once. Its victims are kept only when they are better in upstream's order, so the batch is never worse than the
search alone (the property test), and where the search's order costs a more important victim the model spares it.
"""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.preempt import model as preempt_model
from preempting import MODEL, SEARCH
from preempting import preempted as by_strategy
from testkit.checker import check_evictions, check_plan
from testkit.manifests import anti, budget, in_group, native_group, node, pod, term


def preempted(docs: list[dict], model: bool = True, seconds: float = 10.0):
    """The plan after preemption by the batch model or the search alone, on the same first plan."""
    return by_strategy(docs, MODEL if model else SEARCH, seconds=seconds)


def victims(plan) -> set[str]:
    return {v.pod.split("/", 1)[1] for v in plan.evictions}


def standing(plan, priorities: dict[str, int]) -> tuple:
    """Upstream's order of candidates for a whole batch (lower is better), read off the plan alone: preemptors placed by
    priority (highest first), budget violations, the highest victim priority, the victims' priority sum, their count."""
    levels = sorted(set(priorities.values()), reverse=True)
    placed = [-sum(1 for k in plan.preemptions if priorities[k] == level) for level in levels]
    evicted = [v.priority for v in plan.evictions]
    violations = sum(1 for v in plan.evictions if v.over_budget)
    return placed, violations, max(evicted, default=-(2**63)), sum(evicted), len(evicted)


def valid(docs: list[dict], plan) -> list[str]:
    gone = {v.pod for v in plan.evictions}
    remaining = [d for d in docs if f"{d['metadata'].get('namespace', 'default')}/{d['metadata']['name']}" not in gone]
    return check_plan(remaining, plan.assignments) + check_evictions(docs, gone)


# --- where serving one pod at a time costs more ----------------------------------------------------------

def two_preemptors() -> list[dict]:
    """`high` fits on n1 (evicting x) or n2 (evicting y) alike, and takes n1, the roomier after: `low` then finds n1
    taken and evicts w (priority 20) on n3. Together, high on n2 and low on n1 evict only priority-1 pods."""
    return [node("n1", cpu="2"), node("n2", cpu="2"), node("n3", cpu="2"),
            pod("x", cpu="2", node_name="n1", priority=1),
            pod("y", cpu="1", node_name="n2", priority=1), pod("z", cpu="1", node_name="n2", priority=30),
            pod("w", cpu="2", node_name="n3", priority=20),
            pod("high", cpu="1", priority=100), pod("low", cpu="2", priority=50)]


def test_the_batch_spares_a_victim_the_search_in_priority_order_evicts() -> None:
    docs = two_preemptors()
    alone = preempted(docs, model=False)
    assert victims(alone) == {"x", "w"}  # upstream's order, one pod at a time: w (priority 20) goes
    batch = preempted(docs)
    assert victims(batch) == {"x", "y"} and batch.assignments["default/high"] == "n2"
    assert batch.assignments["default/low"] == "n1"
    assert valid(docs, batch) == []
    assert batch.stats.preemption.strategy == "batch model"
    assert all(v.why == "NodeResourcesFit: Insufficient cpu" for v in batch.evictions)
    priorities = {"default/high": 100, "default/low": 50}
    assert standing(batch, priorities) < standing(alone, priorities)


def test_the_batch_spares_a_victim_an_anti_affinity_would_cost() -> None:
    """`web` must not share a node with app=db pods. Alone, `big` (served first) takes n1 evicting the priority-1 pod
    and leaves n2 (a db pod of priority 5) to `web`; together, `web` goes to n1 (no db there) and `big` to n2."""
    docs = [node("n1", cpu="2"), node("n2", cpu="2"), node("n3", cpu="2"),
            pod("a", cpu="2", node_name="n1", priority=1),
            pod("db", cpu="1", node_name="n2", priority=1, labels={"app": "db"}),
            pod("b", cpu="1", node_name="n2", priority=1),
            pod("c", cpu="2", node_name="n3", priority=40),
            pod("big", cpu="2", priority=100),
            pod("web", cpu="1", priority=90, affinity=anti(term({"app": "db"})))]
    alone, batch = preempted(docs, model=False), preempted(docs)
    priorities = {"default/big": 100, "default/web": 90}
    assert valid(docs, batch) == [] and valid(docs, alone) == []
    assert standing(batch, priorities) <= standing(alone, priorities)
    assert len(batch.preemptions) == 2 and max(v.priority for v in batch.evictions) == 1


def test_a_podgroup_mode_group_is_kept_or_evicted_whole_by_the_model() -> None:
    """A PodGroup-mode group of priority 0 runs a member on each node; evicting it whole frees both nodes for both
    preemptors, where the single pods (priority 5) would cost more victims of a higher priority."""
    docs = [node("n1", cpu="2"), node("n2", cpu="2"), native_group("g", 1, disruption="PodGroup"),
            pod("g-0", cpu="1", node_name="n1", schedulingGroup=in_group("g")),
            pod("g-1", cpu="1", node_name="n2", schedulingGroup=in_group("g")),
            pod("s1", cpu="1", node_name="n1", priority=5), pod("s2", cpu="1", node_name="n2", priority=5),
            pod("p1", cpu="1", priority=100), pod("p2", cpu="1", priority=100)]
    plan = preempted(docs)
    assert valid(docs, plan) == []
    assert victims(plan) == {"g-0", "g-1"} and len(plan.preemptions) == 2


N0_DB, N1_WEB = ([node("n0", cpu="3"), pod("r0-0", cpu="2", node_name="n0", priority=0, labels={"app": "db"})],
                 [node("n1", cpu="2"), pod("r1-0", cpu="1", node_name="n1", priority=60, labels={"app": "web"}),
                  pod("r1-1", cpu="1", node_name="n1", priority=20, labels={"app": "web"})])
P0 = pod("p0", cpu="2", priority=100, affinity=anti(term({"app": "db"})))  # must not share a node with app=db pods


def test_the_model_breaks_no_budget_a_preemptor_can_spare() -> None:
    """p0 may go on n0 (its db pod under a budget allowing no disruption) or n1 (two web pods): the model evicts
    n1's pods, breaking no budget (upstream: the fewest violations first, then the victims)."""
    docs = [*N0_DB, *N1_WEB, P0, budget("db", {"app": "db"}, allowed=0)]
    batch = preempted(docs)
    assert batch.stats.preemption.strategy == "batch model"
    assert batch.assignments == {"default/p0": "n1"} and victims(batch) == {"r1-0", "r1-1"}
    assert batch.stats.preemption.budget_violations == 0 and valid(docs, batch) == []


def test_the_model_breaks_a_budget_only_for_a_preemptor_nothing_else_places() -> None:
    """As above, with p1 and p2 (priority 50) waiting too: they may evict n0's db pod (priority 0), not n1's r1-0
    (60). The model puts p0 on n1 (no violation) and breaks the budget only for one of p1 / p2, which nothing else
    places (upstream: p0 where no budget breaks, then a priority-50 pod evicts n0's db pod, its only way in). The
    search now does the same: its re-plan's greedy start leaves a node that a pod pinned below it needs to the last
    (engine.solve.greedy `claimed_last`); it used to serve p0 on n0, breaking the budget, and place nobody else."""
    docs = [*N0_DB, *N1_WEB, node("n2", cpu="2"),
            pod("r2-0", cpu="2", node_name="n2", priority=60, labels={"app": "db"}),
            P0, pod("p1", cpu="3", priority=50), pod("p2", cpu="2", priority=50), budget("db", {"app": "db"}, allowed=0)]
    alone, batch = preempted(docs, model=False), preempted(docs)
    assert alone.assignments["default/p0"] == "n1" and len(alone.assignments) == 2
    assert victims(alone) == {"r0-0", "r1-0", "r1-1"} and alone.stats.preemption.budget_violations == 1
    assert batch.stats.preemption.strategy == "batch model"
    assert batch.assignments["default/p0"] == "n1" and len(batch.assignments) == 2
    assert victims(batch) == {"r0-0", "r1-0", "r1-1"} and batch.stats.preemption.budget_violations == 1
    broken = [k for k, p in batch.preemptions.items() for v in p.victims if v.over_budget]
    assert broken and "default/p0" not in broken  # p0's own victims break no budget
    assert valid(docs, batch) == []


def test_a_budget_breaks_for_any_preemptor_that_may_evict_a_pod_it_covers() -> None:
    """The budget covers d0 (priority 0) and d60 (60) and allows no disruption. p (50) fits only in d0's room; p100
    (100) fits on n2 as it is. Breaking the budget places p: worth it, though p100 is the only one that may evict
    d60 (the budget's row costs just below the lowest preemptor that may evict one of its pods, not all of them)."""
    docs = [node("n0", cpu="2"), pod("d0", cpu="2", node_name="n0", priority=0, labels={"app": "db"}),
            node("n1", cpu="1"), pod("d60", cpu="1", node_name="n1", priority=60, labels={"app": "db"}),
            node("n2", cpu="1"), pod("other", cpu="1", node_name="n2", priority=0),
            pod("p", cpu="2", priority=50), pod("p100", cpu="1", priority=100), budget("db", {"app": "db"}, allowed=0)]
    batch = preempted(docs)
    assert batch.stats.preemption.strategy == "batch model"
    assert batch.assignments == {"default/p": "n0", "default/p100": "n2"} and victims(batch) == {"d0", "other"}
    assert batch.stats.preemption.budget_violations == 1 and valid(docs, batch) == []


def test_the_model_gives_a_preemptor_only_the_room_of_pods_it_may_evict() -> None:
    """A preemptor evicts only lower-priority pods, even where another's victim would spare a budget. `p` (priority
    50, n0 only) may not take the room of n0's `r` (60), which `p3` (100) may evict; evicting r for p would break no
    budget where evicting `t` (0) breaks one. So p takes t's room, the budget broken, and p3 n1's (upstream: p3
    first, on n1 whose victim is cheaper; then p, whose only victim is t)."""
    docs = [node("n0", cpu="4", labels={"pool": "a"}), pod("r", cpu="2", node_name="n0", priority=60),
            pod("t", cpu="2", node_name="n0", priority=0, labels={"app": "db"}),
            node("n1", cpu="2"), pod("u", cpu="2", node_name="n1", priority=0),
            pod("p3", cpu="2", priority=100), pod("p", cpu="2", priority=50, nodeSelector={"pool": "a"}),
            budget("db", {"app": "db"}, allowed=0)]
    batch = preempted(docs)
    assert batch.stats.preemption.strategy == "batch model"
    assert batch.assignments == {"default/p": "n0", "default/p3": "n1"} and victims(batch) == {"t", "u"}
    assert valid(docs, batch) == []


def test_the_model_places_a_preemptor_only_where_it_may_preempt() -> None:
    """`p` (priority 50) must not share a node with app=db pods; n0 runs `r` (db, 60), which `p3` (100) may evict and
    p may not, and `s` (0). Evicting both would make room on n0 for p3 and p and break no budget; but n0 is no node
    of p's (it fails there with every pod it may evict gone), so p goes on n1, whose `u` is under a budget allowing
    none, and p3 takes s's room: r stays (upstream's candidates: p fails on n0 whatever it evicts)."""
    docs = [node("n0", cpu="3"), pod("r", cpu="1", node_name="n0", priority=60, labels={"app": "db"}),
            pod("s", cpu="1", node_name="n0", priority=0),
            node("n1", cpu="1"), pod("u", cpu="1", node_name="n1", priority=0, labels={"app": "kept"}),
            pod("p", cpu="1", priority=50, affinity=anti(term({"app": "db"}))), pod("p3", cpu="2", priority=100),
            budget("kept", {"app": "kept"}, allowed=0)]
    batch = preempted(docs)
    assert batch.stats.preemption.strategy == "batch model"
    assert batch.assignments == {"default/p": "n1", "default/p3": "n0"} and victims(batch) == {"s", "u"}
    assert valid(docs, batch) == []


def test_the_model_is_skipped_when_it_would_not_fit_the_time_left(monkeypatch) -> None:
    monkeypatch.setattr(preempt_model, "MAX_VARS", 1)
    docs = two_preemptors()
    plan = by_strategy(docs)  # the stage's default: the model, the search when it declines
    assert plan.stats.preemption.strategy == "per-node search"
    assert "batch model: skipped" in plan.stats.preemption.note and "do not fit the time left" in \
        plan.stats.preemption.note
    assert victims(plan) == {"x", "w"}  # the search alone


def test_a_pinned_running_pod_keeps_its_node_whatever_its_own_rules_say() -> None:
    """What upstream checks only at scheduling (IgnoredDuringExecution) never evicts a running pod: `r` runs on a
    node its own node affinity no longer matches, on a node tainted since; `p` needs only half the node."""
    tainted = node("n1", cpu="2")
    tainted["spec"]["taints"] = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]
    docs = [tainted, pod("r", cpu="1", node_name="n1", priority=1, nodeSelector={"zone": "elsewhere"}),
            pod("s", cpu="1", node_name="n1", priority=2),
            pod("p", cpu="1", priority=100, tolerations=[{"key": "dedicated", "operator": "Exists"}])]
    plan = preempted(docs)
    assert victims(plan) == {"r"} and valid(docs, plan) == []


# --- property: valid, and never worse than the search alone ------------------------------------------------

@st.composite
def contested(draw) -> list[dict]:
    """Small full clusters: running pods of several priorities (some app=db, under a budget; some in a PodGroup-mode
    group), preemptors of two priorities, some with anti-affinity to app=db."""
    docs: list[dict] = []
    nodes = draw(st.integers(2, 4))
    grouped = draw(st.booleans())
    levels = st.sampled_from([0, 1, 20, 60])
    group = draw(levels)  # the group's members share its priority
    if grouped:
        docs.append(native_group("g", 1, disruption="PodGroup"))
    for i in range(nodes):
        room = draw(st.integers(2, 4))
        docs.append(node(f"n{i}", cpu=str(room), pods=10))
        for j in range(draw(st.integers(1, 3))):
            cpu = draw(st.integers(1, 2))
            if cpu > room and draw(st.integers(0, 4)):  # mostly, running pods fit their node
                break
            room -= cpu
            member = grouped and draw(st.integers(0, 3)) == 0
            extra = {"schedulingGroup": in_group("g")} if member else {}
            docs.append(pod(f"r{i}-{j}", cpu=str(cpu), node_name=f"n{i}",
                            priority=group if member else draw(levels),
                            labels={"app": draw(st.sampled_from(["web", "db"]))}, **extra))
    for k in range(draw(st.integers(1, 4))):
        extra = {"affinity": anti(term({"app": "db"}))} if draw(st.integers(0, 3)) == 0 else {}
        docs.append(pod(f"p{k}", cpu=str(draw(st.integers(1, 3))), priority=draw(st.sampled_from([50, 100])),
                        **extra))
    if draw(st.booleans()):
        docs.append(budget("db", {"app": "db"}, allowed=draw(st.integers(0, 1))))
    return docs


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(contested())
def test_the_batch_is_valid_and_never_worse_than_one_pod_at_a_time(docs) -> None:
    batch, alone = by_strategy(docs), preempted(docs, model=False)  # the stage's default: the model, or the search
    assert valid(docs, alone) == []
    assert valid(docs, batch) == []
    assert len({v.pod for v in batch.evictions}) == len(batch.evictions)
    priorities = {f"default/{d['metadata']['name']}": d["spec"].get("priority", 0)
                  for d in docs if d["kind"] == "Pod" and not d["spec"].get("nodeName")}
    assert standing(batch, priorities) <= standing(alone, priorities)
    for p in batch.preemptions.values():
        for v in p.victims:
            assert v.priority < p.priority and (v.node == p.node or v.group is not None)
