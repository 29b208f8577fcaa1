"""What a user sees: explain as JSON, a CI gate on unschedulable pods, notes on stderr, an 80-column table."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import yaml
from rich.console import Console

from engine.output import print_table
from runner import run
from testkit.manifests import node, pod


def cli(*args: str, columns: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": str(columns)})


def snapshot(tmp_path, *docs) -> str:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return str(path)


# --- explain -o json ----------------------------------------------------------------------------------------

def test_explain_json_for_an_unschedulable_pod(tmp_path):
    path = snapshot(tmp_path, node("small", cpu="1"), node("big", cpu="2"), pod("p", cpu="4"))
    out = cli("explain", "--cluster", path, "default/p", "-o", "json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["pod"] == "default/p" and doc["node"] is None
    assert {row["node"] for row in doc["nodes"]} == {"small", "big"}
    assert all(row["verdict"] and "Insufficient cpu" in row["reason"] for row in doc["nodes"])
    assert doc["unschedulable"] and "Insufficient cpu" in doc["unschedulable"][0]


def test_explain_json_for_a_placed_pod(tmp_path):
    path = snapshot(tmp_path, node("a"), pod("p"))
    doc = json.loads(cli("explain", "--cluster", path, "p", "-o", "json").stdout)
    assert doc["node"] == "a" and doc["unschedulable"] == []


def test_explain_json_for_a_skipped_pod(tmp_path):
    path = snapshot(tmp_path, node("a"), pod("g", schedulingGates=[{"name": "example.com/wait"}]))
    out = cli("explain", "--cluster", path, "g", "-o", "json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["node"] is None and "example.com/wait" in doc["skipped"]


# --- --fail-on-unschedulable --------------------------------------------------------------------------------

def test_fail_on_unschedulable_exits_3(tmp_path):
    path = snapshot(tmp_path, node("a", cpu="1"), pod("big", cpu="8"), pod("ok"))
    out = cli("dry-run", "--cluster", path, "-o", "json", "--fail-on-unschedulable")
    assert out.returncode == 3, out.stderr
    assert json.loads(out.stdout)["unschedulable"], "the plan is still printed"
    assert "1 pod(s) unschedulable" in out.stderr


def test_fail_on_unschedulable_exits_0_when_all_fit(tmp_path):
    path = snapshot(tmp_path, node("a"), pod("ok"))
    assert cli("dry-run", "--cluster", path, "--fail-on-unschedulable").returncode == 0


def test_without_the_flag_unschedulable_still_exits_0(tmp_path):
    path = snapshot(tmp_path, node("a", cpu="1"), pod("big", cpu="8"))
    assert cli("dry-run", "--cluster", path).returncode == 0


def test_help_documents_the_exit_codes():
    out = cli("dry-run", "--help")
    assert "--fail-on-unschedulable" in out.stdout and "3" in out.stdout


# --- notes on stderr ----------------------------------------------------------------------------------------

def test_table_notes_go_to_stderr(tmp_path):
    svc = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "s", "namespace": "default"}}
    path = snapshot(tmp_path, node("a"), pod("p"), svc)
    out = cli("dry-run", "--cluster", path)
    assert out.returncode == 0
    assert "ignored 1 object(s) of kind ConfigMap" in out.stderr
    assert "ignored 1 object(s)" not in out.stdout


# --- 80 columns ---------------------------------------------------------------------------------------------

def wide_plan():
    gpu = {"nvidia.com/gpu": "4", "example.com/fpga-accelerator": "2", "hugepages-2Mi": "1Gi"}
    nodes = [node(f"gpu-node-with-a-long-name-{i}", cpu="64", memory="512Gi", **gpu) for i in range(2)]
    pods = [pod(f"training-job-resnet50-worker-{i}", ns="machine-learning-research", cpu="8", memory="100Gi",
                requests={"nvidia.com/gpu": "1", "example.com/fpga-accelerator": "1"}) for i in range(3)]
    pods.append(pod("does-not-fit-anywhere-at-all", ns="machine-learning-research", cpu="500"))
    return run(nodes + pods)


def test_table_at_80_columns_cuts_no_value():
    buffer = io.StringIO()
    print_table(wide_plan(), Console(width=80, file=buffer, highlight=False, color_system=None))
    text = buffer.getvalue()
    assert "…" not in text, text
    assert all(len(line) <= 80 for line in text.splitlines())
    for i in range(3):  # whole, or namespace/ and name on two lines, never cut inside a word
        assert (f"machine-learning-research/training-job-resnet50-worker-{i}" in text
                or (f"training-job-resnet50-worker-{i}" in text and "machine-learning-research/ " in text))
    assert "gpu-node-with-a-long-name-0" in text


def test_demo_at_80_columns_cuts_no_value():
    out = cli("dry-run", "--time-limit", "3", columns=80)
    assert out.returncode == 0, out.stderr
    assert "…" not in out.stdout, out.stdout
    assert all(len(line) <= 80 for line in out.stdout.splitlines())


# --- devices in the table -----------------------------------------------------------------------------------

def device_plan(shared: bool = False):
    """n1 with two h100s; a claim for two h100s (a selector in CEL) and a claim for any gpu; a node without devices."""
    from testkit.manifests import claims, device_class, device_request, gpu, resource_claim, resource_slice

    h100 = 'device.attributes["gpu.example.com"].model == "h100"'
    devices = resource_slice(None if shared else "n1", [gpu(f"g{i}", model="h100", memory="80Gi") for i in range(2)])
    return run([node("n1"), node("plain", cpu="1", labels={"kind": "plain"}), device_class(), devices,
                resource_claim("train", device_request(count=2, selectors=(h100,))), pod("train", resourceClaims=claims("train")),
                resource_claim("infer", device_request()), pod("infer", resourceClaims=claims("infer")),
                pod("a", cpu="500m", nodeSelector={"kind": "plain"})])


def rendered(plan, width: int = 250) -> str:
    buffer = io.StringIO()
    print_table(plan, Console(width=width, file=buffer, highlight=False, color_system=None))
    return buffer.getvalue()


def test_device_rows_are_named_by_class_and_request_and_count_what_was_free():
    plan = device_plan()
    assert plan.assignments["default/train"] == "n1" and "default/infer" in plan.unschedulable
    text = rendered(plan)
    assert "device.attributes" not in text and "==" not in text  # no CEL anywhere
    said = " ".join(plan.unschedulable["default/infer"])
    assert "Insufficient devices: gpu for claim default/train request gpu or gpu" in said, said
    usage = text.split("Node utilisation", 1)[1]  # (the unschedulable table above names the row too)
    header = next(line for line in usage.splitlines() if "devices: gpu" in line and "node" in line)
    assert "devices: gpu for claim default/train request gpu" in header
    n1 = next(line for line in text.splitlines() if line.startswith("│ n1 "))
    plain = next(line for line in text.splitlines() if line.startswith("│ plain "))
    assert "2 (of 2 free)" in n1 and "0 (of 2 free)" in n1 and "/0" not in n1
    assert plain.count("—") == 3 and "/0" not in plain  # no devices there: none, not 0/0


def test_devices_several_nodes_reach_have_no_node_limit():
    text = rendered(device_plan(shared=True))
    n1 = next(line for line in text.splitlines() if line.startswith("│ n1 "))
    assert "(no node limit)" in n1 and "/0" not in text
