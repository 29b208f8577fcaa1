"""Tenant quotas (issue 19, first part): scheduler-plugins' ElasticQuota `max` per namespace, and the tenants
together within the sum of their `min`s, as rows of the batch model — checked by the independent checker."""

from __future__ import annotations

import itertools
from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.planning.planner import Options, plan_batch
from engine.reading.load import build_cluster
from testkit.checker import check_plan
from testkit.manifests import node, pod
from testkit.quotas import dominant_share


def elastic_quota(ns: str, min_cpu: str | None, max_cpu: str | None) -> dict:
    spec = {}
    if min_cpu is not None:
        spec["min"] = {"cpu": min_cpu}
    if max_cpu is not None:
        spec["max"] = {"cpu": max_cpu}
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota",
            "metadata": {"name": "quota", "namespace": ns}, "spec": spec}


def plan(docs: list[dict]):
    return plan_batch(build_cluster([("t", d) for d in docs]), options=Options(time_limit=5, workers=1))


def gone(docs: list[dict], result) -> list[dict]:
    """`docs` without the pods the plan evicts (reclaim by preemption, tests/test_quota_reclaim.py)."""
    evicted = {v.pod for v in result.evictions}
    return [d for d in docs if f"{d['metadata'].get('namespace', 'default')}/{d['metadata']['name']}" not in evicted]


def per_tenant(assignments: dict[str, str]) -> Counter[str]:
    return Counter(key.split("/", 1)[0] for key in assignments)


def test_no_tenant_goes_over_its_max_nor_the_tenants_over_their_mins() -> None:
    """The issue's case: team-a min 4 / max 6, team-b min 4 / max 8, 8 cpu of nodes, 8 pods of 1 cpu each."""
    docs = [node("n1", cpu="4"), node("n2", cpu="4"), elastic_quota("team-a", "4", "6"), elastic_quota("team-b", "4", "8")]
    docs += [pod(f"a{i}", cpu="1", ns="team-a") for i in range(8)] + [pod(f"b{i}", cpu="1", ns="team-b") for i in range(8)]
    result = plan(docs)
    assert check_plan(gone(docs, result), result.assignments) == []
    placed = per_tenant(result.assignments)
    assert placed["team-a"] <= 6 and sum(placed.values()) == 8
    left = next(k for k in result.unschedulable if k.startswith("team-a/"))
    assert result.unschedulable[left]  # every pod left out says why


def test_a_pod_alone_beyond_its_max_waits_and_its_reason_names_the_quota() -> None:
    docs = [node("n1", cpu="8"), elastic_quota("team-a", "2", "3"), pod("running", cpu="2", ns="team-a", node_name="n1"),
            pod("big", cpu="2", ns="team-a"), pod("free", cpu="2", ns="other")]
    result = plan(docs)
    assert result.assignments == {"other/free": "n1"}  # a namespace without a quota is not held
    reason = " ".join(result.unschedulable["team-a/big"])
    assert "ElasticQuota team-a/quota" in reason and "cpu used 2 + 2 asked > max 3 (min 2)" in reason


def test_the_tenants_together_stay_within_the_sum_of_their_mins() -> None:
    docs = [node("n1", cpu="16"), elastic_quota("team-a", "2", "10"), elastic_quota("team-b", "2", "10")]
    docs += [pod(f"a{i}", cpu="1", ns="team-a") for i in range(4)] + [pod(f"b{i}", cpu="1", ns="team-b") for i in range(4)]
    result = plan(docs)
    assert check_plan(gone(docs, result), result.assignments) == []
    assert sum(per_tenant(result.assignments).values()) == 4  # borrowing only what the other leaves of its min


def test_a_quota_the_model_cannot_read_is_refused_by_name() -> None:
    bad = elastic_quota("team-a", "4", "2")
    cluster = build_cluster([("t", bad)], strict=False)
    assert cluster.quotas == [] and "spec.min.cpu (4000) is above spec.max.cpu (2000)" in cluster.refused[0].message


def named(doc: dict, name: str) -> dict:
    return {**doc, "metadata": {**doc["metadata"], "name": name}}


def test_a_second_elastic_quota_in_a_namespace_is_refused_naming_the_one_kept_whatever_the_order() -> None:
    """CapacityScheduling keys quotas by namespace and leaves a second one undefined: the first by name is kept, the
    other refused with both named, in whichever order they come."""
    loose, tight = named(elastic_quota("team-a", "1", "8"), "b-loose"), named(elastic_quota("team-a", "1", "2"), "a-tight")
    docs = [node("n1", cpu="8"), elastic_quota("team-b", "1", "8")] + [pod(f"a{i}", cpu="1", ns="team-a") for i in range(4)]
    for order in ([loose, tight], [tight, loose]):
        cluster = build_cluster([("snap.yaml", d) for d in [*docs, *order]], strict=False)
        assert [q.name for q in cluster.quotas] == ["team-b/quota", "team-a/a-tight"]
        assert [r.message for r in cluster.refused] == [
            "snap.yaml: ElasticQuota team-a/b-loose: a second ElasticQuota in namespace team-a: ElasticQuota "
            "team-a/a-tight is its quota (the first by name; CapacityScheduling reads one per namespace)"]
        result = plan_batch(cluster, options=Options(time_limit=5, workers=1))
        assert len(result.assignments) == 2  # a-tight's max holds, not b-loose's


def test_a_second_elastic_quota_stops_the_dry_run_and_is_refused_by_the_loop(tmp_path) -> None:
    import yaml
    from click.testing import CliRunner

    from engine.cli import main
    from test_cluster_cache import SCHEDULER, World

    docs = [node("n1", cpu="8"), named(elastic_quota("team-a", "1", "8"), "second"), elastic_quota("team-a", "1", "2")]
    path = tmp_path / "snap.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    out = CliRunner().invoke(main, ["dry-run", "--cluster", str(path), "-o", "json"])
    assert out.exit_code == 2 and len(out.stderr.strip().splitlines()) == 1
    assert "ElasticQuota team-a/second: a second ElasticQuota in namespace team-a: ElasticQuota team-a/quota" in out.stderr
    world = World()
    for doc in docs:
        world.put(doc["kind"], doc)
    cluster = world.cache.snapshot([], SCHEDULER, None).cluster
    assert [q.name for q in cluster.quotas] == ["team-a/quota"]
    assert [(r.ref.kind, r.ref.namespace, r.ref.name) for r in cluster.refused if r.ref] == [
        ("ElasticQuota", "team-a", "second")]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(1, 6), min_size=1, max_size=4),
       st.lists(st.tuples(st.sampled_from(["t0", "t1", "t2", "free"]), st.integers(1, 3), st.booleans()),
                min_size=1, max_size=14),
       st.dictionaries(st.sampled_from(["t0", "t1", "t2"]),
                       st.tuples(st.none() | st.integers(0, 8), st.none() | st.integers(1, 10)), max_size=3))
def test_no_plan_exceeds_a_max_or_the_sum_of_the_mins(nodes, pods, quotas) -> None:
    docs = [node(f"n{i}", cpu=str(cpu)) for i, cpu in enumerate(nodes)]
    for ns, (low, high) in quotas.items():
        if low is not None and high is not None and low > high:
            low = high
        docs.append(elastic_quota(ns, None if low is None else str(low), None if high is None else str(high)))
    for i, (ns, cpu, running) in enumerate(pods):
        docs.append(pod(f"p{i}", cpu=str(cpu), ns=ns, node_name="n0" if running else None))
    result = plan(docs)
    assert check_plan(gone(docs, result), result.assignments) == []


# -- minimums before borrowing, and fair share (issue 19, second part) -------------------------------------

def test_a_tenant_borrows_what_another_leaves_of_its_min_and_no_more() -> None:
    """team-b asks for 2 of its min of 4: team-a may borrow the other 2 (up to its max 6), not team-b's asked 2."""
    docs = [node("n1", cpu="4"), node("n2", cpu="4"), elastic_quota("team-a", "4", "6"), elastic_quota("team-b", "4", "8")]
    docs += [pod(f"a{i}", cpu="1", ns="team-a") for i in range(8)] + [pod(f"b{i}", cpu="1", ns="team-b") for i in range(2)]
    result = plan(docs)
    assert check_plan(gone(docs, result), result.assignments) == []
    assert per_tenant(result.assignments) == {"team-a": 6, "team-b": 2}


def test_an_asked_for_min_is_served_before_a_higher_priority_borrower() -> None:
    """4 cpu of room, three tenants of min 2: b asks for its 2; a asks for 4, 2 of them borrowed (c's idle min),
    at a higher priority. b's asked-for min is served first: the room goes 2 to a (its min) and 2 to b."""
    docs = [node("n1", cpu="4"), elastic_quota("a", "2", "4"), elastic_quota("b", "2", "4"), elastic_quota("c", "2", "4")]
    docs += [pod(f"a{i}", cpu="1", ns="a", priority=100) for i in range(4)] + [pod(f"b{i}", cpu="1", ns="b") for i in range(2)]
    result = plan(docs)
    assert check_plan(gone(docs, result), result.assignments) == []
    assert per_tenant(result.assignments) == {"a": 2, "b": 2}
    assert any("in this batch's plan" in " ".join(r) for k, r in result.unschedulable.items() if k.startswith("a/"))


def test_what_is_borrowed_already_leaves_nothing_more_to_borrow() -> None:
    """a runs 6 on its min of 4 (2 borrowed from c's idle min of 2): b, asking 2 beyond its min, borrows nothing."""
    docs = [node("n1", cpu="16"), elastic_quota("a", "4", "8"), elastic_quota("b", "2", "8"), elastic_quota("c", "2", "8")]
    docs += [pod(f"run{i}", cpu="1", ns="a", node_name="n1") for i in range(6)]
    docs += [pod(f"b{i}", cpu="1", ns="b") for i in range(4)]
    result = plan(docs)
    assert check_plan(gone(docs, result), result.assignments) == []
    assert per_tenant(result.assignments) == {"b": 2}


def test_a_min_asked_for_by_pods_that_cannot_run_yet_is_not_lent() -> None:
    """b asks for its min of 4 with pods no node takes yet (they need a GPU node): a may not borrow it, so when
    such a node joins b's pods find their min waiting (upstream's mins' total alone would have let a take it)."""
    docs = [node("n1", cpu="16"), elastic_quota("a", "4", "8"), elastic_quota("b", "4", "8")]
    docs += [pod(f"a{i}", cpu="1", ns="a") for i in range(8)]
    docs += [pod(f"b{i}", cpu="1", ns="b", nodeSelector={"gpu": "yes"}) for i in range(4)]
    result = plan(docs)
    assert check_plan(gone(docs, result), result.assignments) == []
    assert per_tenant(result.assignments) == {"a": 4}
    reasons = " ".join(" ".join(r) for k, r in result.unschedulable.items() if k.startswith("a/"))
    assert "mins leave idle (0 to lend)" in reasons


def test_idle_minimums_are_split_between_borrowers_by_their_shares() -> None:
    """c's idle min of 8 is all there is to borrow: a and b, equal weights and equal pods, get 4 each."""
    docs = [node("n1", cpu="16"), elastic_quota("c", "8", "8"), elastic_quota("a", "0", "16"), elastic_quota("b", "0", "16")]
    docs += [pod(f"a{i}", cpu="1", ns="a") for i in range(10)] + [pod(f"b{i}", cpu="1", ns="b") for i in range(10)]
    result = plan(docs)
    assert check_plan(gone(docs, result), result.assignments) == []
    assert per_tenant(result.assignments) == {"a": 4, "b": 4}
    assert result.stats.status == "OPTIMAL"


def test_shares_count_what_runs_already() -> None:
    """a runs 3 (borrowed from c's idle min of 9), so 6 are left to borrow: the fairest split gives a 1 or 2 more
    and b the rest (a at 4 or 5 of 16 cpu, b at 5 or 4), not an even 3 and 3."""
    docs = [node("n1", cpu="16"), elastic_quota("c", "9", "9"), elastic_quota("a", "0", "16"), elastic_quota("b", "0", "16")]
    docs += [pod(f"run{i}", cpu="1", ns="a", node_name="n1") for i in range(3)]
    docs += [pod(f"a{i}", cpu="1", ns="a") for i in range(10)] + [pod(f"b{i}", cpu="1", ns="b") for i in range(10)]
    result = plan(docs)
    assert check_plan(gone(docs, result), result.assignments) == []
    placed = per_tenant(result.assignments)
    assert sum(placed.values()) == 6 and placed["a"] <= 2 and abs((3 + placed["a"]) - placed["b"]) <= 1


def _tenants_case(nodes: list[int], quotas: dict[str, tuple[int, int]], running: dict[str, int],
                  asking: dict[str, int]) -> list[dict]:
    docs = [node(f"n{i}", cpu=str(cpu)) for i, cpu in enumerate(nodes)]
    docs += [elastic_quota(ns, str(low), str(max(low, high))) for ns, (low, high) in quotas.items()]
    free = {f"n{i}": cpu for i, cpu in enumerate(nodes)}
    for ns, k in running.items():
        for i in range(k):
            where = next((n for n, room in free.items() if room), None)
            if where is None:
                break
            free[where] -= 1
            docs.append(pod(f"run{i}", cpu="1", ns=ns, node_name=where))
    docs += [pod(f"p{i}", cpu="1", ns=ns) for ns, k in asking.items() for i in range(k)]
    return docs


TENANTS = ["t0", "t1", "t2"]
quota_sets = st.dictionaries(st.sampled_from(TENANTS), st.tuples(st.integers(0, 5), st.integers(1, 9)), min_size=1)
counts = st.dictionaries(st.sampled_from(TENANTS), st.integers(0, 6))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(1, 5), min_size=1, max_size=3), quota_sets, counts, counts)
def test_an_asked_for_min_is_never_lost_to_borrowing(nodes, quotas, running, asking) -> None:
    """Pods of 1 cpu, nothing but cpu: if a tenant is left below its min with a pod still asking, no tenant
    borrowed beyond its min in this plan (that pod could have had the borrower's place)."""
    docs = _tenants_case(nodes, quotas, running, asking)
    result = plan(docs)
    assert check_plan(gone(docs, result), result.assignments) == []
    held = Counter(d["metadata"]["namespace"] for d in gone(docs, result) if d["kind"] == "Pod" and d["spec"].get("nodeName"))
    placed = per_tenant(result.assignments)
    waiting = {ns for ns, k in asking.items() if placed[ns] < k and ns in quotas}
    starved = [ns for ns in waiting if held[ns] + placed[ns] < quotas[ns][0]]
    if starved:
        borrowed = {ns: placed[ns] for ns in quotas if held[ns] + placed[ns] > max(quotas[ns][0], held[ns])}
        assert not borrowed, f"{starved} below their mins while {borrowed} borrowed"


def _best_split(docs: list[dict], quotas: dict[str, tuple[int, int]], asking: dict[str, int], room: int) -> tuple:
    """Independently: over every count of pods per tenant the quotas and the room allow, the best (pods served by
    a min, pods placed, −Σ squared dominant shares) — the order docs/quotas.md gives."""
    tenants = sorted(quotas)
    total = {"cpu": 1000 * sum(int(d["status"]["allocatable"]["cpu"]) for d in docs if d["kind"] == "Node")}
    wanted = {ns: asking.get(ns, 0) for ns in tenants}
    lendable = sum(low - min(low, wanted[ns]) for ns, (low, _) in quotas.items())
    best = None
    for split in itertools.product(*(range(min(wanted[ns], quotas[ns][1]) + 1) for ns in tenants)):
        k = dict(zip(tenants, split))
        borrowed = sum(max(0, k[ns] - quotas[ns][0]) for ns in tenants)
        if sum(split) > room or borrowed > lendable:
            continue
        served = sum(min(k[ns], quotas[ns][0]) for ns in tenants)
        unfair = sum(dominant_share({"cpu": 1000 * k[ns]}, total) ** 2 for ns in tenants if wanted[ns])
        key = (served, sum(split), -unfair)
        best = key if best is None or key > best else best
    return best


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 12), quota_sets, counts)
def test_the_plan_is_the_fairest_by_an_independent_count(room, quotas, asking) -> None:
    """One node, pods of 1 cpu, tenants with nothing running: the plan's (pods a min serves, pods placed, −Σ
    squared shares) is the best any split of pods between the tenants reaches."""
    asking = {ns: k for ns, k in asking.items() if ns in quotas}
    quotas = {ns: (low, max(low, high)) for ns, (low, high) in quotas.items()}
    docs = _tenants_case([room], quotas, {}, asking)
    result = plan(docs)
    assert result.stats.status == "OPTIMAL"
    placed = per_tenant(result.assignments)
    total = {"cpu": 1000 * room}
    served = sum(min(placed[ns], quotas[ns][0]) for ns in quotas)
    unfair = sum(dominant_share({"cpu": 1000 * placed[ns]}, total) ** 2 for ns in quotas if asking.get(ns))
    assert (served, sum(placed.values()), -unfair) == _best_split(docs, quotas, asking, room)


def test_a_quota_beyond_2_to_the_53_is_no_limit_not_a_refusal() -> None:
    """An ElasticQuota's `max: {cpu: 9Ei}` (admitted: a valid quantity) means no limit in any cluster: read as the
    model's largest amount, never a refusal that would leave the namespace's pods without their quota."""
    from engine.reading.convert.fields import MAX_QUANTITY
    from engine.reading.load import build_cluster
    quota = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota",
             "metadata": {"name": "odd", "namespace": "default"},
             "spec": {"min": {"cpu": "1"}, "max": {"cpu": "9Ei", "memory": "7E"}}}
    cluster = build_cluster([("q", quota)], strict=True)
    (read,) = cluster.quotas
    assert dict(read.max) == {"cpu": MAX_QUANTITY, "memory": MAX_QUANTITY} and not cluster.refused
