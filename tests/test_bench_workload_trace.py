"""bench/workload_trace.py without a control plane: the generated trace (seeded, simulate's format with owners, more
than the cluster holds), the objects and pods it makes read by the engine as one gang per workload of all its pods,
the trace's errors, and the figures of a replay (whole, partly started at the end and at most at once, the room they
held, waits)."""
from __future__ import annotations

import pytest

from bench import workload_trace as T
from engine.policy.lower import lower
from engine.policy.sources import check_sources
from engine.reading.load import build_cluster
from testkit.manifests import node


def test_the_generated_trace_is_seeded_mixed_and_more_than_the_cluster_holds() -> None:
    doc = T.generate(60, 60, seed=7)
    assert doc == T.generate(60, 60, seed=7) and doc != T.generate(60, 60, seed=8)
    nodes, jobs = T.read_trace(doc)
    assert len(nodes) == 60 and len(jobs) == 60
    assert {t.kind for t in jobs} == set(T.KINDS)
    assert all(4 <= t.pods <= 8 for t in jobs)
    assert [t.arrival for t in jobs] == sorted(t.arrival for t in jobs) and jobs[0].arrival == 0.0
    asked = sum(t.pods * T.cpu_m(t.requests) for t in jobs)
    assert asked > 60 * T.cpu_m(T.NODE_ALLOCATABLE)  # the cluster cannot hold them all at once
    assert set(doc["jobs"][0]) == {"name", "arrival", "runtime", "pods", "requests", "class", "owner"}


def test_the_generated_load_sets_how_fast_they_arrive() -> None:
    slow, fast = T.generate(60, 60, load=1.0), T.generate(60, 60, load=2.0)
    assert fast["jobs"][-1]["arrival"] < slow["jobs"][-1]["arrival"]


@pytest.mark.parametrize(("key", "value", "message"), [
    ("arival", 3, "jobs\\[0\\] \\(job-000\\): unknown key arival"),
    ("pods", 3, "jobs\\[0\\] \\(job-000\\): pods 3, but its Job makes 5"),
    ("requests", {"cpu": "5"}, "jobs\\[0\\] \\(job-000\\): a pod asks for more cpu than any node has"),
])
def test_a_trace_it_cannot_replay_is_refused_naming_the_job(key: str, value: object, message: str) -> None:
    doc = one_job_trace()
    T.read_trace(doc)
    doc["jobs"][0][key] = value
    with pytest.raises(ValueError, match=message):
        T.read_trace(doc)


def test_a_job_without_an_owner_is_refused() -> None:
    doc = one_job_trace()
    del doc["jobs"][0]["owner"]
    with pytest.raises(ValueError, match=r"jobs\[0\] \(job-000\): no owner"):
        T.read_trace(doc)


def one_job_trace() -> dict:
    return {"nodes": [{"count": 1, "allocatable": {"cpu": "4"}}],
            "jobs": [{"name": "job-000", "arrival": 0, "runtime": 5, "pods": 5, "requests": {"cpu": "1"},
                      "owner": {"kind": "Job", "parallelism": 5}}]}


@pytest.mark.parametrize("owner", [{"kind": "Job", "parallelism": 6}, {"kind": "JobSet", "workers": 3, "parallelism": 2},
                                   {"kind": "PyTorchJob", "workers": 5}, {"kind": "RayCluster", "workers": 4}])
def test_each_workload_s_pods_are_one_gang_of_all_of_them_for_gang_by_workload(owner: dict) -> None:
    t = T.TraceJob("w", 0.0, 10.0, T.shape_pods(owner), {"cpu": "1", "memory": "1Gi"}, owner)
    obj = T.workload_object(t)
    obj["metadata"]["uid"] = "uid-w"
    pods = T.workload_pods(t, "uid-w", "policy-scheduler")
    assert len(pods) == t.pods and len({p["metadata"]["name"] for p in pods}) == t.pods
    assert [f"{T.NS}/{p['metadata']['name']}" for p in pods] == T.pod_keys(t)
    policy = (T.POLICY_DIR / "workloads.policy").read_text()
    rules = lower(check_sources({"workloads.policy": policy}))
    cluster = build_cluster([("t", d) for d in (node("n1", cpu="64", memory="256Gi"), obj, *pods)], gangs=rules.gangs)
    gangs = {p.gang for p in cluster.pending}
    assert len(cluster.pending) == t.pods and len(gangs) == 1 and None not in gangs
    gang = cluster.gangs[gangs.pop()]
    assert (gang.min_member, gang.workload) == (t.pods, owner["kind"])


def test_the_figures_count_whole_and_partly_started_workloads() -> None:
    jobs = [T.TraceJob(name, 0.0, 10.0, 2, {"cpu": "1"}, {"kind": "Job", "parallelism": 2}) for name in "abcd"]
    keys = {t.name: T.pod_keys(t) for t in jobs}
    bound = {keys["a"][0]: 1.0, keys["a"][1]: 1.5,      # whole within the grace: never partly started
             keys["b"][0]: 2.0, keys["b"][1]: 9.0,      # partly started from 4 to 9, then whole
             keys["c"][0]: 3.0}                         # partly started from 5 to the end
    seen = T.Seen("s", created={"a": 0.5, "b": 1.0, "c": 2.0, "d": 3.0}, bound=bound, ended={"a": 11.5}, end=20.0)
    f = T.figures(jobs, seen)
    assert (f.whole, f.ended, f.partial_end, f.partial_max, f.partial_ever) == (2, 1, 1, 2, 2)
    assert (f.pods, f.pods_bound) == (8, 5)
    assert f.held_cpu_s == 24.5  # room held for nothing: a 0.5 s (its first pod), b 7 s, c 17 s (to the end), 1 cpu each
    assert (f.wait_p50, f.wait_p90) == (1.0, 8.0)  # a: 1.5 - 0.5; b: 9 - 1
    assert "| s | 2/4 | 1 | 1 | 2 (2) | 24 | 1.0 / 8.0 | 5/8 |" in T.table([f])
    seen.bound = {keys["b"][0]: 2.0, keys["b"][1]: 9.0, keys["c"][0]: 9.5}  # c partly started after b is whole
    assert T.figures(jobs, seen).partial_max == 1
