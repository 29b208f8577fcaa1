"""A unit's place in line is decided once (engine.model.queue_order) and every line agrees on it (issue 48, point 5).

kube-scheduler's queue sorts by priority, then by when the unit entered the line: Coscheduling's `Less` reads the
PodGroup's creationTimestamp, so a gang with an object of its own ranks by that object's age; a policy's
`gang by label` has no object and ranks by its oldest member. Compile's queue (what the one-at-a-time plan follows)
and the reservations' line (engine.time.timeline.in_line) must put the same unit first."""
from __future__ import annotations

from engine.model.queue_order import Place, in_line, queue_order
from engine.planning.compile import compile_cluster
from engine.planning.plan import plan_from_solution
from engine.policy.lower import lower
from engine.policy.sources import check_sources
from engine.quotas.tenants import Asking, Usage
from engine.reading.load import build_cluster
from engine.solve.problem import Solution, Status
from engine.solve.sequential import sequential
from engine.time.timeline import in_line as reservations_line
from testkit.manifests import node, pod, podgroup

GANG = 'policy jobs {\n  applies to pods where label "job" exists\n  gang by label "job" min 2\n}\n'
PG_LABEL = "scheduling.x-k8s.io/pod-group"


def _at(doc: dict, second: int) -> dict:
    doc["metadata"]["creationTimestamp"] = f"2026-01-01T00:00:{second:02d}Z"
    return doc


def _cluster(docs: list[dict], policy: str | None = None):
    gangs = lower(check_sources({"t.policy": policy})).gangs if policy else ()
    return build_cluster([("t", d) for d in docs], gangs=gangs)


def _one_at_a_time(cluster) -> set[str]:
    """The pods the one-at-a-time plan places: it takes compile's queue in order."""
    compiled = compile_cluster(cluster)
    placed = sequential(compiled.problem)
    solution = Solution(placed, Status.FEASIBLE, compiled.problem.value(placed))
    return {key.split("/")[1] for key in plan_from_solution(compiled, solution, 0.0).assignments}


def _first_in_line(cluster) -> set[str]:
    return {p.name for p in reservations_line(cluster, [p.key for p in cluster.pending])[0]}


def _competing(gang_labels: dict, gang_at: int, single_at: int, extra: list[dict]) -> list[dict]:
    """One 2-cpu node; a gang of two 1-cpu pods and a single 2-cpu pod of the same priority: one unit starts."""
    return [node("n1", cpu="2"), *extra,
            _at(pod("g1", cpu="1", labels=gang_labels), gang_at), _at(pod("g2", cpu="1", labels=gang_labels), gang_at),
            _at(pod("single", cpu="2"), single_at)]


def test_an_older_single_pod_goes_before_a_younger_policy_gang_in_every_line() -> None:
    """The policy gang has no object (no creationTimestamp of its own): it entered the line with its oldest member,
    after the single pod. Compile's queue put it first (its empty creation time sorted before any)."""
    cluster = _cluster(_competing({"job": "x"}, gang_at=30, single_at=10, extra=[]), GANG)
    assert cluster.gangs["default/job=x"].created == ""
    assert _first_in_line(cluster) == {"single"}
    assert _one_at_a_time(cluster) == {"single"}


def test_a_younger_policy_gang_with_an_older_member_goes_first() -> None:
    """Its oldest member decides, not the youngest."""
    docs = _competing({"job": "x"}, gang_at=30, single_at=10, extra=[])
    _at(docs[1], 5)  # g1 arrived before the single pod
    cluster = _cluster(docs, GANG)
    assert _first_in_line(cluster) == {"g1", "g2"}
    assert _one_at_a_time(cluster) == {"g1", "g2"}


def test_a_podgroups_creation_time_decides_not_its_pods() -> None:
    """Coscheduling's `Less`: the PodGroup's creationTimestamp, whatever its pods' are. A PodGroup younger than the
    single pod waits behind it though its pods are older (the reservations' line read the pods' times)."""
    labels = {PG_LABEL: "pg"}
    young = _cluster(_competing(labels, gang_at=5, single_at=10, extra=[_at(podgroup("pg", 2), 20)]))
    assert _first_in_line(young) == {"single"}
    assert _one_at_a_time(young) == {"single"}
    old = _cluster(_competing(labels, gang_at=30, single_at=10, extra=[_at(podgroup("pg", 2), 1)]))
    assert _first_in_line(old) == {"g1", "g2"}
    assert _one_at_a_time(old) == {"g1", "g2"}


def test_a_tenants_min_serves_its_pods_in_the_same_order() -> None:
    """Quota order (engine.quotas.tenants.Asking: who a min serves, who borrows) is the queue's too: with room in the min
    for one unit, the unit first in line is served and the other borrows. It read the pods' own times, so the
    younger PodGroup's older pods took the min."""
    quota = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota",
             "metadata": {"name": "quota", "namespace": "default"}, "spec": {"min": {"cpu": "2"}, "max": {"cpu": "4"}}}
    for pg_at, served in ((20, {"single"}), (1, {"g1", "g2"})):
        cluster = _cluster(_competing({PG_LABEL: "pg"}, gang_at=5, single_at=10,
                                      extra=[quota, _at(podgroup("pg", 2), pg_at)]))
        asking = Asking.of(Usage.of(cluster.quotas, cluster.bound), cluster.pending, cluster.gangs)
        assert {p.name for p in cluster.pending if p.key not in asking.borrowing} == served


def test_priority_first_then_time_then_key() -> None:
    docs = [_at(pod("b"), 10), _at(pod("a"), 10), _at(pod("old"), 1), _at(pod("high", priority=5), 50),
            _at(pod("m1", labels={"job": "y"}), 20), _at(pod("m2", labels={"job": "y"}), 3)]
    cluster = _cluster([node("n1"), *docs], GANG)
    assert [p.name for p in queue_order(cluster.pending, cluster.gangs)] == ["high", "old", "m2", "m1", "a", "b"]
    assert [tuple(p.name for p in u) for u in in_line(cluster.pending, cluster.gangs)] == [
        ("high",), ("old",), ("m1", "m2"), ("a",), ("b",)]
    assert Place.of(5, "", "x") < Place.of(0, "", "a")  # priority before everything
