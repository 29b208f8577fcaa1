"""The side-by-side benchmark's parts without a control plane: native PodGroups in the API of the release
measured, kube-scheduler's workload gates per release, the DRA overcommit check, the CPU seconds of a process, and
(--apiserver-gc) the apiserver's GC marks read from its gctrace and the waits split by them."""
from __future__ import annotations

import importlib
import sys
import time
from pathlib import Path

import pytest

from bench import cycle_profile
from testkit.controlplane import Process
from testkit.manifests import counter_slice, partition, resource_claim, resource_slice

# bench/'s modules import each other by bare name: cycle_profile put bench/ on the path
CW = cycle_profile.CW
CM = importlib.import_module("compare_measure")
CS = importlib.import_module("compare_schedulers")


@pytest.mark.parametrize(("version", "api"), [("v1.36.3", "scheduling.k8s.io/v1alpha2"),
                                              ("v1.37.2", "scheduling.k8s.io/v1beta1")])
@pytest.mark.parametrize("workload", ["gangs-of-3", "three-big-gangs", "native-gangs", "gpu-dra"])
def test_native_groups_are_written_in_the_api_of_the_release(workload: str, version: str, api: str) -> None:
    scenario = CW.WORKLOADS[workload].scenario(20, version)
    assert scenario.pod_groups and {g["apiVersion"] for g in scenario.pod_groups} == {api}


def test_gang_suites_have_scheduler_perf_shapes_scaled_to_5000_nodes() -> None:
    small = CW.WORKLOADS["gangs-of-3"].scenario(5000, "v1.37.2")
    big = CW.WORKLOADS["three-big-gangs"].scenario(5000, "v1.37.2")
    assert (len(small.pod_groups), len(small.pending)) == (1000, 3000)
    assert (len(big.pod_groups), len(big.pending)) == (3, 3000)
    assert set(big.gang_sizes().values()) == {1000}


def test_kube_scheduler_workload_gates_follow_the_release() -> None:
    assert "GangScheduling" in CS.workload_gates("v1.36.3")
    assert "GangScheduling" not in CS.workload_gates("v1.37.2")  # absorbed by GenericWorkload: an unknown gate
    assert "GenericWorkload" in CS.workload_gates("v1.37.2")     # beta but off by default
    with pytest.raises(ValueError, match=r"v1\.40\.0"):
        CS.workload_gates("v1.40.0")


def gpu_slices(pool: str = "gpu-pool") -> list[dict]:
    return [counter_slice(pool, {"gpu-0": {"memory": "40Gi"}}, node="n1"),
            resource_slice("n1", [partition("whole", "gpu-0", "40Gi"), partition("half-0", "gpu-0", "20Gi"),
                                  partition("half-1", "gpu-0", "20Gi")], pool=pool, slices=2)]


def claims_of(*devices: str, pool: str = "gpu-pool") -> list[dict]:
    return [resource_claim(f"c{i}", allocated=[(pool, d)], node="n1") for i, d in enumerate(devices)]


@pytest.mark.parametrize(("devices", "overcommitted"), [
    ((), 0),
    (("half-0", "half-1"), 0),
    (("whole",), 0),
    (("whole", "half-0"), 1),            # 60Gi of the GPU's 40Gi: the physical device promised twice
    (("whole", "half-0", "half-1"), 1),  # still one physical device
    (("half-0", "half-0"), 1),           # one device allocated to two claims
])
def test_overcommit_counts_physical_devices_beyond_their_shared_counters(devices: tuple[str, ...],
                                                                         overcommitted: int) -> None:
    assert CM.overcommitted(gpu_slices(), claims_of(*devices)) == overcommitted


def test_overcommit_allows_multiple_allocations_where_the_device_says_so() -> None:
    slices = [resource_slice("n1", [{"name": "shared", "allowMultipleAllocations": True}], pool="p")]
    assert CM.overcommitted(slices, claims_of("shared", "shared", pool="p")) == 0


def test_dra_partitionable_publishes_a_40gi_gpu_as_whole_and_halves_with_three_pods_each() -> None:
    scenario = CW.WORKLOADS["dra-partitionable"].scenario(20, "v1.37.2")
    slices = [d for d in scenario.devices if d["kind"] == "ResourceSlice"]
    gpus = len(slices) // 2
    assert gpus == 5 and len(scenario.pending) == len(scenario.claims) == 3 * gpus
    counters = [s for s in slices if s["spec"].get("sharedCounters")]
    assert {s["spec"]["sharedCounters"][0]["counters"]["memory"]["value"] for s in counters} == {"40Gi"}
    devices = [d for s in slices for d in s["spec"].get("devices", [])]
    assert sorted({d["name"] for d in devices}) == ["half-0", "half-1", "whole"]
    # every GPU allocated whole and halves at once would overcommit each of them once
    every = [resource_claim(f"c{k}-{d}", allocated=[(s["spec"]["pool"]["name"], d)])
             for k, s in enumerate(counters) for d in ("whole", "half-0")]
    assert CM.overcommitted(slices, every) == gpus


def test_cpu_seconds_of_a_process_until_it_is_gone(tmp_path: Path) -> None:
    burn = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\ntime.sleep(30)"
    proc = Process("burn", [sys.executable, "-c", burn], tmp_path / "burn.log")
    proc.start()
    try:
        deadline = time.monotonic() + 20
        while (CS.cpu_seconds(proc) or 0) < 0.3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert 0.3 <= CS.cpu_seconds(proc) < 5
    finally:
        proc.stop()
    assert CS.cpu_seconds(proc) is None


# Lines of a real kube-apiserver v1.36.3 log under GODEBUG=gctrace=1 (bench/compare.py --apiserver-gc), around
# one of its lines of its own
APISERVER_LOG = """\
gc 14 @2.245s 3%: 0.27+80+0.042 ms clock, 0.54+0.71/39/0+0.084 ms cpu, 160->163->88 MB, 170 MB goal, 2 P
I1128 19:14:06.123456   12345 controller.go:615] quota admission added evaluator for: leases
gc 15 @4.907s 3%: 5.3+186+0.022 ms clock, 10+0.40/92/0.79+0.045 ms cpu, 152->170->102 MB, 177 MB goal, 2 P
"""


def test_gc_marks_are_read_from_gctrace_lines_on_the_monotonic_clock() -> None:
    marks = CM.gc_marks(APISERVER_LOG, started_at=1000.0)
    assert marks == [pytest.approx((1002.245, 1002.245 + 0.080312)), pytest.approx((1004.907, 1004.907 + 0.191322))]


def test_gc_split_counts_a_pod_in_when_its_wait_overlaps_a_mark() -> None:
    marks = [(10.0, 10.2)]
    created = {"a": 9.95, "b": 10.1, "c": 10.19, "d": 10.3, "e": 9.0}
    bound = {"a": 10.03, "b": 10.12, "c": 10.25, "d": 10.31, "e": 9.01}
    result = CM.RunResult("basic", 200, "s", 0, "stream", len(created))
    CM.gc_split(result, created, bound, 0.0, False, marks)
    assert (result.gc_marks, result.pods_in_gc) == (1, 3)
    assert result.latency_p99_in_gc == pytest.approx(0.08)  # a, b and c in (a the longest); d came after, e before
    assert result.latency_p99_clear == pytest.approx(0.01)
    assert result.gc_mark_s == pytest.approx(0.2)


def test_gc_split_of_a_batch_arrival_waits_from_t0() -> None:
    result = CM.RunResult("basic", 200, "s", 0, "batch", 2)
    CM.gc_split(result, {"a": 1.0, "b": 1.0}, {"a": 5.5, "b": 7.0}, 5.0, True, [(6.0, 6.1), (20.0, 21.0)])
    assert (result.gc_marks, result.pods_in_gc) == (1, 1)  # b waited 5.0 -> 7.0 across the mark; a was bound before
    assert result.latency_p99_in_gc == pytest.approx(2.0)
    assert result.latency_p99_clear == pytest.approx(0.5)


def test_a_process_starts_with_its_own_environment_beside_the_loopback_one(tmp_path: Path) -> None:
    proc = Process("env", [sys.executable, "-c", "import os; print(os.environ['GODEBUG'], os.environ['NO_PROXY'])"],
                   tmp_path / "env.log", env={"GODEBUG": "gctrace=1"})
    before = time.monotonic()
    proc.start()
    try:
        assert proc.popen is not None and proc.popen.wait(timeout=20) == 0
    finally:
        proc.stop()
    assert proc.started_at is not None and before <= proc.started_at <= time.monotonic()
    assert (tmp_path / "env.log").read_text().splitlines()[-1].startswith("gctrace=1 ")


def test_gc_split_leaves_gang_members_out() -> None:
    result = CM.RunResult("mixed", 200, "s", 0, "stream", 2)
    CM.gc_split(result, {"a": 1.0, "g": 1.0}, {"a": 1.01, "g": 3.0}, 0.0, False, [(2.0, 2.1)], frozenset({"g"}))
    assert (result.gc_marks, result.pods_in_gc, result.latency_p99_in_gc) == (0, 0, None)
    assert result.latency_p99_clear == pytest.approx(0.01)


@pytest.mark.parametrize(("workload", "groups", "size"), [("tas-750-groups-of-4", 750, 4),
                                                          ("tas-1500-groups-of-4", 1500, 4),
                                                          ("tas-2250-groups-of-4", 2250, 4),
                                                          ("tas-3-big-groups", 3, 1000)])
def test_tas_shapes_are_scheduler_perf_1_38_s_at_5000_nodes(workload: str, groups: int, size: int) -> None:
    """podgroup/tas: 50 racks of 100 nodes, every group a gang required in one rack."""
    scenario = CW.WORKLOADS[workload].scenario(5000, "v1.37.2")
    racks = {n.labels[CW.RACK_KEY] for n in scenario.nodes}
    assert (len(scenario.nodes), len(racks)) == (5000, 50)
    assert (len(scenario.pod_groups), len(scenario.pending)) == (groups, groups * size)
    assert {g["spec"]["schedulingConstraints"]["topology"][0]["key"] for g in scenario.pod_groups} == {CW.RACK_KEY}


def test_hero_shape_is_scheduler_perf_1_38_s_at_4900_nodes() -> None:
    """GangPreemptionHeroWorkload 4900Nodes_Hero2450Pods_60PctOccupied: 3 training gangs of 490, 3 large and 14
    small batch gangs of 250 and 50 running one pod per node; a hero gang of 2,450 that only evicting batch gangs
    (whole: 500 pods at the fewest) lets in."""
    scenario = CW.WORKLOADS["hero-preemption"].scenario(4900, "v1.37.2")
    assert len(scenario.preset) == 3 * 490 + 3 * 250 + 14 * 50
    assert len({p["spec"]["nodeName"] for p in scenario.preset}) == len(scenario.preset)  # one per node
    assert len(scenario.pending) == 2450 and scenario.gang_sizes()["gang-preempt-0/hero-0"] == 2450
    assert {g["spec"]["disruptionMode"]["all"] == {} for g in scenario.pod_groups} == {True}
    assert CW.hero_fewest_victims(4900) == 500 and CW.hero_fewest_victims(1000) == 100


def _outcome(placed: dict[str, str]) -> object:
    nodes = [CW.NodeSpec("a1", {}, {CW.RACK_KEY: "a"}), CW.NodeSpec("a2", {}, {CW.RACK_KEY: "a"}),
             CW.NodeSpec("b1", {}, {CW.RACK_KEY: "b"}), CW.NodeSpec("x", {}, {})]
    groups = [CW.native_group(g, 2, "ns", topology=CW.RACK_KEY, api_version="scheduling.k8s.io/v1beta1")
              for g in ("one", "two", "none")]
    pending = [CW.pause_pod(f"{g}-{i}", g, ns="ns", schedulingGroup=CW.in_group(g)) for g in ("one", "two", "none")
               for i in range(2)]
    result = CM.RunResult("w", 4, "s", 0, "stream", len(pending))
    CM.outcome(result, CW.Scenario("w", nodes, pending, pod_groups=groups), placed)
    return result


def test_groups_in_one_rack_and_racks_spanned_are_read_from_the_nodes_labels() -> None:
    """A group in one rack, one across two, one with a member on a node without the rack label (in no rack)."""
    result = _outcome({"ns/one-0": "a1", "ns/one-1": "a2", "ns/two-0": "a1", "ns/two-1": "b1",
                       "ns/none-0": "a1", "ns/none-1": "x"})
    assert (result.gangs_complete, result.gangs_one_domain, result.domains_max) == (3, 1, 2)
    assert result.domains_mean == pytest.approx(5 / 3, abs=1e-3)  # 1, 2 and 2 (a rack and none)


def test_evicted_groups_are_told_whole_or_half() -> None:
    scenario = CW.WORKLOADS["hero-preemption"].scenario(100, "v1.37.2")
    small = [f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in scenario.preset
             if p["spec"]["schedulingGroup"]["podGroupName"] in ("small-batch-0", "small-batch-1")]
    result = CM.RunResult("hero-preemption", 100, "s", 0, "stream", len(scenario.pending))
    CM.eviction_outcome(result, scenario, set(small[:5] + small[5:7]))  # small-batch-0 whole, 2 of small-batch-1
    assert (result.preemptions, result.groups_evicted, result.groups_half_evicted) == (7, 1, 1)
    assert result.victims_by_namespace == {"gang-preempt-3": 7}


def test_a_workload_becomes_a_dry_run_snapshot_with_its_bound_and_pending_pods() -> None:
    snap = importlib.import_module("compare_snapshot").snapshot(CW.WORKLOADS["hero-preemption"].scenario(10, "v1.37.2"))
    kinds = [i["kind"] for i in snap["items"]]
    assert kinds.count("Node") == 10 and kinds.count("PriorityClass") == 3 and kinds.count("PodGroup") == 6
    pods = [i for i in snap["items"] if i["kind"] == "Pod"]
    assert {p["spec"]["schedulerName"] for p in pods} == {"policy-scheduler"}
    assert sorted((p["status"]["phase"], "nodeName" in p["spec"]) for p in pods).count(("Running", True)) == 6
    assert sum(1 for p in pods if p["status"]["phase"] == "Pending") == 5
