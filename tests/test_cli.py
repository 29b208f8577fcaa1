"""The command line, run as a real process: the dry-run contract, explain, exit codes, no tracebacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from engine.cli import demo_path
from testkit.checker import check_plan
from testkit.manifests import node, pod, podgroup


def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "300"}  # rich wraps tables to the terminal width; keep rows whole
    return subprocess.run([sys.executable, "-m", "engine", *args], input=stdin, capture_output=True, text=True,
                          timeout=120, env=env)


def snapshot(tmp_path, *docs) -> str:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": list(docs)}))
    return str(path)


def test_demo_dry_run_json_contract():
    out = cli("dry-run", "-o", "json", "--time-limit", "5")
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    docs = yaml.safe_load(Path(demo_path()).read_text())["items"]
    pending = {f"{d['metadata']['namespace']}/{d['metadata']['name']}" for d in docs
               if d["kind"] == "Pod" and not d["spec"].get("nodeName")
               and d["spec"].get("schedulerName") == "policy-scheduler"}
    assert set(plan["assignments"]) | set(plan["unschedulable"]) == pending
    assert not set(plan["assignments"]) & set(plan["unschedulable"])
    assert all(isinstance(r, list) and r for r in plan["unschedulable"].values())
    assert plan["unschedulable"], "the demo shows at least one explanation"
    assert {"pods", "nodes", "status", "seconds"} <= set(plan["stats"])
    assert plan["stats"]["status"] in ("OPTIMAL", "FEASIBLE")
    assert check_plan(docs, plan["assignments"]) == []


def test_demo_table_is_the_default_output():
    out = cli("dry-run")
    assert out.returncode == 0, out.stderr
    assert "Placements" in out.stdout and "Unschedulable" in out.stdout and "Node utilisation" in out.stdout
    assert "status" in out.stdout


def test_yaml_output_and_stdin(tmp_path):
    text = yaml.safe_dump_all([node("a"), pod("p")])
    out = cli("dry-run", "--cluster", "-", "-o", "yaml", stdin=text)
    assert out.returncode == 0, out.stderr
    assert yaml.safe_load(out.stdout)["assignments"] == {"default/p": "a"}


def test_scheduler_name_flag(tmp_path):
    path = snapshot(tmp_path, node("a"), pod("p", scheduler="other"))
    out = json.loads(cli("dry-run", "--cluster", path, "-o", "json", "--scheduler-name", "other").stdout)
    assert out["assignments"] == {"default/p": "a"}


def test_unschedulable_pods_still_exit_zero(tmp_path):
    path = snapshot(tmp_path, node("a", cpu="1"), pod("big", cpu="8"))
    out = cli("dry-run", "--cluster", path, "-o", "json")
    assert out.returncode == 0
    assert json.loads(out.stdout)["unschedulable"]["default/big"] == ["0/1 nodes are available: 1 Insufficient cpu."]


@pytest.mark.parametrize(
    "content,message",
    [
        (None, "cannot read file"),
        ("kind: Node\nmetadata: {name: [x\n", "invalid YAML"),
        (yaml.safe_dump(pod("p", cpu="12XYZ")), "Pod default/p"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path, content, message):
    path = tmp_path / "bad.yaml"
    if content is not None:
        path.write_text(content)
    out = cli("dry-run", "--cluster", str(path))
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and str(path) in lines[0]


def test_bad_flag_is_a_usage_error():
    out = cli("dry-run", "-o", "xml")
    assert out.returncode == 2 and "Traceback" not in out.stderr


@pytest.mark.parametrize("args, message", [
    (["dry-run", "-o", "xml"], "Invalid value for '-o' / '--output': 'xml' is not one of"),
    (["dry-run", "--time-limit", "nan"], "'--time-limit': 'nan' is not a finite number of seconds"),
    (["dry-run", "--time-limit", "inf"], "'--time-limit': 'inf' is not a finite number of seconds"),
    (["dry-run", "--time-limit", "0"], "'--time-limit': '0' is below the minimum of 0.1 seconds"),
    (["dry-run", "--scheduler-name", ""], "'--scheduler-name': '' must not be empty"),
    (["explain", "--scheduler-name", "Upper", "x"], "'--scheduler-name': 'Upper' must be lowercase"),
    (["dry-run", "--workers", "0"], "Invalid value for '--workers'"),
    (["dry-run", "--nope"], "No such option '--nope'"),
    (["explain"], "Missing argument 'POD'"),
    (["configmap", "policies/", "--namespace", "a.b"], "'--namespace': 'a.b' must be lowercase"),
    (["no-such-command"], "No such command 'no-such-command'"),
])
def test_every_malformed_flag_is_one_line_and_exit_2(args, message):
    out = cli(*args)
    assert out.returncode == 2, out.stderr
    assert out.stdout == "" and out.stderr.count("\n") == 1, out.stderr  # one line, not Usage/Try/Error
    assert out.stderr.startswith("policy-scheduler: error: ") and message in out.stderr, out.stderr


def test_help():
    out = cli("--help")
    assert out.returncode == 0 and "dry-run" in out.stdout and "explain" in out.stdout
    out = cli("dry-run", "--help")
    assert "--time-limit" in out.stdout and "--scheduler-name" in out.stdout


def test_explain_shows_each_node_and_the_reason(tmp_path):
    gpu_taint = [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]
    path = snapshot(tmp_path, node("small", cpu="1"), node("gpu", cpu="16", taints=gpu_taint),
                    node("cordoned", cpu="16", unschedulable=True), pod("p", cpu="4"))
    out = cli("explain", "--cluster", path, "default/p")
    assert out.returncode == 0, out.stderr
    rows = {line.split("│")[1].strip(): line for line in out.stdout.splitlines() if line.count("│") >= 3}
    assert "Insufficient cpu" in rows["small"]
    assert "untolerated taint {gpu: true}" in rows["gpu"]
    assert "unschedulable" in rows["cordoned"]
    assert "0/3 nodes are available" in out.stdout


def test_explain_placed_pod_and_unknown_pod(tmp_path):
    path = snapshot(tmp_path, node("a"), pod("p"), podgroup("g", 1))
    out = cli("explain", "--cluster", path, "p")
    assert out.returncode == 0 and "placed on a" in out.stdout
    out = cli("explain", "--cluster", path, "nope")
    assert out.returncode == 2 and "no pending pod 'nope'" in out.stderr


def test_explain_pod_that_lost_in_the_batch(tmp_path):
    path = snapshot(tmp_path, node("a", cpu="1"), pod("high", cpu="1", priority=100), pod("low", cpu="1"))
    out = cli("explain", "--cluster", path, "default/low")
    assert out.returncode == 0, out.stderr
    assert "fits alone" in out.stdout
    assert "higher-priority" in out.stdout


def test_notes_go_to_stderr_with_json(tmp_path):
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "s", "namespace": "default"}}
    path = snapshot(tmp_path, node("a"), pod("p"), config)
    out = cli("dry-run", "--cluster", path, "-o", "json")
    assert json.loads(out.stdout)["assignments"] == {"default/p": "a"}
    assert "ignored 1 object(s) of kind ConfigMap" in out.stderr


GOOD_POLICY = 'policy gpu-only {\n  applies to all pods\n  require node label "accelerator" exists\n}\n'


def test_check_clean_and_broken_policies(tmp_path):
    good = tmp_path / "good.policy"
    good.write_text(GOOD_POLICY)
    out = cli("check", str(good))
    assert out.returncode == 0 and "1 policy OK" in out.stdout
    bad = tmp_path / "bad.policy"
    bad.write_text('policy broken {\n  applies to all pods\n  requre node label "x" exists\n}\n')
    out = cli("check", str(tmp_path))
    assert out.returncode == 1
    assert f"{bad}:3:3: unexpected 'requre'" in out.stderr and "did you mean 'require'?" in out.stderr
    assert "Traceback" not in out.stderr


def test_check_configmap_of_policies(tmp_path):
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "policies", "namespace": "kube-system"},
          "data": {"gpu.policy": GOOD_POLICY, "typo.policy": "policy t { applies to all pods\n prefer node label \"x\" exists }\n"}}
    path = tmp_path / "cm.yaml"
    path.write_text(yaml.safe_dump(cm))
    out = cli("check", str(path))
    assert out.returncode == 1
    assert f"{path}[ConfigMap policies: typo.policy]:2:" in out.stderr


def test_dry_run_with_policy(tmp_path):
    policy = tmp_path / "gpu.policy"
    policy.write_text(GOOD_POLICY)
    path = snapshot(tmp_path, node("plain"), node("gpu", labels={"accelerator": "a100"}), pod("p"))
    out = cli("dry-run", "--cluster", path, "--policy", str(policy), "-o", "json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["assignments"] == {"default/p": "gpu"}
    out = cli("explain", "--cluster", path, "--policy", str(policy), "p")
    assert f"{policy}:3 (policy gpu-only)" in out.stdout


def test_dry_run_with_a_bad_policy_exits_2(tmp_path):
    policy = tmp_path / "bad.policy"
    policy.write_text("policy x { applies to all pods\n gang by label \"job\" min 0 }\n")
    out = cli("dry-run", "--policy", str(policy))
    assert out.returncode == 2 and f"{policy}:2:2: gang min must be at least 1" in out.stderr
    assert "Traceback" not in out.stderr


def test_check_lints_against_a_cluster(tmp_path):
    policy = tmp_path / "p.policy"
    policy.write_text(
        'policy ml {\n  applies to pods where namespace == "ml"\n  require node label "accelerator" exists\n}\n'
        'policy ghost {\n  applies to pods where namespace == "nowhere"\n  prefer node label "ssd" exists weight 5\n}\n'
    )
    path = snapshot(tmp_path, node("plain"), pod("train", ns="ml"), pod("web"))
    out = cli("check", str(policy), "--cluster", path)
    assert out.returncode == 1, out.stderr
    assert f"{policy}:3:1: error: hard rules leave 1 pod(s) in scope no candidate node (ml/train)" in out.stderr
    assert f"{policy}:3:3: warning: 'require node label \"accelerator\" exists' matches no node" in out.stderr
    assert f"{policy}:6:3: warning: policy 'ghost' applies to no pod in the snapshot" in out.stderr
    assert f"{policy}:7:3: warning: 'prefer node label \"ssd\" exists' matches no node" in out.stderr
    fine = snapshot(tmp_path, node("gpu", labels={"accelerator": "a100", "ssd": "1"}), pod("train", ns="ml"),
                    pod("x", ns="nowhere"))
    out = cli("check", str(policy), "--cluster", fine)
    assert out.returncode == 0 and out.stderr == "", out.stderr


def test_check_lint_reports_gangs_that_cannot_start(tmp_path):
    policy = tmp_path / "g.policy"
    policy.write_text('policy g {\n  applies to pods where label "job" exists\n  gang by label "job" min 4\n}\n')
    path = snapshot(tmp_path, node("a"), *[pod(f"j{i}", labels={"job": "t"}) for i in range(3)])
    out = cli("check", str(policy), "--cluster", path)
    assert f"{policy}:3:3: warning: gang default/job=t has 3 pod(s) in the snapshot but needs 4" in out.stderr


def test_kubeconfig_help_lists_every_kind_the_live_dry_run_reads():
    """The help is made from engine.loop.live's list, the one read_cluster walks: none left out, none added."""
    import re

    from click.testing import CliRunner

    from engine.cli import main
    from engine.loop.live import LIVE_KINDS
    from engine.reading.objects import BY_NAME, KINDS

    help_text = " ".join(CliRunner().invoke(main, ["dry-run", "--help"]).output.split())
    listed = re.search(r"--kubeconfig FILE .*?lists (.*?); a kind", help_text).group(1)
    named = [kind.partition(".")[0] for kind in LIVE_KINDS]
    assert len(listed.split(", ")) == len(LIVE_KINDS)
    assert all(re.search(rf"\b{kind}e?s\b", listed) for kind in named), listed
    assert "PodGroups (scheduling.k8s.io)" in listed and "DeviceClasses" in listed and "ElasticQuotas" in listed
    assert set(LIVE_KINDS) <= set(BY_NAME) and set(named) <= set(KINDS)  # read through the API, into the model


def test_text_from_the_cluster_is_printed_as_written_not_read_as_markup(tmp_path):
    """Tables print pod names, reasons and score terms through rich: a `[...]` in them (a label value list, a policy
    file's citation, a user's odd name) was taken for a style tag and dropped, or crashed the explain table."""
    from testkit.manifests import affinity, term

    pref = affinity(term({"app": "cache"}))
    pref["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] = [
        {"weight": 30, "podAffinityTerm": pref["podAffinity"].pop("requiredDuringSchedulingIgnoredDuringExecution")[0]}]
    path = snapshot(tmp_path, node("n1"), node("n2"), pod("cache-0", node_name="n1", labels={"app": "cache"}),
                    pod("web-0", affinity=pref), pod("odd", priorityClassName="[bold]gold"))
    table = cli("dry-run", "--cluster", path, "-q")
    assert table.returncode == 0 and "PriorityClass '[bold]gold' not found" in table.stdout, table.stdout
    explained = cli("explain", "--cluster", path, "web-0")
    assert explained.returncode == 0, explained.stderr
    assert "app In [cache]" in " ".join(explained.stdout.split()), explained.stdout
