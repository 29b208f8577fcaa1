"""Gang identity is decided once, when the cluster is built (engine.model.gangs), and every stage reads it: compile,
preemption, the loop's queue and its binder. A policy's `gang by label` gang is a gang everywhere, not only in
compile."""
from __future__ import annotations

from engine.loop.queue import QueueConfig
from engine.loop.scheduler import Profile, Scheduler, Settings, unit_of
from engine.model.gangs import gang_key
from engine.planning.planner import Options, plan_batch
from engine.policy.lower import lower
from engine.policy.sources import check_sources
from engine.reading.convert.pods import pod_identity
from engine.reading.load import build_cluster
from loopfake import FakeAPI
from loopfake import node as fake_node
from loopfake import pod as fake_pod
from testkit.manifests import node, pod, podgroup

GANG = 'policy jobs {\n  applies to pods where label "job" exists\n  gang by label "job" min 2\n}\n'
ZONAL = 'policy zonal {\n  applies to all pods\n  gang by podgroup within zone\n}\n'
PG_LABEL = "scheduling.x-k8s.io/pod-group"


def rules(text: str):
    return lower(check_sources({"t.policy": text}))


def test_the_builder_assigns_policy_and_podgroup_gangs_to_pending_and_bound_pods() -> None:
    gangs = rules(GANG).gangs
    docs = [node("n1"), podgroup("pg", 2),
            pod("a", labels={"job": "x"}), pod("b", labels={"job": "x"}), pod("old", labels={"job": "x"}, node_name="n1"),
            pod("m", labels={PG_LABEL: "pg", "job": "x"}),  # its own PodGroup wins over the policy's gang
            pod("loner")]
    cluster = build_cluster([("t", d) for d in docs], gangs=gangs)
    of = {p.name: p.gang for p in cluster.pending + cluster.bound}
    assert of == {"a": "default/job=x", "b": "default/job=x", "old": "default/job=x", "m": "default/pg", "loner": None}
    assert cluster.gangs["default/job=x"].min_member == 2 and cluster.gangs["default/job=x"].source.startswith("t.policy:3")
    assert cluster.gangs["default/pg"].source == "PodGroup default/pg"
    without = build_cluster([("t", d) for d in docs])  # no policies: only the PodGroup gang exists
    assert {p.name: p.gang for p in without.pending} == {"a": None, "b": None, "m": "default/pg", "loner": None}


def test_a_podgroup_policy_adds_its_domain() -> None:
    docs = [node("n1"), podgroup("pg", 2), pod("m", labels={PG_LABEL: "pg"})]
    cluster = build_cluster([("t", d) for d in docs], gangs=rules(ZONAL).gangs)
    assert cluster.gangs["default/pg"].within == "topology.kubernetes.io/zone"


def test_the_queue_groups_pods_by_the_same_identity_the_builder_decides() -> None:
    gangs = rules(GANG).gangs
    manifests = [pod("a", labels={"job": "x"}), pod("b", labels={"job": "x"}), pod("m", labels={PG_LABEL: "pg"}),
                 pod("c", labels={"job": "y"}), pod("loner")]
    cluster = build_cluster([("t", d) for d in [podgroup("pg", 1), *manifests]], gangs=gangs)
    built = {p.name: p.gang for p in cluster.pending}
    assert {m["metadata"]["name"]: gang_key(pod_identity(m), gangs) for m in manifests} == built
    units = {m["metadata"]["name"]: unit_of(m, gangs) for m in manifests}
    assert units["a"] == units["b"] == "gang:default/job=x" and units["c"] != units["a"]
    assert units["loner"] == "default/loner" and units["m"] == "gang:default/pg"
    assert unit_of(pod("a", labels={"job": "x"})) == "default/a"  # without the policy, no gang


def test_a_policy_gang_is_batched_and_backed_off_as_one_unit_in_the_loop() -> None:
    api = FakeAPI()
    api.put("Node", fake_node("n1", cpu="1"))
    api.put("ConfigMap", {"metadata": {"name": "policies", "namespace": "kube-system"}, "data": {"jobs.policy": GANG}})
    s = Scheduler(api, Settings((Profile("policy-scheduler", ("kube-system", "policies")),),
                                QueueConfig(batch_window=0.0), time_limit=2))
    for r in s.resources:
        s.store.replace(r, api.list(r)[0])
    loop = s.loops[0]
    assert loop.refresh_policies()
    for name in ("a", "b"):  # arrive one by one: the second joins the first's unit
        s.store.apply("Pod", "ADDED", api.put("Pod", fake_pod(name, labels={"job": "x"})))
    queue = loop.queue
    assert queue._unit_of == {"default/a": "gang:default/job=x", "default/b": "gang:default/job=x"}
    loop.cycle(["default/a", "default/b"]).result()  # room for one of two: the gang does not start
    assert api.binds == []
    unit = queue._units["gang:default/job=x"]
    assert set(unit.waiting) == {"default/a", "default/b"} and unit.attempts == 1  # backed off together, once
    s.events.close()


def test_a_policy_gang_of_preemptors_evicts_for_all_its_members_or_none() -> None:
    docs = [node("n1", cpu="2"), pod("low", cpu="2", node_name="n1", priority=0),
            pod("a", cpu="1", priority=100, labels={"job": "x"}), pod("b", cpu="2", priority=100, labels={"job": "x"})]
    policy = rules(GANG)
    plan = plan_batch(build_cluster([("t", d) for d in docs], gangs=policy.gangs), policy, Options(time_limit=2, workers=1))
    assert plan.assignments == {} and not plan.evictions  # evicting `low` would make room for `a` alone
    assert any("whole gang" in r for r in plan.unschedulable["default/a"])
    alone = plan_batch(build_cluster([("t", d) for d in docs]), options=Options(time_limit=2, workers=1))
    assert len(alone.assignments) == 1 and [v.pod for v in alone.evictions] == ["default/low"]  # no gang: one goes


def test_the_plan_names_each_placed_member_s_gang_for_the_binder() -> None:
    docs = [node("n1", cpu="4"), pod("a", labels={"job": "x"}), pod("b", labels={"job": "x"}), pod("loner")]
    policy = rules(GANG)
    plan = plan_batch(build_cluster([("t", d) for d in docs], gangs=policy.gangs), policy, Options(time_limit=2, workers=1))
    assert len(plan.assignments) == 3
    assert plan.details.gangs == {"default/a": "default/job=x", "default/b": "default/job=x"}
