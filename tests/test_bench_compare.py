"""The side-by-side benchmark's issue-28 parts without a control plane: native PodGroups in the API of the release
measured, kube-scheduler's workload gates per release, the DRA overcommit check, the CPU seconds of a process."""
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
