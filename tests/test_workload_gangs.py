"""`gang by workload`: the pods of a Job, JobSet, PyTorchJob, MPIJob, RayCluster or LeaderWorkerSet group start whole
or wait, of the size the workload object says (engine.model.workload_gangs, engine.reading.convert.gang_workloads).
Each case has room for part of the gang: without the policy (or without the object's reader) part of it would start."""
from __future__ import annotations

import pytest

from engine.loop.profile import unit_of
from engine.model.gangs import gang_key
from engine.planning.planner import Options, plan_batch
from engine.policy.lower import lower
from engine.policy.parse import PolicyError
from engine.policy.sources import check_sources
from engine.reading.convert.pods import pod_identity
from engine.reading.load import build_cluster
from testkit.manifests import node, pod, podgroup
from testkit.workloads import (
    job,
    job_pod,
    jobset,
    jobset_pod,
    leaderworkerset,
    lws_pod,
    mpi_pod,
    mpijob,
    pytorch_pod,
    pytorchjob,
    ray_pod,
    raycluster,
)

WORKLOADS = 'policy training {\n  applies to all pods\n  gang by workload\n}\n'
OPTIONS = Options(time_limit=2, workers=1)


def rules(text: str = WORKLOADS):
    return lower(check_sources({"t.policy": text}))


def cluster_of(docs: list[dict], text: str | None = WORKLOADS):
    return build_cluster([("t", d) for d in docs], gangs=rules(text).gangs if text else None)


def placed(docs: list[dict], text: str | None = WORKLOADS) -> dict[str, str]:
    if text is None:
        return plan_batch(cluster_of(docs, None), options=OPTIONS).assignments
    return plan_batch(cluster_of(docs, text), rules(text), OPTIONS).assignments


def gangs_of(docs: list[dict]) -> dict[str, tuple[str | None, int | None]]:
    """Each pending pod's gang and that gang's size."""
    cluster = cluster_of(docs)
    return {p.name: (p.gang, cluster.gangs[p.gang].min_member if p.gang else None) for p in cluster.pending}


def test_a_parallel_job_starts_whole_or_waits() -> None:
    pods = [job_pod(f"j-{i}", "j", cpu="1") for i in range(3)]
    docs = [node("n1", cpu="2"), job("j", parallelism=3), *pods]
    assert len(placed(docs, None)) == 2  # without the policy two of three start
    assert placed(docs) == {}
    cluster = cluster_of(docs)
    gang = cluster.gangs["default/Job/j"]
    assert (gang.min_member, gang.source, gang.workload) == (3, "Job default/j", "Job")
    assert len(placed([node("n1", cpu="3"), *docs[1:]])) == 3


def test_a_job_s_gang_is_what_is_left_to_complete() -> None:
    pods = [job_pod(f"j-{i}", "j", cpu="1") for i in range(2)]
    left_two = [job("j", parallelism=3, completions=5, succeeded=3), *pods]
    assert gangs_of(left_two) == {"j-0": ("default/Job/j", 2), "j-1": ("default/Job/j", 2)}
    assert len(placed([node("n1", cpu="2"), *left_two])) == 2  # 5 - 3 = 2 left: the two pending are the gang
    one_left = [job("j", parallelism=3, completions=5, succeeded=4), pods[0]]
    assert gangs_of(one_left) == {"j-0": (None, None)}  # one pod left: no gang
    assert gangs_of([job("j"), pods[0]]) == {"j-0": (None, None)}  # parallelism 1: no gang


def test_a_jobset_is_one_gang_or_one_per_replicated_job_in_order() -> None:
    replicated = [("driver", 1, 1, 1), ("workers", 2, 2, 2)]  # 1 + 2 x 2 = 5 pods
    pods = [jobset_pod("d", "js", "driver", cpu="1"),
            *(jobset_pod(f"w{i}{k}", "js", "workers", i, cpu="1") for i in range(2) for k in range(2))]
    any_order = gangs_of([jobset("js", replicated), *pods])
    assert set(any_order.values()) == {("default/JobSet/js", 5)}
    in_order = gangs_of([jobset("js", replicated, in_order=True), *pods[1:]])
    assert set(in_order.values()) == {("default/JobSet/js/workers", 4)}
    docs = [node("n1", cpu="4"), jobset("js", replicated), *pods]
    assert len(placed(docs, None)) == 4 and placed(docs) == {}
    # InOrder: the driver ran first (bound), the workers are a gang of their own that fits
    bound = jobset_pod("d", "js", "driver", cpu="1", node_name="n1")
    assert len(placed([node("n1", cpu="5"), jobset("js", replicated, in_order=True), bound, *pods[1:]])) == 4


def test_bound_members_count_towards_the_workload_s_gang() -> None:
    pods = [jobset_pod("a", "js", "w", 0, cpu="1", node_name="n1"), jobset_pod("b", "js", "w", 1, cpu="1"),
            jobset_pod("c", "js", "w", 2, cpu="1")]
    docs = [node("n1", cpu="3"), jobset("js", [("w", 3, 1, 1)]), *pods]
    assert len(placed(docs)) == 2
    cluster = cluster_of(docs)
    assert [p.gang for p in cluster.bound] == ["default/JobSet/js"]


def test_a_pytorchjob_is_its_master_and_workers() -> None:
    pods = [pytorch_pod("m", "pt", "master", cpu="1"), *(pytorch_pod(f"w{i}", "pt", "worker", cpu="1") for i in range(2))]
    assert set(gangs_of([pytorchjob("pt", workers=2), *pods]).values()) == {("default/PyTorchJob/pt", 3)}
    docs = [node("n1", cpu="2"), pytorchjob("pt", workers=2), *pods]
    assert len(placed(docs, None)) == 2 and placed(docs) == {}
    assert len(placed([node("n1", cpu="2"), pytorchjob("pt", workers=2, min_available=2), *pods])) == 2


def test_an_mpijob_waiting_for_its_workers_is_a_gang_of_the_workers() -> None:
    launcher = mpi_pod("l", "mpi", "launcher", cpu="1")
    workers = [mpi_pod(f"w{i}", "mpi", "worker", cpu="1") for i in range(2)]
    assert set(gangs_of([mpijob("mpi", 2), launcher, *workers]).values()) == {("default/MPIJob/mpi", 3)}
    waiting = gangs_of([mpijob("mpi", 2, wait_for_workers=True), launcher, *workers])
    assert waiting == {"l": (None, None), "w0": ("default/MPIJob/mpi/worker", 2), "w1": ("default/MPIJob/mpi/worker", 2)}
    assert placed([node("n1", cpu="2"), mpijob("mpi", 2), launcher, *workers]) == {}
    assert set(placed([node("n1", cpu="2"), mpijob("mpi", 2, wait_for_workers=True), *workers])) == {
        "default/w0", "default/w1"}


def test_a_raycluster_is_its_head_and_its_workers_minimum() -> None:
    pods = [ray_pod("head", "rc", cpu="1"), *(ray_pod(f"w{i}", "rc", "gpu", cpu="1") for i in range(4))]
    obj = raycluster("rc", [("gpu", 2, 2)])  # 1 + 2 x 2
    assert set(gangs_of([obj, *pods]).values()) == {("default/RayCluster/rc", 5)}
    docs = [node("n1", cpu="4"), obj, *pods]
    assert len(placed(docs, None)) == 4 and placed(docs) == {}


def test_each_leaderworkerset_group_is_a_gang() -> None:
    pods = [lws_pod(f"g{g}-{w}", "lws", g, w, cpu="1") for g in range(2) for w in range(3)]
    found = gangs_of([leaderworkerset("lws", size=3, replicas=2), *pods])
    assert found["g0-0"] == ("default/LeaderWorkerSet/lws/0", 3) and found["g1-2"] == ("default/LeaderWorkerSet/lws/1", 3)
    cluster = cluster_of([leaderworkerset("lws", size=3, replicas=2), *pods])
    assert cluster.gangs["default/LeaderWorkerSet/lws/1"].source == "LeaderWorkerSet default/lws group 1"
    placed_now = placed([node("n1", cpu="4"), leaderworkerset("lws", size=3, replicas=2), *pods])
    assert len(placed_now) == 3 and len({k.split("-")[0] for k in placed_now}) == 1  # one whole group, not 4 pods


def test_a_workload_that_has_a_podgroup_keeps_the_podgroup() -> None:
    labels = {"scheduling.x-k8s.io/pod-group": "pg"}
    pods = [job_pod(f"j-{i}", "j", cpu="1") for i in range(3)]
    for p in pods:
        p["metadata"]["labels"].update(labels)
    found = gangs_of([podgroup("pg", 2), job("j", parallelism=3), *pods])
    assert set(found.values()) == {("default/pg", 2)}


def test_a_pod_whose_workload_object_is_missing_waits_for_it() -> None:
    docs = [node("n1", cpu="4"), job_pod("j-0", "j", cpu="1"), job_pod("j-1", "j", cpu="1")]
    cluster = cluster_of(docs)
    assert cluster.pending == []
    assert cluster.skipped["default/j-0"].startswith(
        "waiting for its Job default/j to appear: its gang's size (gang by workload, t.policy:3")
    assert cluster.skipped_codes["default/j-0"].value == "InvalidObject"
    assert len(cluster_of(docs, None).pending) == 2  # without `gang by workload` the object is not needed


def test_only_pods_in_the_policy_s_scope_form_workload_gangs() -> None:
    scoped = 'policy ml {\n  applies to pods where namespace == "ml"\n  gang by workload\n}\n'
    docs = [node("n1", cpu="2"), job("j", parallelism=3), *(job_pod(f"j-{i}", "j", cpu="1") for i in range(3))]
    assert len(placed(docs, scoped)) == 2


def test_the_queue_groups_a_workload_s_pods_by_the_key_the_builder_gives_without_the_object() -> None:
    gangs = rules().gangs
    manifests = [job_pod("j-0", "j"), job_pod("j-1", "j"), jobset_pod("s", "js", "w"),
                 lws_pod("l0", "lws", 0, 0), lws_pod("l1", "lws", 1, 0), pytorch_pod("p", "pt", "master"), pod("loner")]
    objects = [job("j", parallelism=2), jobset("js", [("w", 2, 1, 1)]), leaderworkerset("lws", 2, 2),
               pytorchjob("pt", 1)]
    built = {p.name: p.gang for p in cluster_of([*objects, *manifests]).pending}
    keys = {m["metadata"]["name"]: gang_key(pod_identity(m), gangs) for m in manifests}
    assert keys == built and keys["l0"] != keys["l1"]
    assert unit_of(manifests[0], gangs) == unit_of(manifests[1], gangs) == "gang:default/Job/j"
    assert unit_of(manifests[0]) == "default/j-0"  # without the policy, no gang


@pytest.mark.parametrize(("text", "where", "words"), [
    ('policy p {\n  applies to all pods\n  gang by workload min 3\n}\n', "p.policy:3:20", "min"),
    ('policy p {\n  applies to all pods\n  gang by wrkload\n}\n', "p.policy:3:11", "did you mean 'workload'"),
    ('policy p {\n  applies to all pods\n  gang by workload within label "a b"\n}\n', "p.policy:3:", "a b"),
])
def test_gang_by_workload_errors_name_the_file_line_and_column(text: str, where: str, words: str) -> None:
    with pytest.raises(PolicyError) as err:
        check_sources({"p.policy": text})
    rendered = [d.render() for d in err.value.diagnostics]
    assert any(r.startswith(where) and words in r for r in rendered), rendered


def test_the_loop_reads_the_workload_and_binds_its_gang_whole_with_the_crds_absent() -> None:
    from engine.loop.queue import QueueConfig
    from engine.loop.scheduler import Profile, Scheduler, Settings
    from loopfake import FakeAPI
    from loopfake import node as fake_node

    api = FakeAPI(absent_kinds={"JobSet", "PyTorchJob", "MPIJob", "RayCluster", "LeaderWorkerSet"})
    api.put("Node", fake_node("n1", cpu="2"))
    api.put("ConfigMap", {"metadata": {"name": "policies", "namespace": "kube-system"},
                          "data": {"w.policy": WORKLOADS}})
    api.put("Job", job("j", parallelism=3))
    s = Scheduler(api, Settings((Profile("policy-scheduler", ("kube-system", "policies")),),
                                QueueConfig(batch_window=0.0), time_limit=2))
    for r in s.resources:  # an absent CRD: the reflector reads it as none (loop/sync.py)
        s.store.replace(r, [] if r.kind in api.absent_kinds else api.list(r)[0])
    loop = s.loops[0]
    assert loop.refresh_policies()
    for i in range(3):
        s.store.apply("Pod", "ADDED", api.put("Pod", job_pod(f"j-{i}", "j", cpu="1")))
    assert set(loop.queue._unit_of.values()) == {"gang:default/Job/j"}
    loop.cycle([f"default/j-{i}" for i in range(3)]).result()
    assert api.binds == []  # room for two of three: none starts
    s.store.apply("Job", "MODIFIED", api.put("Job", job("j", parallelism=2)))  # parallelism lowered: a gang of 2
    loop.cycle([f"default/j-{i}" for i in range(3)]).result()
    assert len(api.binds) == 2
    s.events.close()
