"""`policy-scheduler convert openb` (issue 52, point 1): Alibaba's openb GPU trace as Kubernetes objects. GPUs are DRA
devices with a consumable capacity of 1000 milli; a shared task (gpu_milli < 1000) consumes part of one device, a
whole-GPU task all of each of its devices, so the two never overcommit one GPU.

tests/cases/openb-nodes.csv and openb-tasks.csv are rows copied from the trace (../shared/data/openb/, the node list
and openb_pod_list_default.csv): 5 nodes (CPU-only, P100, V100M16, T4, A10) and 20 tasks (shared, 1, 2 and 4 whole
GPUs, CPU-only); the trace itself has no gpu_spec, so two rows were given one (openb-pod-0007: P100,
openb-pod-0020: V100M16|A10)."""
from __future__ import annotations

import collections
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from engine.cli import main
from engine.model.ir import Rules
from engine.planning.planner import Options, plan_batch
from engine.reading.load import build_cluster
from engine.time import openb
from engine.time.simulate import trace_of
from testkit.checker import check_plan

CASES = Path(__file__).parent / "cases"
NODES, TASKS = str(CASES / "openb-nodes.csv"), str(CASES / "openb-tasks.csv")


def rows() -> tuple[list[openb.NodeRow], list[openb.TaskRow]]:
    return openb.read_nodes(NODES), openb.read_tasks(TASKS)


def by_name(items: list[dict], kind: str) -> dict[str, dict]:
    return {i["metadata"]["name"]: i for i in items if i["kind"] == kind}


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


# --- rows → objects ---------------------------------------------------------------------------------------------

def test_a_gpu_node_is_a_node_with_a_model_label_and_a_slice_of_one_shared_device_per_gpu() -> None:
    items = openb.snapshot(*rows(), "dra", "policy-scheduler")["items"]
    node = by_name(items, "Node")["openb-node-0123"]  # 64000,262144,2,P100
    assert node["status"]["allocatable"] == {"cpu": "64000m", "memory": "262144Mi", "pods": "110"}
    assert node["metadata"]["labels"][openb.MODEL_LABEL] == "P100"
    slices = [s for s in by_name(items, "ResourceSlice").values() if s["spec"]["nodeName"] == "openb-node-0123"]
    assert len(slices) == 1 and slices[0]["spec"]["driver"] == "gpu.openb"
    devices = slices[0]["spec"]["devices"]
    assert [d["name"] for d in devices] == ["gpu-0", "gpu-1"]
    for d in devices:
        assert d["attributes"] == {"model": {"string": "P100"}}
        assert d["capacity"] == {"milli": {"value": "1000"}} and d["allowMultipleAllocations"] is True
    assert list(by_name(items, "DeviceClass")) == ["gpu.openb"]


def test_a_cpu_only_node_has_no_model_label_and_no_slice() -> None:
    items = openb.snapshot(*rows(), "dra", "policy-scheduler")["items"]
    node = by_name(items, "Node")["openb-node-0000"]
    assert openb.MODEL_LABEL not in node["metadata"]["labels"]
    assert node["status"]["allocatable"] == {"cpu": "32000m", "memory": "262144Mi", "pods": "110"}
    assert all(s["spec"]["nodeName"] != "openb-node-0000" for s in by_name(items, "ResourceSlice").values())
    assert len(by_name(items, "ResourceSlice")) == 4  # one per GPU node


def test_a_task_is_a_pending_pod_asking_for_its_cpu_and_memory_and_a_cpu_task_has_no_claim() -> None:
    items = openb.snapshot(*rows(), "dra", "my-scheduler")["items"]
    pod = by_name(items, "Pod")["openb-pod-0005"]  # 20000,65536,0,0, created at 2759674
    assert pod["metadata"]["namespace"] == "openb" and pod["status"] == {"phase": "Pending"}
    assert pod["spec"]["schedulerName"] == "my-scheduler" and "nodeName" not in pod["spec"]
    assert pod["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "20000m", "memory": "65536Mi"}}
    assert "resourceClaims" not in pod["spec"]
    assert pod["metadata"]["creationTimestamp"] == openb.rfc3339(openb.EPOCH + 2759674)
    assert "openb-pod-0005-gpu" not in by_name(items, "ResourceClaim")


def test_a_shared_gpu_is_part_of_one_device_and_whole_gpus_are_devices_consumed_whole() -> None:
    items = openb.snapshot(*rows(), "dra", "policy-scheduler")["items"]
    claims, pods = by_name(items, "ResourceClaim"), by_name(items, "Pod")
    assert pods["openb-pod-0001"]["spec"]["resourceClaims"] == [{"name": "gpu", "resourceClaimName": "openb-pod-0001-gpu"}]
    assert pods["openb-pod-0001"]["spec"]["containers"][0]["resources"]["claims"] == [{"name": "gpu"}]
    shared = claims["openb-pod-0001-gpu"]["spec"]["devices"]["requests"]  # 1 GPU, 460 milli
    assert shared == [{"name": "gpu", "exactly": {"deviceClassName": "gpu.openb", "count": 1,
                                                  "capacity": {"requests": {"milli": "460"}}}}]
    whole = claims["openb-pod-2182-gpu"]["spec"]["devices"]["requests"]  # 4 GPUs
    assert whole == [{"name": "gpu", "exactly": {"deviceClassName": "gpu.openb", "count": 4}}]  # no amount: all of each
    assert claims["openb-pod-0000-gpu"]["metadata"]["namespace"] == "openb"
    assert len(claims) == 17  # every GPU task, no CPU-only one


def test_gpu_spec_is_a_selector_on_the_model_attribute() -> None:
    claims = by_name(openb.snapshot(*rows(), "dra", "policy-scheduler")["items"], "ResourceClaim")
    exactly = claims["openb-pod-0020-gpu"]["spec"]["devices"]["requests"][0]["exactly"]
    assert exactly["selectors"] == [{"cel": {"expression": 'device.attributes["gpu.openb"].model in ["V100M16", "A10"]'}}]
    assert "selectors" not in claims["openb-pod-0001-gpu"]["spec"]["devices"]["requests"][0]["exactly"]


def test_with_extended_resources_whole_gpus_are_counted_and_gpu_spec_is_a_node_affinity() -> None:
    nodes, tasks = rows()
    whole = [t for t in tasks if not t.shared]
    items = openb.snapshot(nodes, whole, "extended", "policy-scheduler")["items"]
    assert by_name(items, "Node")["openb-node-0233"]["status"]["allocatable"]["nvidia.com/gpu"] == "4"
    assert not by_name(items, "ResourceSlice") and not by_name(items, "ResourceClaim") and not by_name(items, "DeviceClass")
    pod = by_name(items, "Pod")["openb-pod-0007"]
    assert pod["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] == "1"
    assert pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu.openb/model", "operator": "In", "values": ["P100"]}]}]}
    with pytest.raises(openb.OpenbError, match=r"openb-tasks.csv:3: task openb-pod-0001 shares a GPU \(gpu_milli 460\)"):
        openb.snapshot(nodes, tasks, "extended", "policy-scheduler")


# --- sampling -----------------------------------------------------------------------------------------------------

def test_sampling_is_reproducible_and_keeps_the_trace_s_order() -> None:
    _, tasks = rows()
    first = openb.sample(tasks, 8, seed=7)
    assert first == openb.sample(tasks, 8, seed=7)
    assert [t.line for t in first] == sorted(t.line for t in first) and len(first) == 8
    assert any(openb.sample(tasks, 8, seed=s) != first for s in range(1, 5))
    assert openb.sample(tasks, 100, seed=7) == tasks and openb.sample(tasks, None, seed=7) == tasks


def test_the_cli_samples_the_same_tasks_for_the_same_seed() -> None:
    def pods(seed: str) -> list[str]:
        result = CliRunner().invoke(main, ["convert", "openb", NODES, TASKS, "--sample", "5", "--seed", seed])
        assert result.exit_code == 0, result.output
        return sorted(by_name(yaml.safe_load(result.output)["items"], "Pod"))
    assert pods("3") == pods("3") and len(pods("3")) == 5
    assert any(pods(s) != pods("3") for s in ("4", "5", "6"))


# --- errors -------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "message"), [
    ("name,cpu_milli,memory_mib,num_gpu\np,1,1,0\n", r"tasks.csv:1: missing column gpu_milli \(the header has name, "),
    ("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,0,0\nq,2k,1,0,0\n",
     r"tasks.csv:3: column cpu_milli: '2k' is not a whole number"),
    ("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,1,1200\n", r"tasks.csv:2: column gpu_milli: 1200 is out of range"),
    ("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,2,500\n", r"tasks.csv:2: column gpu_milli: 500 on a task asking for 2"),
    ("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,0\n", r"tasks.csv:2: 4 fields where the header has 5"),
    ("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,0,0\np,1,1,0,0\n", r"tasks.csv:3: column name: 'p' again \(first on line 2\)"),
    ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\np,1,1,1,500,A10|V100 M\n", r"tasks.csv:2: column gpu_spec: 'V100 M'"),
    ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time,deletion_time\np,1,1,0,0,5,4\n",
     r"tasks.csv:2: column deletion_time: 4 is before creation_time 5"),
])
def test_a_malformed_task_list_is_refused_naming_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(openb.OpenbError, match=message):
        openb.read_tasks(write(tmp_path, "tasks.csv", text))


@pytest.mark.parametrize(("text", "message"), [
    ("sn,cpu_milli,memory_mib,gpu\n", r"nodes.csv:1: missing column model"),
    ("sn,cpu_milli,memory_mib,gpu,model\nn,1,1,2,\n", r"nodes.csv:2: column model: empty on a node with 2 GPU"),
    ("sn,cpu_milli,memory_mib,gpu,model\nn,1,-4,0,\n", r"nodes.csv:2: column memory_mib: -4 is out of range"),
    ("sn,cpu_milli,memory_mib,gpu,model\nNode_A,1,1,0,\n", r"nodes.csv:2: column sn: 'Node_A' is not a Kubernetes object name"),
])
def test_a_malformed_node_list_is_refused_naming_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(openb.OpenbError, match=message):
        openb.read_nodes(write(tmp_path, "nodes.csv", text))


def test_the_cli_says_what_is_wrong_in_one_line_and_exits_2(tmp_path: Path) -> None:
    bad = write(tmp_path, "tasks.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,x,0\n")
    for args in ([NODES, bad], [NODES, str(tmp_path / "absent.csv")], [NODES, TASKS, "-o", "trace", "--out-dir", "d"]):
        result = CliRunner().invoke(main, ["convert", "openb", *args])
        assert result.exit_code == 2 and "Traceback" not in result.output
        assert len(result.output.strip().splitlines()) == 1 and "error:" in result.output
    assert "tasks.csv:2: column num_gpu: 'x' is not a whole number" in CliRunner().invoke(
        main, ["convert", "openb", NODES, bad]).output


# --- the trace ----------------------------------------------------------------------------------------------------

def test_the_trace_has_a_job_per_task_arriving_at_creation_and_running_until_deletion() -> None:
    nodes, tasks = rows()
    doc = openb.trace(nodes, tasks, "dra")
    jobs = {j["name"]: j for j in doc["jobs"]}
    assert jobs["openb-pod-0422"]["arrival"] == 10195438 and jobs["openb-pod-0422"]["runtime"] == 10197145 - 10195438
    assert jobs["openb-pod-0005"]["requests"] == {"cpu": "20000m", "memory": "65536Mi"} and "claim" not in jobs["openb-pod-0005"]
    assert jobs["openb-pod-0001"]["claim"]["devices"]["requests"][0]["exactly"]["capacity"] == {"requests": {"milli": "460"}}
    assert {j["class"] for j in doc["jobs"]} == {"CPU only", "shared GPU", "1 GPU", "2 GPU", "4 GPU"}
    shapes = {n["prefix"]: n for n in doc["nodes"]}
    assert sum(n["count"] for n in doc["nodes"]) == 5
    assert len(shapes["v100m16-2"]["devices"]) == 4 and shapes["v100m16-2"]["labels"] == {"gpu.openb/model": "V100M16"}
    zero = openb.TaskRow("z", 1, 1, 0, 0, (), 7, 7, 2, "t.csv")  # deleted as it was created (a pod left Pending)
    assert openb.trace(nodes, [zero], "dra")["jobs"][0]["runtime"] == 1  # simulate needs a runtime above 0


def test_simulate_reads_the_extended_and_the_dra_trace() -> None:
    nodes, tasks = rows()
    whole = [t for t in tasks if not t.shared]
    read = trace_of(openb.trace(nodes, whole, "extended"))
    assert {j.name for j in read.jobs} == {t.name for t in whole}
    assert sum(s.count for s in read.nodes) == 5
    assert dict(read.jobs[0].requests) == {"cpu": "12000m", "memory": "16384Mi", "nvidia.com/gpu": "1"}
    assert any(j.affinity for j in read.jobs) and any(s.labels for s in read.nodes)  # gpu_spec as node affinity
    dra = trace_of(openb.trace(nodes, tasks, "dra"))
    assert {j.name for j in dra.jobs if j.claim} == {t.name for t in tasks if t.num_gpu}
    assert sum(len(s.devices) * s.count for s in dra.nodes) == sum(n.gpus for n in nodes)


def test_a_task_list_without_times_makes_a_snapshot_but_no_trace(tmp_path: Path) -> None:
    untimed = write(tmp_path, "tasks.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1000,1024,1,500\n")
    result = CliRunner().invoke(main, ["convert", "openb", NODES, untimed, "--out-dir", str(tmp_path / "out")])
    assert result.exit_code == 0
    assert "no trace.yaml" in result.output and "no creation_time or deletion_time" in result.output
    assert (tmp_path / "out" / "snapshot.yaml").exists() and not (tmp_path / "out" / "trace.yaml").exists()


# --- the engine places them ---------------------------------------------------------------------------------------

def test_dry_run_places_whole_and_shared_tasks_without_overcommitting_a_gpu(tmp_path: Path) -> None:
    """The 5 nodes (11 GPUs) and 20 tasks (15 whole GPUs and 3,550 milli of shares asked) through the planner: no
    device's 1000 milli is exceeded, a whole-GPU task's devices serve no other task, its GPUs are on its node and
    distinct, and gpu_spec holds."""
    result = CliRunner().invoke(main, ["convert", "openb", NODES, TASKS, "--out-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    docs = yaml.safe_load((tmp_path / "snapshot.yaml").read_text())["items"]
    plan = plan_batch(build_cluster([(f"d{i}", d) for i, d in enumerate(docs)]), Rules(), Options(time_limit=5, workers=1))
    assert check_plan(docs, plan.assignments) == []
    tasks = {f"openb/{t.name}": t for t in openb.read_tasks(TASKS)}
    used: dict[str, int] = collections.Counter()  # device -> milli consumed
    users: dict[str, set[str]] = collections.defaultdict(set)  # device -> pods
    for key, node in plan.assignments.items():
        for allocation in plan.details.reserved.get(key, {}).get("DynamicResources", {}).values():
            devices = [d for _, d in allocation.devices]
            assert all(d.startswith(f"gpu.openb/{node}/") for d in devices)
            assert len(set(devices)) == len(devices) == tasks[key].num_gpu
            for _, device, amount in allocation.shares:
                used[device] += sum(milli for _, _, milli in amount) // 1000
            for d in devices:
                users[d].add(key)
    assert used and max(used.values()) <= 1000
    whole = [k for k in plan.assignments if tasks[k].num_gpu and not tasks[k].shared]
    shared = [k for k in plan.assignments if tasks[k].shared]
    assert len(whole) >= 5 and len(shared) >= 5  # both kinds placed, side by side
    for key in whole:
        for d, pods in users.items():
            assert key not in pods or pods == {key}, f"{d} held whole by {key} is also used by {pods - {key}}"
    assert sum(len(p) > 1 for p in users.values()) >= 1  # shares do share a device
    assert plan.assignments.get("openb/openb-pod-0007") in (None, "openb-node-0123")  # P100 only
    assert plan.assignments.get("openb/openb-pod-0020") in (None, "openb-node-0233", "openb-node-1328")  # V100M16|A10
    assert "openb/openb-pod-0007" in plan.assignments and "openb/openb-pod-0020" in plan.assignments
