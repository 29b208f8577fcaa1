"""Which pods the scheduler considers at all, as kube-scheduler and Coscheduling decide it from a snapshot.

Gated, terminating, unknown-PriorityClass and missing-PodGroup pods are not pending: they are never placed,
take no capacity, and are listed under `skipped` with the reason, keeping the dry-run contract (every pending
pod in exactly one of assignments / unschedulable).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import yaml

from engine.reading.load import build_cluster
from runner import run
from testkit.manifests import node, pod, podgroup, priority_class

GROUP = "scheduling.x-k8s.io/pod-group"


def cluster(*docs):
    return build_cluster([("snap.yaml", d) for d in docs])


def gated(name: str, *gates: str, **kw) -> dict:
    return pod(name, schedulingGates=[{"name": g} for g in gates], **kw)


def terminating(p: dict) -> dict:
    p["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return p


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "300"})


# --- scheduling gates ---------------------------------------------------------------------------------------

def test_gated_pod_is_skipped_naming_its_gates():
    c = cluster(node("a"), gated("g", "example.com/quota", "example.com/wait"), pod("p"))
    assert [p.key for p in c.pending] == ["default/p"]
    assert "example.com/quota" in c.skipped["default/g"] and "example.com/wait" in c.skipped["default/g"]
    assert "gate" in c.skipped["default/g"]


def test_gated_pod_takes_no_capacity():
    plan = run([node("a", cpu="1"), gated("g", "wait", cpu="1"), pod("p", cpu="1")])
    assert plan.assignments == {"default/p": "a"}
    assert "default/g" not in plan.unschedulable


def test_empty_gate_list_is_not_gated():
    c = cluster(node("a"), pod("p", schedulingGates=[]))
    assert [p.key for p in c.pending] == ["default/p"] and not c.skipped


# --- terminating pods ---------------------------------------------------------------------------------------

def test_terminating_pending_pod_is_skipped():
    c = cluster(node("a"), terminating(pod("t")))
    assert c.pending == [] and "terminating" in c.skipped["default/t"]


def test_bound_terminating_pod_still_holds_its_node():
    plan = run([node("a", cpu="1"), terminating(pod("old", cpu="1", node_name="a")), pod("new", cpu="1")])
    assert plan.assignments == {}
    assert "Insufficient cpu" in plan.unschedulable["default/new"][0]


# --- PriorityClass ------------------------------------------------------------------------------------------

def test_priority_class_name_is_resolved():
    p = pod("p", priorityClassName="high")
    c = cluster(node("a"), priority_class("high", 1000), p)
    assert c.pending[0].priority == 1000


def test_spec_priority_wins_over_the_class():
    c = cluster(node("a"), priority_class("high", 1000), pod("p", priority=5, priorityClassName="high"))
    assert c.pending[0].priority == 5


def test_global_default_for_pods_without_a_class():
    c = cluster(node("a"), priority_class("low", 1), priority_class("normal", 100, global_default=True), pod("p"))
    assert c.pending[0].priority == 100


def test_builtin_classes_need_no_objects():
    c = cluster(node("a"), pod("c", priorityClassName="system-cluster-critical"),
                pod("n", priorityClassName="system-node-critical"))
    assert {p.name: p.priority for p in c.pending} == {"c": 2000000000, "n": 2000001000}


def test_unknown_priority_class_is_skipped_not_zero():
    c = cluster(node("a"), pod("p", priorityClassName="nope"))
    assert c.pending == []
    assert "PriorityClass" in c.skipped["default/p"] and "nope" in c.skipped["default/p"]


def test_resolved_priority_decides_who_gets_the_room():
    plan = run([node("a", cpu="1"), priority_class("high", 1000), pod("low", cpu="1"),
                pod("vip", cpu="1", priorityClassName="high")])
    assert plan.assignments == {"default/vip": "a"}


# --- gangs without their PodGroup ---------------------------------------------------------------------------

def test_pod_of_a_missing_podgroup_is_not_placed():
    c = cluster(node("a"), pod("w0", labels={GROUP: "train"}), pod("w1", labels={GROUP: "train"}))
    assert c.pending == []
    assert c.skipped["default/w0"] == "PodGroup default/train not found"


def test_podgroup_in_another_namespace_does_not_count():
    c = cluster(node("a"), podgroup("train", 1, ns="other"), pod("w0", labels={GROUP: "train"}))
    assert c.skipped["default/w0"] == "PodGroup default/train not found"


def test_pod_of_a_present_podgroup_is_pending():
    c = cluster(node("a"), podgroup("train", 1), pod("w0", labels={GROUP: "train"}))
    assert [p.key for p in c.pending] == ["default/w0"] and not c.skipped


# --- the contract -------------------------------------------------------------------------------------------

def test_json_lists_skipped_pods_and_keeps_the_contract(tmp_path):
    docs = [node("a"), priority_class("high", 10), gated("g", "wait"), terminating(pod("t")),
            pod("u", priorityClassName="x"), pod("m", labels={GROUP: "missing"}), pod("p"), pod("big", cpu="64")]
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    out = cli("dry-run", "--cluster", str(path), "-o", "json")
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    assert set(plan["skipped"]) == {"default/g", "default/t", "default/u", "default/m"}
    assert all(isinstance(r, str) and r for r in plan["skipped"].values())
    assert set(plan["assignments"]) == {"default/p"} and set(plan["unschedulable"]) == {"default/big"}
    assert not set(plan["skipped"]) & (set(plan["assignments"]) | set(plan["unschedulable"]))
    assert plan["stats"]["skipped"] == 4 and plan["stats"]["pods"] == 2


def test_table_lists_skipped_pods(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump_all([node("a"), gated("g", "example.com/wait"), pod("p")]))
    out = cli("dry-run", "--cluster", str(path))
    assert out.returncode == 0, out.stderr
    assert "Skipped" in out.stdout and "default/g" in out.stdout and "example.com/wait" in out.stdout


def test_explain_a_skipped_pod_says_why(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump_all([node("a"), gated("g", "example.com/wait")]))
    out = cli("explain", "--cluster", str(path), "default/g")
    assert "Traceback" not in out.stderr
    assert "example.com/wait" in out.stdout + out.stderr


def group_with_room(name: str, min_member: int, **room: str) -> dict:
    doc = podgroup(name, min_member)
    doc["spec"]["minResources"] = room
    return doc


def test_podgroup_min_resources_beyond_the_free_room_keeps_the_gang_out():
    # 2 members of 1 cpu fit, but the PodGroup says the gang needs 6 cpu, and the cluster has 4 free
    docs = [node("n1", cpu="4"), group_with_room("train", 2, cpu="6"),
            *(pod(f"w{i}", cpu="1", labels={GROUP: "train"}) for i in range(2))]
    plan = run(docs)
    assert plan.assignments == {}
    reason = " ".join(plan.unschedulable["default/w0"])
    assert "minResources" in reason and "cpu 6000 > 4000 free" in reason
    # said with the nodes, not before them (as a gang short of members is): in the loop, room freed anywhere wakes it
    assert "1 node(s)" in reason and plan.details.explanations["default/w0"].plugins() is None


def test_podgroup_min_resources_within_the_free_room_starts_the_gang():
    docs = [node("n1", cpu="4"), group_with_room("train", 2, cpu="3", memory="1Gi"),
            *(pod(f"w{i}", cpu="1", labels={GROUP: "train"}) for i in range(2))]
    assert set(run(docs).assignments) == {"default/w0", "default/w1"}


def test_podgroup_min_resources_must_be_quantities():
    import pytest

    from engine.reading.load import InputError

    with pytest.raises(InputError) as bad:
        build_cluster([("pg.yaml", group_with_room("train", 2, cpu="lots"))])
    assert "spec.minResources.cpu" in str(bad.value) and "PodGroup default/train" in str(bad.value)


def aged_group(name: str, min_member: int, created: str) -> dict:
    doc = podgroup(name, min_member)
    doc["metadata"]["creationTimestamp"] = created
    return doc


def two_gangs_on_room_for_four(first_created: str, second_created: str) -> dict[str, str]:
    """Two gangs of 3 (equal priority) on room for 4: exactly one starts; the file lists 'second' first."""
    docs = [node("n1", cpu="4"),
            aged_group("second", 3, second_created), aged_group("first", 3, first_created),
            *(pod(f"s{i}", cpu="1", labels={GROUP: "second", "app": "s"}) for i in range(3)),
            *(pod(f"f{i}", cpu="1", labels={GROUP: "first", "app": "f"}) for i in range(3))]
    return run(docs).assignments


def test_the_older_podgroup_wins_among_equal_gangs():
    placed = two_gangs_on_room_for_four("2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z")
    assert set(placed) == {"default/f0", "default/f1", "default/f2"}
    placed = two_gangs_on_room_for_four("2026-03-01T00:00:00Z", "2026-02-01T00:00:00Z")
    assert set(placed) == {"default/s0", "default/s1", "default/s2"}


def test_equal_ages_fall_back_to_the_podgroup_name():
    placed = two_gangs_on_room_for_four("2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z")
    assert set(placed) == {"default/f0", "default/f1", "default/f2"}  # "first" < "second"
