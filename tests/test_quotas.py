"""Tenant quotas (issue 19, first part): scheduler-plugins' ElasticQuota `max` per namespace, and the tenants
together within the sum of their `min`s, as rows of the batch model — checked by the independent checker."""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.load import build_cluster
from engine.planner import Options, plan_batch
from testkit.checker import check_plan
from testkit.manifests import node, pod


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


def per_tenant(assignments: dict[str, str]) -> Counter[str]:
    return Counter(key.split("/", 1)[0] for key in assignments)


def test_no_tenant_goes_over_its_max_nor_the_tenants_over_their_mins() -> None:
    """The issue's case: team-a min 4 / max 6, team-b min 4 / max 8, 8 cpu of nodes, 8 pods of 1 cpu each."""
    docs = [node("n1", cpu="4"), node("n2", cpu="4"), elastic_quota("team-a", "4", "6"), elastic_quota("team-b", "4", "8")]
    docs += [pod(f"a{i}", cpu="1", ns="team-a") for i in range(8)] + [pod(f"b{i}", cpu="1", ns="team-b") for i in range(8)]
    result = plan(docs)
    assert check_plan(docs, result.assignments) == []
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
    assert "ElasticQuota team-a/quota" in reason and "used 2000 + 2000 asked > max 3000" in reason
    assert "min 2000" in reason


def test_the_tenants_together_stay_within_the_sum_of_their_mins() -> None:
    docs = [node("n1", cpu="16"), elastic_quota("team-a", "2", "10"), elastic_quota("team-b", "2", "10")]
    docs += [pod(f"a{i}", cpu="1", ns="team-a") for i in range(4)] + [pod(f"b{i}", cpu="1", ns="team-b") for i in range(4)]
    result = plan(docs)
    assert check_plan(docs, result.assignments) == []
    assert sum(per_tenant(result.assignments).values()) == 4  # borrowing only what the other leaves of its min


def test_a_quota_the_model_cannot_read_is_refused_by_name() -> None:
    bad = elastic_quota("team-a", "4", "2")
    cluster = build_cluster([("t", bad)], strict=False)
    assert cluster.quotas == [] and "spec.min.cpu (4000) is above spec.max.cpu (2000)" in cluster.refused[0].message


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
    evicted = {v.pod for v in result.evictions}  # reclaim (tests/test_quota_reclaim.py) may evict borrowers
    remaining = [d for d in docs if f"{d['metadata'].get('namespace')}/{d['metadata']['name']}" not in evicted]
    assert check_plan(remaining, result.assignments) == []
