"""`prefer less fragmentation of device class "…" weight W` (issue 52, point 4): the FGD paper's measure as a policy
preference over DRA devices with consumable capacity, live (a snapshot's ResourceSlices and allocated claims: a
dry-run) and in the GPU placer. Each case has a node plain scoring takes and the preference would not."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.devices.dra import device_signature
from engine.kinds.context import Batch, ClassMatcher
from engine.kinds.fragmentation import KIND, ClassGpus, cluster_shapes, pod_task
from engine.model.cluster import Pod
from engine.model.ir import FragmentationPreference, Source
from engine.model.rejections import Rejections
from engine.model.view import View
from engine.planning.classes import ClassInfo
from engine.planning.compile import compile_cluster
from engine.planning.planner import Options, plan_batch
from engine.policy.check import check
from engine.policy.lower import lower
from engine.policy.parse import PolicyError, parse
from engine.reading.load import build_cluster
from engine.sharing.fragmentation import typical_shapes
from engine.sharing.gpus import MILLI, GpuChoice, GpuTask, fits, gpu_node, place
from engine.time import openb
from engine.time.gpu_planner import PlannerPlacer, gpu_cluster, with_shapes

POLICY = """policy less-fragmentation {
  applies to all pods
  prefer less fragmentation of device class "gpu.openb" weight 100
}
"""


def policy_rules(text: str = POLICY):
    return lower(parse(text, "frag.policy"))


# --- the language ----------------------------------------------------------------------------------------------

def test_it_parses_checks_and_lowers_to_a_preference_citing_its_line() -> None:
    (policy,) = parse(POLICY, "frag.policy")
    assert check([policy], {"frag.policy": POLICY}) == []
    rules = lower([policy]).placement
    assert rules is not None
    (rule,) = rules(Pod("default", "p"))
    assert isinstance(rule, FragmentationPreference)
    assert (rule.device_class, rule.weight, rule.shapes) == ("gpu.openb", 100, None)
    assert str(rule.source) == "frag.policy:3 (policy less-fragmentation)"


@pytest.mark.parametrize(("line", "where", "words"), [
    ("prefer less fragmentation weight 20", "2:29", "expected 'of'"),
    ('prefer less fragmentaton of device class "g" weight 20', "2:15", "did you mean 'fragmentation'?"),
    ('prefer less fragmentation of device class "g"', "3:1", "expected 'weight'"),
])
def test_a_malformed_statement_is_a_parse_error_at_its_file_line_and_column(line, where, words) -> None:
    with pytest.raises(PolicyError) as raised:
        parse(f"policy p {{ applies to all pods\n  {line}\n}}", "bad.policy")
    assert str(raised.value).startswith(f"bad.policy:{where}: ") and words in str(raised.value)


def test_its_weight_and_device_class_name_are_checked() -> None:
    text = 'policy p {\n  applies to all pods\n  prefer less fragmentation of device class "GPU_x" weight 5000\n}\n'
    found = [d.headline() for d in check(parse(text, "p.policy"), {"p.policy": text})]
    assert found == ["p.policy:3:3: weight must be a whole number from 1 to 1000, got 5000",
                     "p.policy:3:3: invalid device class name 'GPU_x' (a DeviceClass is named as a DNS subdomain, "
                     "such as 'gpu.example.com')"]


# --- the measure on a snapshot --------------------------------------------------------------------------------

def gpu_nodes(*free: tuple[int, ...]) -> list:
    """Nodes a, b, … with one V100 GPU each of which `free` milli are free (the rest used by a share)."""
    out = []
    for i, gpus in enumerate(free):
        node = gpu_node("abcdefgh"[i], 32000, 64000, len(gpus), "V100")
        for g, milli in enumerate(gpus):
            if milli < MILLI:
                node = place(node, GpuTask(0, 0, 1, MILLI - milli), (g,))
        out.append(node)
    return tuple(out)


def test_the_measure_reads_free_milli_from_slices_and_allocated_claims() -> None:
    cluster = gpu_cluster(gpu_nodes((1000, 300), (0,)), [GpuTask(1000, 0, 1, 250, frozenset({"V100"}))])
    devices = ClassGpus.of(cluster, "gpu.openb")
    assert [devices.free[d.key] for d in devices.per_node["a"]] == [1000, 300]
    assert [devices.free[d.key] for d in devices.per_node["b"]] == [0]
    assert device_signature(devices.per_node["a"][0]) == "gpu.openb/model=V100"
    task = pod_task(cluster.pending[0], cluster, "gpu.openb", devices)
    assert task == GpuTask(1000, 0, 1, 250, frozenset({"gpu.openb/model=V100"}))
    assert devices.node(cluster.nodes[0], 32000).gpu_free == (1000, 300)


def test_the_shapes_are_the_cluster_s_own_pods() -> None:
    cluster = gpu_cluster(gpu_nodes((1000,)), [GpuTask(1000, 0, 1, 500), GpuTask(1000, 0, 1, 500), GpuTask(2000, 0)])
    shapes = cluster_shapes(cluster, "gpu.openb", ClassGpus.of(cluster, "gpu.openb"))
    assert shapes == typical_shapes([GpuTask(1000, 0, 1, 500)] * 2 + [GpuTask(2000, 0)])


def placed_on(cluster, rules) -> str:
    plan = plan_batch(cluster, rules, Options(time_limit=5, workers=1, preemption=False))
    (node,) = plan.assignments.values()
    return node


def test_a_share_fills_a_partly_used_gpu_rather_than_break_an_idle_one() -> None:
    """The snapshot below: the workload's shapes (running and pending pods) are a whole GPU (⅓) and 500 (⅔). On b the
    pending 500 leaves nothing: b's fragment falls from 500·⅓ to 0, FGD's 54 points; on a it leaves 500 that no
    whole-GPU task can use: a's grows from 0 to 500·⅓, 45 points. Plain scoring takes a (the first of equals)."""
    cluster = build_cluster([("snapshot", d) for d in snapshot()], "policy-scheduler")
    assert placed_on(cluster, policy_rules("")) == "a"
    assert placed_on(cluster, policy_rules()) == "b"


def test_the_score_is_fgd_s_scaled_to_the_weight() -> None:
    """One node with 700 free of one GPU, the workload a 500 share alone: placing it leaves 200 no 500 can use
    (growth 200 milli: FGD's int(100·sigmoid(−0.2)) = 45), scaled to the weight."""
    cluster = gpu_cluster(gpu_nodes((700,)), [GpuTask(0, 0, 1, 500)])
    shapes = typical_shapes([GpuTask(0, 0, 1, 500)])
    batch = Batch(cluster, View.of(cluster.nodes, cluster.bound), [], ClassMatcher([]))
    for weight, points in ((100, 45), (20, 9), (1000, 450)):
        rule = FragmentationPreference("gpu.openb", weight, Source("test"), shapes)
        info = ClassInfo(cluster.pending, (rule,), Rejections(1))
        (part,) = KIND.score(info, np.array([0]), batch)
        assert part.points.tolist() == [points]


# --- live: a dry-run of a snapshot ----------------------------------------------------------------------------

def snapshot() -> list[dict]:
    """openb's objects (convert openb's Nodes, slices, DeviceClass): a with an idle GPU, b with one a running pod
    shares (500 of it), c with one a running pod holds whole, and a pending pod asking for 500."""
    rows = [openb.NodeRow(n, 32000, 65536, 1, "V100", i) for i, n in enumerate("abc")]
    items = [m for row in rows for m in openb.node_manifests(row, "dra")] + [openb.device_class()]
    items.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": openb.NAMESPACE}})
    task = openb.TaskRow("share", 1000, 1024, 1, 500, (), None, None, 1)
    items += openb.task_manifests(task, "dra", "policy-scheduler")
    for name, node, milli in (("held-share", "b", 500), ("held-whole", "c", 1000)):
        claim = openb.claim(openb.TaskRow(name, 1000, 1024, 1, milli, (), None, None, 1))
        result = {"request": "gpu", "driver": openb.DRIVER, "pool": node, "device": "gpu-0"}
        if milli < 1000:
            result |= {"shareID": "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa", "consumedCapacity": {"milli": str(milli)}}
        claim["status"] = {"allocation": {"devices": {"results": [result]}, "nodeSelector": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}},
            "reservedFor": [{"resource": "pods", "name": name, "uid": name}]}
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": openb.NAMESPACE, "uid": name},
               "spec": {"nodeName": node, "schedulerName": "policy-scheduler", "containers": [
                   {"name": "task", "image": "i", "resources": {"requests": {"cpu": "1", "memory": "1Gi"},
                                                                "claims": [{"name": "gpu"}]}}],
                        "resourceClaims": [{"name": "gpu", "resourceClaimName": claim["metadata"]["name"]}]},
               "status": {"phase": "Running"}}
        items += [claim, pod]
    return items


def dry_run(tmp_path, *policy: str) -> dict:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": snapshot()}))
    args = ["--policy", str(tmp_path / "frag.policy")] if policy else []
    if policy:
        (tmp_path / "frag.policy").write_text(policy[0])
    done = subprocess.run([sys.executable, "-m", "engine", "dry-run", "--cluster", str(cluster), "-o", "json",
                           "--scheduler-name", "policy-scheduler", *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "COLUMNS": "300"})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_dry_run_with_the_policy_fills_the_shared_gpu(tmp_path) -> None:
    assert dry_run(tmp_path)["assignments"] == {"openb/share": "a"}
    assert dry_run(tmp_path, POLICY)["assignments"] == {"openb/share": "b"}


# --- the placer ------------------------------------------------------------------------------------------------

def test_the_placer_with_the_policy_weighs_the_trace_s_shapes() -> None:
    """The placer's cluster holds what is used as one pod a node (no task's shape): the trace's shapes are given."""
    shapes = typical_shapes([GpuTask(1000, 0, 1, MILLI)] + [GpuTask(1000, 0, 1, 500)] * 2)
    nodes = gpu_nodes((1000,), (500,))
    task = GpuTask(1000, 1000, 1, 500)
    assert PlannerPlacer().place(nodes, [task]) == [GpuChoice(0, (0,))]
    assert PlannerPlacer(policy=POLICY, shapes=shapes).place(nodes, [task]) == [GpuChoice(1, (0,))]


def test_check_lints_a_device_class_the_snapshot_lacks(tmp_path) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": snapshot()}))
    (tmp_path / "frag.policy").write_text(POLICY.replace('"gpu.openb"', '"gpu.opneb"'))
    done = subprocess.run([sys.executable, "-m", "engine", "check", str(tmp_path / "frag.policy"), "--cluster",
                           str(cluster), "--scheduler-name", "policy-scheduler"], capture_output=True, text=True,
                          timeout=120)
    assert (f"{tmp_path / 'frag.policy'}:3:3: warning: no DeviceClass 'gpu.opneb' in the snapshot: 'prefer less "
            "fragmentation' scores every node alike (did you mean 'gpu.openb'?)") in done.stdout + done.stderr


# --- in the solver: marginal scores ----------------------------------------------------------------------------

def marginal_problem(nodes, tasks, shapes):
    rules = with_shapes(policy_rules(), tuple(shapes))
    return compile_cluster(gpu_cluster(nodes, tasks, rules), rules.placement).problem


SHARES = typical_shapes([GpuTask(0, 0, 1, MILLI)] + [GpuTask(0, 0, 1, 500)] * 2)  # whole ⅓, 500 ⅔


def test_the_solver_gets_the_preference_as_marginal_scores_not_static_ones() -> None:
    problem = marginal_problem(gpu_nodes((1000,), (1000,)), [GpuTask(0, 0, 1, 500)] * 2, SHARES)
    assert problem.marginal is not None and problem.marginal.classes == frozenset(range(len(problem.classes)))
    assert all(not cls.scores for cls in problem.classes)  # the points alone are explain's, not the solver's


def test_a_pod_s_points_are_fgd_s_on_the_node_as_the_plan_filled_it() -> None:
    """Two idle single-GPU nodes, shapes whole ⅓ and 500 ⅔: a 500 alone on an idle GPU leaves 500 no whole GPU can
    use (45 points); the second 500 on that GPU leaves nothing (fragment 500·⅓ → 0: 54); then no share fits there."""
    problem = marginal_problem(gpu_nodes((1000,), (1000,)), [GpuTask(0, 0, 1, 500)] * 2, SHARES)
    (c,) = problem.marginal.classes
    tracker = problem.marginal.tracker()
    assert [tracker.points(c, 0), tracker.points(c, 1)] == [45, 45]
    tracker.place(c, 0)
    assert [tracker.points(c, 0), tracker.points(c, 1)] == [54, 45]
    tracker.place(c, 0)
    assert tracker.points(c, 0) is None
    tracker.undo(c, 0)
    assert tracker.points(c, 0) == 54


def test_a_plan_sharing_one_gpu_is_worth_more_than_one_breaking_two() -> None:
    problem = marginal_problem(gpu_nodes((1000,), (1000,)), [GpuTask(0, 0, 1, 500)] * 2, SHARES)
    (c,) = problem.marginal.classes
    together, apart = problem.marginal.value({(c, 0): 2}), problem.marginal.value({(c, 0): 1, (c, 1): 1})
    assert together == 0 and apart < 0  # each broken GPU grows its node's fragment by 500·⅓
    assert problem.marginal.value({(c, 1): 2}) == together


def test_the_plan_fills_one_gpu_with_the_batch_s_two_shares() -> None:
    rules = with_shapes(policy_rules(), SHARES)
    cluster = gpu_cluster(gpu_nodes((1000,), (1000,)), [GpuTask(0, 0, 1, 500)] * 2, rules)
    plan = plan_batch(cluster, rules, Options(time_limit=5, workers=1, preemption=False))
    assert len(plan.assignments) == 2 and len(set(plan.assignments.values())) == 1


MILLIS = st.sampled_from([0, 250, 500, 750, 1000])
TASKS = st.one_of(st.builds(lambda m, cpu: GpuTask(cpu, 0, 1, m), st.sampled_from([250, 500, 750]),
                            st.sampled_from([1000, 8000])),
                  st.builds(lambda n, cpu: GpuTask(cpu, 0, n, MILLI), st.integers(1, 2), st.sampled_from([1000, 8000])),
                  st.builds(lambda cpu: GpuTask(cpu, 0), st.sampled_from([1000, 16000])))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(MILLIS, min_size=1, max_size=3).map(tuple), min_size=1, max_size=3),
       st.lists(TASKS, min_size=1, max_size=6))
def test_every_plan_with_the_preference_fits_every_gpu_and_node(free, tasks) -> None:
    """Whatever the marginal scores prefer, the placements are feasible GPU by GPU and in cpu: applied with
    `gpus.place`, which raises on any overcommitment, every choice fits; and a plan places some task whenever some
    task fits some node."""
    nodes = gpu_nodes(*free)
    shapes = typical_shapes(tasks)
    choices = PlannerPlacer(policy=POLICY, shapes=shapes, time_limit=5).place(tuple(nodes), tasks)
    state = list(nodes)
    for task, choice in zip(tasks, choices):
        if choice is not None:
            state[choice.node] = place(state[choice.node], task, choice.gpus)
    assert any(choice is not None for choice in choices) or not any(fits(n, t) for n in nodes for t in tasks)
