"""Policies that check but can never mean what they say (issue 47, point 5): a resource the cluster does not know,
an amount in the wrong unit or beyond any cluster, a priority no pod has, a file with no policy. Warnings at
file:line:col, from `check` (with or without --cluster) and as a dry run's notes; they never fail `check`."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

from engine.policy.lint import lint, notes, unknown_resources
from engine.policy.parse import parse
from engine.policy.plausible import warnings
from engine.reading.load import build_cluster
from testkit.manifests import device_class, node, pod

FILE = "w.policy"


def warned(body: str) -> list[str]:
    """The warnings about one policy around `body` (its statements from line 3), each as file:line:col: message."""
    text = f"policy w {{\n  applies to all pods\n{body}\n}}\n"
    return [d.headline() for d in warnings(parse(text, FILE), {FILE: text})]


def cluster(*docs: dict):
    return build_cluster([(f"d{i}", d) for i, d in enumerate(docs)])


# --- amounts in the wrong unit -----------------------------------------------------------------------------

def test_memory_without_a_unit_is_bytes():
    [w] = warned('  require node allocatable "memory" >= 64')
    assert w.startswith(f"{FILE}:3:11: warning: allocatable 'memory' is compared with 64: memory is counted in bytes")
    assert "64 byte(s)" in w and 'did you mean "64Mi" or "64Gi"?' in w
    [w] = warned('  quota max "memory" "512m", "ephemeral-storage" 100, "hugepages-2Mi" "2Ki"')[:1]
    assert "quota max of 'memory' is \"512m\"" in w and "1 byte(s)" in w  # m is milli: 0.512 bytes, rounded up
    assert len(warned('  quota max "memory" "512m", "ephemeral-storage" 100, "hugepages-2Mi" "2Ki"')) == 3


@pytest.mark.parametrize("body", [
    '  require node allocatable "memory" >= "64Gi"',
    '  require node allocatable "memory" == 0',
    '  quota max "memory" "1Mi", "ephemeral-storage" "10Gi"',
    '  require node allocatable "nvidia.com/gpu" >= 1',  # counted in units: 1 is one
])
def test_amounts_with_their_unit_are_fine(body):
    assert warned(body) == []


def test_cpu_with_a_binary_suffix_is_billions_of_cores():
    [w] = warned('  quota min "cpu" "4Gi"')
    assert w == (f"{FILE}:3:13: warning: quota min of 'cpu' is \"4Gi\": cpu is counted in cores, so that is "
                 "4,294,967,296 cores (did you mean 4?)")
    assert warned('  quota min "cpu" "4", "memory" "4Gi"\n  require node allocatable "cpu" >= "1500m"') == []


# --- absurd numbers ----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("body", "limit"), [
    ('  quota max "memory" 1e30', "above 1Ei"),
    ('  quota max "cpu" 1e30', "above 10,000,000 cores"),
    ('  quota max "cpu" "20M"', "above 10,000,000 cores"),
    ('  quota max "nvidia.com/gpu" "1e30"', "above 9,223,372,036,854,775,807"),
    ('  quota max "pods" 200000', "above 150,000 pods"),
    ('  require node allocatable "memory" > "2Ei"', "above 1Ei"),
])
def test_amounts_beyond_any_cluster(body, limit):
    [w] = warned(body)
    assert "more than any cluster holds" in w and limit in w, w


def test_large_but_real_amounts_are_fine():
    assert warned('  quota max "cpu" 500000, "memory" "4Pi", "nvidia.com/gpu" 20000, "pods" 150000') == []


def test_runtime_and_reach_beyond_a_year():
    [w] = warned("  runtime 99999999999d")
    assert w.startswith(f"{FILE}:3:3: warning: runtime of 99,999,999,999 days is over 365 days")
    [w] = warned("  reserve at most 2 within 400d")
    assert "reaches over 365 days ahead" in w
    assert warned("  runtime 365d\n  reserve at most 2 within 30d") == []


def test_a_priority_no_pod_can_have():
    text = "policy p {\n  applies to pods where priority >= 1e30 or priority > -3000000000\n}\n"
    found = [d.headline() for d in warnings(parse(text, FILE), {FILE: text})]
    assert len(found) == 2
    assert "'priority >= 1e+30' is false for every pod" in found[0]
    assert "'priority > -3e+09' is true for every pod" in found[1]
    text = "policy p {\n  applies to pods where priority >= 2000000000\n}\n"
    assert warnings(parse(text, FILE), {FILE: text}) == []  # system-cluster-critical's priority


# --- files with no policy ----------------------------------------------------------------------------------

def test_a_file_without_a_policy():
    sources = {"empty.policy": "", "notes.policy": "# to do\n// later\n", "ok.policy": "policy a { applies to all pods }"}
    policies = [p for name, text in sources.items() for p in parse(text, name)]
    found = [d.headline() for d in warnings(policies, sources)]
    assert found == ["empty.policy:1:1: warning: no policy in this file (empty): it adds nothing",
                     "notes.policy:1:1: warning: no policy in this file (only comments): it adds nothing"]


# --- resources the snapshot does not know ------------------------------------------------------------------

TYPOS = '''policy gpus {
  applies to all pods
  quota max "nvidia.com/gpus" 4
  require node allocatable "nvidia.com/gpus" exists or node allocatable "example.com/fpga" >= 1
  minimize node allocatable "example.com/fgpa" weight 5
  minimize cost "nvidia.com/gpu" at node label "price" weight 5
}
'''


def test_a_resource_no_node_advertises_and_no_pod_asks_for():
    snapshot = cluster(node("a", **{"nvidia.com/gpu": "8"}), pod("p", requests={"example.com/fpga": "1"}))
    found = sorted((pos.line, pos.column, message) for pos, message in unknown_resources(parse(TYPOS, FILE), snapshot))
    assert found == [
        (3, 13, "no node in the snapshot advertises 'nvidia.com/gpus' and no pod asks for it "
                "(did you mean 'nvidia.com/gpu'?)"),
        (4, 11, "no node in the snapshot advertises 'nvidia.com/gpus' and no pod asks for it "
                "(did you mean 'nvidia.com/gpu'?)"),
        (5, 3, "no node in the snapshot advertises 'example.com/fgpa' and no pod asks for it "
               "(did you mean 'example.com/fpga'?)"),
    ]  # nvidia.com/gpu (a node has it) and example.com/fpga (a pod asks for it) are known


def test_a_resource_a_device_class_serves_is_known():
    """DRAExtendedResource: a DeviceClass's extendedResourceName is served from devices, no node advertises it."""
    cls = device_class("gpu")
    cls["spec"]["extendedResourceName"] = "example.com/gpu"
    text = 'policy g {\n  applies to all pods\n  quota max "example.com/gpu" 2, "deviceclass.resource.kubernetes.io/gpu" 2\n}\n'
    assert list(unknown_resources(parse(text, FILE), cluster(node("a"), cls))) == []
    assert len(list(unknown_resources(parse(text, FILE), cluster(node("a"))))) == 2


def test_lint_and_dry_run_notes_carry_the_resource_warning():
    text = 'policy g {\n  applies to all pods\n  quota max "nvidia.com/gpus" 4, "memory" 64\n}\n'
    policies, sources = parse(text, FILE), {FILE: text}
    snapshot = cluster(node("a", **{"nvidia.com/gpu": "8"}), pod("p"))
    findings = [f for f in lint(policies, snapshot, sources) if "nvidia.com/gpus" in f.diagnostic.message]
    assert len(findings) == 1 and not findings[0].error and findings[0].diagnostic.source_line
    assert [n.split(": warning: ")[0] for n in notes(policies, snapshot, sources)] == [f"{FILE}:3:13", f"{FILE}:3:34"]


# --- the commands --------------------------------------------------------------------------------------------

def cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "300"}
    return subprocess.run([sys.executable, "-m", "engine", *args], capture_output=True, text=True, timeout=120, env=env)


ISSUE = '''policy ml {
  applies to pods where namespace == "ml"
  quota max "nvidia.com/gpus" 4
  require node allocatable "memory" >= 64
  runtime 99999999999d
}
'''


def test_check_warns_without_failing(tmp_path):
    policy, empty = tmp_path / "ml.policy", tmp_path / "empty.policy"
    policy.write_text(ISSUE)
    empty.write_text("")
    out = cli("check", str(policy), str(empty))
    assert out.returncode == 0 and "1 policy OK" in out.stdout, out.stderr
    assert f"{empty}:1:1: warning: no policy in this file (empty)" in out.stderr
    assert f"{policy}:4:11: warning: allocatable 'memory' is compared with 64" in out.stderr
    assert f"{policy}:5:3: warning: runtime of 99,999,999,999 days" in out.stderr
    assert "0 error(s), 3 warning(s)" in out.stderr
    assert "nvidia.com/gpus" not in out.stderr  # without a snapshot nothing says which resources exist


def test_check_with_a_cluster_and_dry_run_notes(tmp_path):
    policy = tmp_path / "ml.policy"
    policy.write_text(ISSUE)
    path = tmp_path / "cluster.yaml"
    docs = [node("gpu", **{"nvidia.com/gpu": "8"}), pod("train", ns="ml", requests={"nvidia.com/gpu": "1"})]
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": docs}))
    out = cli("check", str(policy), "--cluster", str(path))
    assert out.returncode == 0, out.stderr
    assert (f"{policy}:3:13: warning: no node in the snapshot advertises 'nvidia.com/gpus' and no pod asks for it "
            "(did you mean 'nvidia.com/gpu'?)") in out.stderr
    assert "    quota max \"nvidia.com/gpus\" 4\n                ^" in out.stderr  # the source line and a caret
    out = cli("dry-run", "--cluster", str(path), "--policy", str(policy), "-o", "json")
    assert out.returncode == 0, out.stderr
    assert f"policy-scheduler: note: {policy}:3:13: warning: no node in the snapshot advertises 'nvidia.com/gpus'" in out.stderr
    assert f"policy-scheduler: note: {policy}:4:11: warning: allocatable 'memory'" in out.stderr
    assert f"policy-scheduler: note: {policy}:5:3: warning: runtime" in out.stderr
    assert "note" not in cli("dry-run", "--cluster", str(path), "--policy", str(policy), "-q").stderr
