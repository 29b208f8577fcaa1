"""Native gangs across API versions (issue 28): scheduling.k8s.io PodGroups at v1beta1 (1.37) and v1alpha2 (1.36)
read into one model. 1.37's shapes (`disruptionMode: {single|all: {}}`, `workloadRef`, `preemptionPolicy`) load and
place whole gangs; 1.37's rule that a group's pods agree with it (priority, schedulerName, preemptionPolicy) refuses
the group with upstream's words; each version's shape is refused at the other with a clear error."""
from __future__ import annotations

import pytest

from engine.model.ir import Rules
from engine.planning.planner import Options, plan_batch
from engine.reading.convert.fields import InputError
from engine.reading.load import build_cluster
from testkit.checker import check_evictions, check_plan
from testkit.manifests import (
    NATIVE_V1ALPHA2,
    NATIVE_V1BETA1,
    ZONE_KEY,
    in_group,
    native_group,
    node,
    pod,
    priority_class,
)

BETA = NATIVE_V1BETA1


def _docs(*docs: dict) -> list[tuple[str, dict]]:
    return [(f"doc{i}", d) for i, d in enumerate(docs)]


def plan_for(*docs: dict, preemption: bool = False):
    cluster = build_cluster(_docs(*docs))
    plan = plan_batch(cluster, Rules(), Options(time_limit=3, workers=1, preemption=preemption))
    if not preemption:  # (the checker judges placements on the cluster as it is, before evictions)
        assert check_plan(list(docs), plan.assignments) == []
    return plan


def members(group: str, count: int, cpu: str = "1", **extra) -> list[dict]:
    return [pod(f"{group}-{i}", cpu=cpu, schedulingGroup=in_group(group), **extra) for i in range(count)]


def placed(plan, prefix: str) -> int:
    return sum(1 for k in plan.assignments if k.startswith(f"default/{prefix}-"))


def beta_group(name: str, min_count: int | None, **spec) -> dict:
    """A v1beta1 PodGroup as a 1.37 apiserver returns it: disruptionMode defaulted to `{single: {}}`."""
    group = native_group(name, min_count, api_version=BETA)
    group["spec"].setdefault("disruptionMode", {"single": {}})
    group["spec"].update(spec)
    return group


# --- 1.37's shapes load and place whole gangs ---------------------------------------------------------------

def test_two_v1beta1_gangs_on_room_for_one_start_one_whole() -> None:
    workload = {"apiVersion": BETA, "kind": "Workload", "metadata": {"name": "job", "namespace": "default"},
                "spec": {"podGroupTemplates": [{"name": "workers", "schedulingPolicy": {"gang": {"minCount": 3}}}]}}
    docs = [node("n1", cpu="2"), node("n2", cpu="2"), workload,
            beta_group("a", 3, workloadRef={"workloadName": "job", "templateName": "workers"}),
            beta_group("b", 3, disruptionMode={"all": {}}), *members("a", 3), *members("b", 3)]
    plan = plan_for(*docs)
    assert sorted([placed(plan, "a"), placed(plan, "b")]) == [0, 3]
    loser = "a" if placed(plan, "a") == 0 else "b"
    assert any("minCount 3" in r for r in plan.unschedulable[f"default/{loser}-0"])


def test_a_v1beta1_zonal_gang_goes_in_one_zone() -> None:
    nodes = [node(f"{z}{i}", cpu="2", labels={ZONE_KEY: z}) for z in "ab" for i in range(2)]
    group = beta_group("g", 4, schedulingConstraints={"topology": [{"key": ZONE_KEY}]})
    plan = plan_for(*nodes, pod("filler", cpu="2", node_name="a0"), group, *members("g", 4))
    assert placed(plan, "g") == 4 and {plan.assignments[f"default/g-{i}"][0] for i in range(4)} == {"b"}


def test_both_disruption_mode_shapes_mean_the_same() -> None:
    for version, whole, single in ((BETA, {"all": {}}, {"single": {}}), (NATIVE_V1ALPHA2, "PodGroup", "Pod")):
        for mode, want in ((whole, "PodGroup"), (single, "Pod"), (None, "Pod")):
            group = native_group("g", 2, api_version=version)
            if mode is not None:
                group["spec"]["disruptionMode"] = mode
            assert build_cluster(_docs(group)).native_groups["default/g"].disruption_mode == want, (version, mode)


def test_an_all_mode_v1beta1_group_is_preempted_whole() -> None:
    group = native_group("train", 2, api_version=BETA, disruption="PodGroup")
    docs = [node("n0", cpu="2"), node("n1", cpu="2"), group,
            *(pod(f"train-{i}", cpu="2", node_name=f"n{i}", schedulingGroup=in_group("train")) for i in range(2)),
            pod("high", cpu="1", priority=100)]
    plan = plan_for(*docs, preemption=True)
    assert {v.pod for v in plan.evictions} == {"default/train-0", "default/train-1"}
    assert check_evictions(docs, {v.pod for v in plan.evictions}) == []
    assert check_evictions(docs, {"default/train-0"}) != []  # the checker reads {all: {}} too


def test_the_workload_a_group_came_from_is_read_at_either_version_and_optional() -> None:
    beta = beta_group("b", 2, workloadRef={"workloadName": "job", "templateName": "workers"})
    alpha = native_group("a", 2)
    alpha["spec"]["podGroupTemplateRef"] = {"workload": {"workloadName": "old", "podGroupTemplateName": "w"}}
    groups = build_cluster(_docs(beta, alpha, beta_group("c", 2))).native_groups
    assert (groups["default/b"].workload, groups["default/a"].workload, groups["default/c"].workload) == (
        "job", "old", None)


@pytest.mark.parametrize("version, spec, words", [
    (BETA, {"workloadRef": {"workloadName": "job"}}, "spec.workloadRef: missing field 'templateName'"),
    (BETA, {"workloadRef": {"templateName": "workers"}}, "spec.workloadRef: missing field 'workloadName'"),
    (BETA, {"workloadRef": {}}, "spec.workloadRef: missing field 'workloadName'"),
    (BETA, {"workloadRef": {"workloadName": "job", "templateName": ""}}, "missing field 'templateName'"),
    (BETA, {"workloadRef": {"workloadName": "Job_1", "templateName": "w"}}, "spec.workloadRef.workloadName: 'Job_1' must"),
    (BETA, {"workloadRef": {"workloadName": "job", "templateName": "a.b"}}, "spec.workloadRef.templateName: 'a.b' must"),
    (BETA, {"parentCompositePodGroupName": "parent"}, "spec.workloadRef: must be set when parentCompositePodGroupName"),
    (NATIVE_V1ALPHA2, {"podGroupTemplateRef": {}}, "spec.podGroupTemplateRef: must specify one of: `workload`"),
    (NATIVE_V1ALPHA2, {"podGroupTemplateRef": {"workload": {"workloadName": "job"}}},
     "spec.podGroupTemplateRef.workload: missing field 'podGroupTemplateName'"),
])
def test_a_workload_reference_without_the_names_the_apiserver_requires_is_refused(version, spec, words) -> None:
    """k8s.io/api 1.37 (and 1.36's v1alpha2): a reference's Workload and template names are `+k8s:required`, a DNS
    subdomain and a DNS label; `parentCompositePodGroupName` needs `workloadRef`."""
    group = beta_group("g", 2, **spec) if version == BETA else native_group("g", 2)
    group["spec"].update(spec)
    with pytest.raises(InputError, match="PodGroup default/g") as err:
        build_cluster(_docs(node("n1"), group, *members("g", 2)))
    assert words in str(err.value)
    cluster = build_cluster(_docs(node("n1"), group, *members("g", 2), pod("other")), strict=False)
    assert "pod group 'g' (scheduling.k8s.io) to appear" in cluster.skipped["default/g-0"]  # only its pods wait
    assert [p.key for p in cluster.pending] == ["default/other"]


@pytest.mark.parametrize("version, mode, words", [
    (NATIVE_V1ALPHA2, {"all": {}}, "must be one of Pod, PodGroup in scheduling.k8s.io/v1alpha2, got a mapping"),
    (BETA, "PodGroup", "spec.disruptionMode must be a mapping with one of single, all"),
    (BETA, {"single": {}, "all": {}}, "must set exactly one of single, all"),
    (BETA, {"whole": {}}, "must set exactly one of single, all (unknown: whole)"),
])
def test_a_disruption_mode_of_the_other_version_is_refused_naming_the_group(version, mode, words) -> None:
    group = native_group("g", 2, api_version=version)
    group["spec"]["disruptionMode"] = mode
    with pytest.raises(InputError, match="PodGroup default/g") as err:
        build_cluster(_docs(node("n1"), group, *members("g", 2)))
    assert words in str(err.value)
    cluster = build_cluster(_docs(node("n1"), group, *members("g", 2)), strict=False)
    assert "pod group 'g' (scheduling.k8s.io) to appear" in cluster.skipped["default/g-0"]  # only its pods wait


# --- 1.37: a group's pods agree with it, or the group is refused -------------------------------------------

def test_a_v1beta1_group_whose_pods_priority_differs_is_refused_with_upstreams_words() -> None:
    docs = [node("n1", cpu="4"), beta_group("g", 2, priority=1000), *members("g", 2, priority=0)]
    cluster = build_cluster(_docs(*docs))
    why = "all pods in a single pod group should have the same priority as the pod group's priority, got 0 and 1000"
    assert cluster.refused_groups == {"default/g": why}
    assert cluster.skipped["default/g-0"] == why and not cluster.pending
    # 1.36 lent the group's priority to its pods instead
    legacy = build_cluster(_docs(node("n1", cpu="4"), native_group("g", 2, priority=1000), *members("g", 2, priority=0)))
    assert not legacy.refused_groups and {p.priority for p in legacy.pending} == {1000}


def test_a_v1beta1_groups_priority_is_resolved_as_admission_would() -> None:
    default = priority_class("usual", 100, global_default=True)
    cluster = build_cluster(_docs(node("n1", cpu="4"), default, beta_group("g", 2), *members("g", 2)))
    assert cluster.native_groups["default/g"].priority == 100 and not cluster.refused_groups
    assert len(cluster.pending) == 2
    named = build_cluster(_docs(node("n1", cpu="4"), priority_class("high", 7), beta_group("g", 2, priorityClassName="high"),
                                *members("g", 2, priorityClassName="high")))
    assert not named.refused_groups and len(named.pending) == 2


def test_a_running_member_of_another_scheduler_refuses_a_v1beta1_group() -> None:
    running = pod("g-run", cpu="1", node_name="n1", scheduler="default-scheduler", schedulingGroup=in_group("g"))
    cluster = build_cluster(_docs(node("n1", cpu="4"), beta_group("g", 2), running, *members("g", 1)))
    assert "should have the same .spec.schedulerName set, got: 'default-scheduler' and 'policy-scheduler'" in (
        cluster.refused_groups["default/g"])
    legacy = build_cluster(_docs(node("n1", cpu="4"), native_group("g", 2), running, *members("g", 1)))
    assert not legacy.refused_groups and len(legacy.pending) == 1  # 1.36 judged the waiting pods only


def test_a_group_preemption_policy_must_be_its_pods() -> None:
    never = beta_group("g", 2, preemptionPolicy="Never")
    cluster = build_cluster(_docs(node("n1", cpu="4"), never, *members("g", 2)))
    assert cluster.refused_groups["default/g"] == ("all pods in a single pod group should have the same preemption "
                                                   "policy as the pod group's preemption policy, got "
                                                   "PreemptLowerPriority and Never")
    agreeing = build_cluster(_docs(node("n1", cpu="4"), never, *members("g", 2, preemptionPolicy="Never")))
    assert not agreeing.refused_groups and agreeing.native_groups["default/g"].preemption_policy == "Never"


def test_without_a_group_preemption_policy_the_pods_agree_among_themselves() -> None:
    pods = [*members("g", 1), pod("g-x", cpu="1", preemptionPolicy="Never", schedulingGroup=in_group("g"))]
    cluster = build_cluster(_docs(node("n1", cpu="4"), beta_group("g", 2), *pods))
    assert cluster.refused_groups["default/g"] == ("all pods in a single pod group should have the same preemption "
                                                   "policy, got Never and PreemptLowerPriority")


def test_a_never_group_does_not_preempt() -> None:
    low = pod("low", cpu="2", node_name="n1", priority=0)
    group = beta_group("g", 2, priority=100, preemptionPolicy="Never")
    never = plan_for(node("n1", cpu="2"), low, group, *members("g", 2, priority=100, preemptionPolicy="Never"),
                     preemption=True)
    assert not never.evictions and not never.assignments
    eager = plan_for(node("n1", cpu="2"), low, beta_group("g", 2, priority=100), *members("g", 2, priority=100),
                     preemption=True)
    assert {v.pod for v in eager.evictions} == {"default/low"}


def test_a_group_of_pods_that_agree_is_not_refused_and_other_groups_go_on() -> None:
    docs = [node("n1", cpu="4"), beta_group("bad", 2, priority=5), *members("bad", 2),
            beta_group("good", 2), *members("good", 2)]
    plan = plan_for(*docs)
    assert placed(plan, "good") == 2 and placed(plan, "bad") == 0


# --- in the loop: minCount re-read each cycle, each version's condition ---------------------------------------

def _never():
    import threading
    return threading.Event()


def _loop_with(group: dict, count: int, version: tuple[int, int] | None = (1, 37)):
    from engine.reading.objects import NATIVE_POD_GROUP
    from loopfake import FakeAPI, synced_loop
    from loopfake import node as one_cpu_node
    from loopfake import pod as one_cpu_pod
    api = FakeAPI(version=version)
    for i in range(2):
        api.put("Node", one_cpu_node(f"n{i}"))
    api.put(NATIVE_POD_GROUP, group)
    for i in range(count):
        api.put("Pod", one_cpu_pod(f"g-{i}", schedulingGroup=in_group("g")))
    s, loop = synced_loop(api, backoff=0.0)
    return api, s, loop


def _group_conditions(api) -> dict[str, tuple[str, str, str]]:
    from engine.reading.objects import NATIVE_POD_GROUP
    group = api.objects[(NATIVE_POD_GROUP, "default", "g")]
    return {c["type"]: (c["status"], c["reason"], c["message"]) for c in (group.get("status") or {}).get("conditions") or []}


def test_a_lowered_min_count_is_read_by_the_next_cycle() -> None:
    from engine.reading.objects import NATIVE_POD_GROUP
    api, s, loop = _loop_with(beta_group("g", 3), 2)
    loop.cycle(loop.queue.next_batch(_never(), idle=0.1)).result()
    assert api.binds == []
    lowered = beta_group("g", 2)
    s.store.apply(NATIVE_POD_GROUP, "MODIFIED", api.put(NATIVE_POD_GROUP, lowered))  # minCount is mutable in 1.37
    batch = loop.queue.next_batch(_never(), idle=0.1)
    assert sorted(batch) == ["default/g-0", "default/g-1"], "the group's update wakes its pods"
    loop.cycle(batch).result()
    assert sorted(k for k, _ in api.binds) == ["default/g-0", "default/g-1"]


def test_a_v1beta1_group_gets_pod_group_initially_scheduled_and_a_v1alpha2_one_pod_group_scheduled() -> None:
    for group, kind in ((beta_group("g", 2), "PodGroupInitiallyScheduled"), (native_group("g", 2), "PodGroupScheduled")):
        api, s, loop = _loop_with(group, 2)
        loop.cycle(loop.queue.next_batch(_never(), idle=0.1)).result()
        s.events.close()
        conditions = _group_conditions(api)
        assert set(conditions) == {kind} and conditions[kind][:2] == ("True", "Scheduled")


@pytest.mark.parametrize("version, reason", [((1, 37), "SchedulerError"), ((1, 38), "PodGroupError"),
                                             (None, "SchedulerError")])
def test_a_refused_group_is_told_why_in_its_condition(version, reason) -> None:
    """A group refused for its configuration: SchedulerError up to 1.37, PodGroupError from 1.38 on (upstream's
    updatePodGroupConditionWithError for a validationError), 1.37's when the release could not be read."""
    api, s, loop = _loop_with(beta_group("g", 2, priority=10), 2, version)
    loop.cycle(loop.queue.next_batch(_never(), idle=0.1)).result()
    s.events.close()
    assert api.binds == []
    assert _group_conditions(api)["PodGroupInitiallyScheduled"] == (
        "False", reason,
        "[InvalidObject] all pods in a single pod group should have the same priority as the pod group's priority, "
        "got 0 and 10")


def test_pod_group_initially_scheduled_is_set_once_and_never_reverted() -> None:
    from engine.loop.binder import EventSink
    patches: list[tuple] = []

    class _Api:
        def patch(self, *args):
            patches.append(args)

    sink = EventSink(_Api())  # type: ignore[arg-type]
    group = beta_group("g", 2)
    group["metadata"].update(resourceVersion="7", generation=1)
    group["status"] = {"conditions": [{"type": "PodGroupInitiallyScheduled", "status": "True", "reason": "Scheduled",
                                       "message": "2 pod(s) of the group placed"}]}
    sink.group_scheduled(group, False, "members were evicted; a replacement does not fit", "Unschedulable")
    group["status"] = {}
    sink.group_scheduled(group, False, "no room", "Unschedulable")
    sink.close()
    ((_kind, _ns, _name, body, _sub),) = patches  # only the group without the condition is written
    (cond,) = body["status"]["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == ("PodGroupInitiallyScheduled", "False", "Unschedulable")


def test_one_group_at_both_versions_is_one_object_twice() -> None:
    with pytest.raises(InputError, match="PodGroup default/g: duplicate object"):
        build_cluster(_docs(native_group("g", 2), beta_group("g", 3)))
    cluster = build_cluster(_docs(native_group("g", 2), beta_group("g", 3)), strict=False)
    assert cluster.native_groups["default/g"].min_member == 2  # the first stays


def test_dry_run_reads_a_1_37_snapshot_as_kubectl_prints_it(tmp_path) -> None:
    """The issue's failure: `dry-run` refused 1.37's PodGroups (`disruptionMode ... got a mapping`)."""
    import json
    import os
    import subprocess
    import sys

    import yaml
    docs = [node("n1", cpu="2"), node("n2", cpu="2"), beta_group("a", 3), beta_group("b", 3, disruptionMode={"all": {}}),
            *members("a", 3), *members("b", 3)]
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": docs}))
    out = subprocess.run([sys.executable, "-m", "engine", "dry-run", "--cluster", str(path), "-o", "json"],
                         capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "300"})
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    assert len(plan["assignments"]) == 3 and len({k.split("/")[1][0] for k in plan["assignments"]}) == 1
