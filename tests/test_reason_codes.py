"""Reasons a program can read (issue 49, point 7): every waiting pod and group gets codes from one set
(engine.model.reasons.Code), the dominant first, with the objects each names and a next step; in the dry-run's JSON,
its table, the loop's PodScheduled and group conditions (the reason stays upstream's, the message opens with the
code) and a gauge by code. Each code is produced here by a cluster that waits for that reason."""

from __future__ import annotations

import json
import threading

from prometheus_client import generate_latest

from engine.kinds import KINDS
from engine.model.ir import Rules
from engine.model.reasons import NEXT_STEP, Code, Diagnosis, Ref, code_of, prefixed
from engine.planning.planner import Options, plan_batch
from engine.reading.load import build_cluster
from runner import run
from testkit.manifests import (
    claim,
    claims,
    device_class,
    device_request,
    gpu,
    in_group,
    mounts,
    native_group,
    node,
    pod,
    podgroup,
    resource_claim,
    resource_slice,
    spread,
    volume,
)

ZONE = "topology.kubernetes.io/zone"
RACK = "example.com/rack"


def planned(*docs: dict, preemption: bool = True):
    cluster = build_cluster([(f"doc{i}", d) for i, d in enumerate(docs)])
    return plan_batch(cluster, Rules(), Options(time_limit=3, workers=1, preemption=preemption))


def codes(plan, name: str) -> list[Code]:
    return [c.code for c in plan.waiting_reasons()[f"default/{name}"].causes]


def first(plan, name: str):
    return plan.waiting_reasons()[f"default/{name}"].causes[0]


# --- each code, from a cluster that waits for it -------------------------------------------------------------

def test_no_node_big_enough_is_capacity_naming_the_nodes() -> None:
    plan = planned(node("n1", cpu="1"), node("n2", cpu="1"), pod("big", cpu="3"))
    cause = first(plan, "big")
    assert cause.code is Code.CAPACITY and cause.nodes == 2
    assert set(cause.objects) == {Ref("Node", "n1"), Ref("Node", "n2")}


def test_room_split_across_nodes_is_fragmentation_not_capacity() -> None:
    # 2 cpu free in all, 1 on each node: a 2-cpu pod fits on none; a 3-cpu pod is short in total (Capacity)
    plan = planned(node("n1", cpu="1"), node("n2", cpu="1"), pod("two", cpu="2"), pod("three", cpu="3"))
    assert codes(plan, "two") == [Code.FRAGMENTATION]
    assert codes(plan, "three") == [Code.CAPACITY]


def test_room_the_batch_split_is_fragmentation_after_the_plan() -> None:
    # the plan's two small pods leave 1 cpu on each node: the 2-cpu pod of lower priority finds it split
    docs = [node("n1", cpu="2", labels={"at": "1"}), node("n2", cpu="2", labels={"at": "2"}),
            pod("a", cpu="1", priority=10, nodeSelector={"at": "1"}),
            pod("b", cpu="1", priority=10, nodeSelector={"at": "2"}), pod("wide", cpu="2")]
    plan = planned(*docs, preemption=False)
    assert len(plan.assignments) == 2 and "default/wide" in plan.unschedulable
    assert codes(plan, "wide") == [Code.FRAGMENTATION]


def test_a_gang_no_rack_holds_is_topology_naming_its_group() -> None:
    docs = [node("a1", cpu="1", labels={RACK: "a"}), node("b1", cpu="1", labels={RACK: "b"}),
            native_group("g", 2, topology=RACK),
            *[pod(f"g-{i}", cpu="1", schedulingGroup=in_group("g")) for i in range(2)]]
    plan = planned(*docs)
    assert plan.assignments == {}
    cause = first(plan, "g-0")
    assert cause.code is Code.TOPOLOGY and cause.objects == (Ref("PodGroup", "g", "default"),)
    assert plan.group_reasons()["default/g"].code is Code.TOPOLOGY


def test_a_topology_spread_is_topology() -> None:
    # zone b's one node is tainted (the spread still counts it: nodeTaintsPolicy Ignore): w2 would skew zone a
    tainted = node("b1", cpu="8", labels={ZONE: "b"})
    tainted["spec"]["taints"] = [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]
    docs = [node("a1", cpu="8", labels={ZONE: "a"}), tainted,
            pod("w0", node_name="a1", labels={"app": "w"}), pod("w1", node_name="a1", labels={"app": "w"}),
            pod("w2", labels={"app": "w"}, topologySpreadConstraints=[spread({"app": "w"}, ZONE)])]
    plan = planned(*docs)
    assert codes(plan, "w2") == [Code.TOPOLOGY, Code.POLICY]


def test_a_quota_at_its_max_is_quota_naming_the_quota() -> None:
    quota = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota",
             "metadata": {"name": "quota", "namespace": "default"}, "spec": {"max": {"cpu": "1"}}}
    plan = planned(node("n1", cpu="8"), quota, pod("p", cpu="2"))
    cause = first(plan, "p")
    assert cause.code is Code.QUOTA and cause.objects == (Ref("Quota", "quota", "default"),)


def test_a_gang_short_of_members_is_gang_incomplete() -> None:
    docs = [node("n1", cpu="8"), podgroup("g", 3),
            *[pod(f"g-{i}", labels={"scheduling.x-k8s.io/pod-group": "g"}) for i in range(2)]]
    plan = planned(*docs)
    cause = first(plan, "g-0")
    assert cause.code is Code.GANG_INCOMPLETE and cause.objects == (Ref("PodGroup", "g", "default"),)
    assert json.loads(json.dumps(plan.to_dict()))["groupReasons"]["default/g"]["code"] == "GangIncomplete"


def test_room_held_for_another_jobs_reservation_is_reserved_naming_it() -> None:
    from test_timeline import plan as timeline_plan
    _, got = timeline_plan()
    cause = first(got, "long-0")  # n1 and n2 are held for the gang from 12:20; n3 and n4 are full
    assert cause.code is Code.RESERVED and Ref("PodGroup", "train", "default") in cause.objects
    assert Code.CAPACITY in codes(got, "long-0")


def test_a_selector_no_node_matches_is_policy_and_a_taint_too() -> None:
    tainted = node("t1", cpu="8")
    tainted["spec"]["taints"] = [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]
    plan = planned(node("n1", cpu="8"), tainted, pod("p", nodeSelector={"disk": "ssd"}), pod("q", nodeSelector={}))
    assert codes(plan, "p") == [Code.POLICY]
    assert first(plan, "p").nodes == 2


def test_a_pod_whose_own_selector_picks_full_nodes_waits_for_capacity_first() -> None:
    # 1 node of 4 selected, and it is full: the nodes the selector leaves out are said second, not first
    docs = [node(f"n{i}", cpu="1", labels={"pool": "big" if i == 0 else "small"}) for i in range(4)]
    plan = planned(*docs, pod("p", cpu="2", nodeSelector={"pool": "big"}))
    assert codes(plan, "p") == [Code.CAPACITY, Code.POLICY]
    assert [c.nodes for c in plan.waiting_reasons()["default/p"].causes] == [1, 3]


def test_no_free_device_is_device_naming_the_claim() -> None:
    docs = [node("n1"), device_class(), resource_slice("n1", [gpu("g0")]),
            resource_claim("held", allocated=[("n1", "g0")], node="n1"),
            pod("holder", node_name="n1", resourceClaims=claims("held")),
            resource_claim("c2", device_request()), pod("p", resourceClaims=claims("c2"))]
    plan = planned(*docs)
    cause = first(plan, "p")
    assert cause.code is Code.DEVICE and cause.objects == (Ref("ResourceClaim", "c2", "default"),)


def test_a_missing_device_class_is_invalid_object() -> None:
    docs = [node("n1"), device_class(), resource_slice("n1", [gpu("g0")]),
            resource_claim("c", device_request(device_class_name="gpus")), pod("p", resourceClaims=claims("c"))]
    plan = planned(*docs)
    assert codes(plan, "p") == [Code.INVALID_OBJECT]
    assert first(plan, "p").objects == (Ref("ResourceClaim", "c", "default"),)


def test_a_volume_in_a_full_zone_is_volume_naming_the_claim() -> None:
    docs = [node(f"n-{z}", cpu="4", labels={ZONE: z}) for z in ("a", "c")]
    docs += [volume("pv-c", zone="c", claim_ref=("default", "data")), claim("data", volume="pv-c"),
             pod("db", volumes=mounts("data"))]
    plan = planned(*docs)
    assert plan.assignments == {"default/db": "n-c"}
    docs += [pod("hog", cpu="4", node_name="n-c")]
    plan = planned(*docs, preemption=False)
    assert Code.VOLUME in codes(plan, "db")
    assert Ref("PersistentVolumeClaim", "data", "default") in next(
        c for c in plan.waiting_reasons()["default/db"].causes if c.code is Code.VOLUME).objects


def test_a_preemptor_waits_for_its_victims_as_preemption_pending() -> None:
    plan = planned(node("n1", cpu="2"), pod("low", cpu="2", node_name="n1"), pod("high", cpu="1", priority=100))
    assert plan.preemptions["default/high"].node == "n1"
    cause = first(plan, "high")
    assert cause.code is Code.PREEMPTION_PENDING
    assert cause.objects == (Ref("Node", "n1"), Ref("Pod", "low", "default"))
    assert plan.to_dict()["reasons"]["default/high"]["code"] == "PreemptionPending"


def test_a_class_explained_after_its_time_is_not_reached() -> None:
    from clocks import StoppedClock
    from engine.planning.compile import Deadline, compile_cluster
    from engine.planning.plan import plan_from_solution
    from engine.solve import solve
    docs = [node("n1", cpu="1"), node("n2", cpu="1")] + [pod(f"p{i}", cpu="1") for i in range(3)]
    compiled = compile_cluster(build_cluster([("t", d) for d in docs]))
    solution = solve(compiled.problem, time_limit=5, workers=1)
    clock = StoppedClock()
    late = plan_from_solution(compiled, solution, 0.0, explain_by=Deadline(clock.now, clock))
    (key,) = late.unschedulable
    assert late.reasons[key].code is Code.NOT_REACHED


def test_a_pod_whose_planning_fails_is_scheduler_error(monkeypatch) -> None:
    import engine.planning.planner as planner
    real = planner.make_plan

    def failing(cluster, *a, **k):
        if any(p.name == "bad" for p in cluster.pending):
            raise RuntimeError("boom")
        return real(cluster, *a, **k)
    monkeypatch.setattr(planner, "make_plan", failing)
    plan = planned(node("n1", cpu="8"), pod("good"), pod("bad"))
    assert plan.assignments == {"default/good": "n1"}
    assert codes(plan, "bad") == [Code.SCHEDULER_ERROR]


# --- the set, and where codes show -------------------------------------------------------------------------

def test_every_kind_declares_its_code_and_every_code_has_a_next_step() -> None:
    assert all("code" in vars(type(kind)) for kind in KINDS), [k.name for k in KINDS if "code" not in vars(type(k))]
    assert set(NEXT_STEP) == set(Code)
    assert all(code.value[0].isupper() and "-" not in code.value for code in Code)  # CamelCase, as condition reasons


def test_the_json_adds_reasons_beside_the_words_and_changes_nothing_else() -> None:
    plan = run([node("n1", cpu="1"), pod("ok", cpu="1", priority=10), pod("big", cpu="4")])
    out = json.loads(json.dumps(plan.to_dict()))
    assert out["unschedulable"]["default/big"] == plan.unschedulable["default/big"]  # the words as before
    assert out["reasons"] == {"default/big": {"code": "Capacity", "causes": [
        {"code": "Capacity", "nodes": 1, "objects": [{"kind": "Node", "name": "n1"}], "next": NEXT_STEP[Code.CAPACITY]}]}}
    assert "groupReasons" not in out
    everyone = run([node("n1", cpu="1"), pod("ok", cpu="1")]).to_dict()
    assert "reasons" not in everyone and "groupReasons" not in everyone


def test_the_table_has_a_code_column(tmp_path) -> None:
    from io import StringIO

    from rich.console import Console

    from engine.output import print_table
    plan = run([node("n1", cpu="1"), node("n2", cpu="1"), node("n3", cpu="8", labels={"pool": "x"}),
                pod("frag", cpu="2", nodeSelector={"pool": "y"}), pod("two", cpu="2", priority=-1)])
    buffer = StringIO()
    print_table(plan, Console(file=buffer, width=160))
    text = buffer.getvalue()
    header = next(line for line in text.splitlines() if "why" in line)
    assert "code" in header
    row = next(line for line in text.splitlines() if "default/frag" in line)
    assert "Policy" in row


def test_a_prefixed_message_parses_back_to_its_code() -> None:
    message = prefixed(Code.TOPOLOGY, "0/3 nodes are available: 3 node(s) didn't match pod topology spread constraints.")
    assert message.startswith("[Topology] 0/3") and code_of(message) is Code.TOPOLOGY
    assert code_of("0/3 nodes are available: [x] y") is None and code_of("[Nope] words") is None
    assert Diagnosis.of([]).causes == ()


# --- the loop: conditions and the gauge --------------------------------------------------------------------

def _samples(s) -> dict[str, float]:
    text = generate_latest(s.metrics.registry).decode()
    return {key: float(value) for key, _, value in (line.rpartition(" ") for line in text.splitlines())
            if key.startswith("policy_scheduler_pods_waiting_by_reason")}


def test_the_loop_opens_the_condition_message_with_the_code_and_counts_it() -> None:
    from loopfake import FakeAPI, synced_loop
    from loopfake import node as one_cpu_node
    from loopfake import pod as loop_pod
    api = FakeAPI()
    api.put("Node", one_cpu_node("n1"))
    api.put("Pod", loop_pod("big", cpu="4"))
    api.put("Pod", loop_pod("fits"))
    s, loop = synced_loop(api)
    loop.cycle(["default/big", "default/fits"]).result()
    loop.flush_binds()
    s.events.close()
    assert api.binds == [("default/fits", "n1")]
    assert api.condition_reasons["default/big"] == "Unschedulable"  # the autoscaler's and kubectl's word, kept
    assert api.conditions["default/big"].startswith("[Capacity] 0/1 nodes are available: 1 Insufficient cpu")
    told = [message for _, _, reason, message in api.events if reason == "FailedScheduling"]
    assert told and not told[0].startswith("[")  # the event says the words alone, as upstream's
    gauge = _samples(s)
    key = 'policy_scheduler_pods_waiting_by_reason{profile="policy-scheduler",reason="%s"}'
    assert gauge[key % "Capacity"] == 1.0 and gauge[key % "Topology"] == 0.0
    assert len(gauge) == len(Code)  # a series for every code of the set
    loop.feed._pod_changed(api.objects[("Pod", "default", "big")], None)  # deleted: it waits no more
    assert _samples(s)[key % "Capacity"] == 0.0


def test_a_native_group_left_out_has_its_code_in_its_condition() -> None:
    from engine.reading.objects import NATIVE_POD_GROUP
    from loopfake import FakeAPI, synced_loop
    from loopfake import node as one_cpu_node
    from loopfake import pod as loop_pod
    api = FakeAPI()
    for i in range(2):
        api.put("Node", one_cpu_node(f"n{i}", labels={RACK: f"r{i}"}))
    api.put(NATIVE_POD_GROUP, native_group("g", 2, topology=RACK))
    for i in range(2):
        api.put("Pod", loop_pod(f"g-{i}", schedulingGroup=in_group("g")))
    s, loop = synced_loop(api)
    loop.cycle(loop.queue.next_batch(threading.Event(), idle=0.1)).result()
    s.events.close()
    group = api.objects[(NATIVE_POD_GROUP, "default", "g")]
    [condition] = group["status"]["conditions"]
    assert (condition["status"], condition["reason"]) == ("False", "Unschedulable")
    assert condition["message"].startswith("[Topology] ")
    assert api.conditions["default/g-0"].startswith("[Topology] ")


def test_dry_run_and_explain_print_the_codes(tmp_path) -> None:
    from test_cli_output import cli, snapshot
    path = snapshot(tmp_path, node("n1", cpu="1"), node("n2", cpu="1"), pod("two", cpu="2"))
    out = json.loads(cli("dry-run", "--cluster", path, "-o", "json", "-q").stdout)
    assert out["reasons"]["default/two"]["code"] == "Fragmentation"
    assert json.loads(cli("explain", "--cluster", path, "default/two", "-o", "json").stdout)["reasons"] == \
        out["reasons"]["default/two"]
    assert "default/two is unschedulable (Fragmentation):" in cli("explain", "--cluster", path, "default/two").stdout


def test_a_cluster_without_nodes_is_capacity() -> None:
    plan = planned(pod("p"))
    assert codes(plan, "p") == [Code.CAPACITY]


def test_a_pod_skipped_for_a_missing_object_is_invalid_object_and_a_gated_one_has_no_code() -> None:
    gated = pod("gated")
    gated["spec"]["schedulingGates"] = [{"name": "wait"}]
    plan = planned(node("n1"), pod("orphan", labels={"scheduling.x-k8s.io/pod-group": "nope"}),
                   pod("classless", priorityClassName="missing"), gated)
    assert set(plan.skipped) == {"default/orphan", "default/classless", "default/gated"}
    out = plan.to_dict()["reasons"]
    assert {key: d["code"] for key, d in out.items()} == {"default/orphan": "InvalidObject",
                                                         "default/classless": "InvalidObject"}


def test_room_split_over_nodes_full_before_the_plan_is_fragmentation_beside_a_plan_check() -> None:
    # n3 has the room but the plan put a pod there that keeps ours away (Topology, dominant: n3 came closest); n1 and n2
    # have 1 cpu each before the plan: the 2 cpu are free in total there, on neither alone
    from testkit.manifests import anti, term
    docs = [node("n1", cpu="1"), node("n2", cpu="1"), node("n3", cpu="8"),
            pod("guard", cpu="4", priority=100, labels={"app": "guard"}, affinity=anti(term({"app": "w"}))),
            pod("w", cpu="2", labels={"app": "w"})]
    plan = planned(*docs, preemption=False)
    assert plan.assignments == {"default/guard": "n3"}
    assert codes(plan, "w") == [Code.TOPOLOGY, Code.FRAGMENTATION]


def test_the_loop_tells_a_waiting_pods_reservation_after_its_code() -> None:
    """The running pod on the one node ends by its activeDeadlineSeconds: the pod that cannot start now gets a
    reservation there, and its condition's message says when and where after the code, in the form the queue view
    parses."""
    import time as clock

    from engine.model.reasons import ExpectedStart, words_of
    from loopfake import FakeAPI, synced_loop
    from loopfake import node as one_cpu_node
    from loopfake import pod as loop_pod
    started = clock.strftime("%Y-%m-%dT%H:%M:%SZ", clock.gmtime(clock.time() - 60))
    api = FakeAPI()
    api.put("Node", one_cpu_node("n1"))
    running = loop_pod("running", node_name="n1", activeDeadlineSeconds=600)
    running["status"]["startTime"] = started
    api.put("Pod", running)
    api.put("Pod", loop_pod("next"))
    s, loop = synced_loop(api)
    loop.cycle(["default/next"]).result()
    loop.flush_binds()
    s.events.close()
    message = api.conditions["default/next"]
    expected = ExpectedStart.parse(message)
    assert code_of(message) is Code.CAPACITY and expected is not None and expected.reserved == "n1"
    assert expected.start is not None and abs(expected.start - (clock.time() - 60 + 600)) < 5
    assert words_of(message).startswith("0/1 nodes are available") and "reserved: expected to start on n1" in message
    assert ExpectedStart.parse(prefixed(Code.CAPACITY, "words")) is None


def test_an_expected_start_parses_back_from_its_message() -> None:
    from engine.model.reasons import ExpectedStart, words_of
    for expected in (ExpectedStart(1_800_000_000.0, "n3"), ExpectedStart(1_800_000_000.0),
                     ExpectedStart(None, next_cycle=True)):
        message = prefixed(Code.RESERVED, "0/3 nodes are available: x.", expected)
        assert code_of(message) is Code.RESERVED and ExpectedStart.parse(message) == expected
        assert words_of(message) == "0/3 nodes are available: x."
    assert prefixed(Code.CAPACITY, "w", ExpectedStart()) == "[Capacity] w"  # nothing to tell: the old form
    assert ExpectedStart.parse("[Capacity] [x] words") is None and words_of("plain [Capacity] words") == "plain [Capacity] words"


def test_a_cycle_tells_each_waiting_pod_its_reservation_else_its_estimate() -> None:
    """CycleResult.expected_starts: a reserved pod's start and node; an estimated one's start, or next-cycle when the
    sweep placed it at its now (its time then would change every sweep while its words do not); none unknown."""
    from engine.loop.cycle import CycleResult
    from engine.model.cluster import Cluster, Reservation
    from engine.model.reasons import ExpectedStart
    from engine.planning.plan import Plan, Stats
    from engine.time.timeline import Estimate
    plan = Plan({}, {}, Stats(), reservations=(Reservation("default/g", (("default/g-0", "n1"), ("default/g-1", "n2")),
                                                           1000.0, ()),),
                estimates={"default/later": Estimate(2000.0, "by then"), "default/soon": Estimate(5.0, "next", True),
                           "default/never": Estimate(None, "not estimated")})
    assert CycleResult(plan, Cluster([], [])).expected_starts() == {
        "default/g-0": ExpectedStart(1000.0, "n1"), "default/g-1": ExpectedStart(1000.0, "n2"),
        "default/later": ExpectedStart(2000.0), "default/soon": ExpectedStart(5.0, next_cycle=True)}
