"""The policy library (policies/): it checks clean, its test cases pass, the deployed ConfigMap is current,
and its tests are sharp enough to notice when a policy's key statement goes missing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ROOT / "policies"
CONFIGMAP = ROOT / "deploy" / "components" / "example-policies" / "policies-configmap.yaml"
EXAMPLES = sorted(p.name for p in LIBRARY.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))


def cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "300"}  # rich wraps long lines to the terminal width
    return subprocess.run([sys.executable, "-m", "engine", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env=env)


def test_every_example_has_a_policy_and_tests():
    assert {"lowest-price", "gpu-pools", "cost-aware-web", "ha-zones", "gang-training"} <= set(EXAMPLES)
    for name in EXAMPLES:
        assert (LIBRARY / name / f"{name}.policy").is_file(), name
        assert (LIBRARY / name / f"{name}_test.yaml").is_file(), name


def test_library_checks_clean():
    out = cli("check", "policies/")
    assert out.returncode == 0, out.stderr
    assert "OK" in out.stdout and out.stderr == ""


def test_library_tests_pass():
    out = cli("test", "policies/")
    assert out.returncode == 0, out.stdout + out.stderr
    summary = out.stdout.strip().splitlines()[-1]
    assert summary.endswith(" passed, 0 failed"), summary
    assert int(summary.split()[0]) >= 2 * len(EXAMPLES)
    assert "FAIL" not in out.stdout


def test_deployed_configmap_is_current():
    out = cli("configmap", "policies/")
    assert out.returncode == 0, out.stderr
    assert CONFIGMAP.read_text(encoding="utf-8") == out.stdout, (
        f"{CONFIGMAP.relative_to(ROOT)} is stale: run `make policies-configmap` and commit the result")


# (example, the statement to take out, what replaces it): with the statement gone the example's own tests
# must fail, or they do not test it.
MUTATIONS = [
    ("lowest-price", 'minimize node annotation "price"', ""),
    ("gpu-pools", 'require node label "accelerator" in', ""),
    ("gpu-pools", "tolerate taint nvidia.com/gpu=present:NoSchedule", ""),
    ("gpu-pools", 'prefer node label "lifecycle" == "on-demand"', ""),
    ("gpu-pools", 'forbid node label "accelerator" exists', ""),
    ("cost-aware-web", 'require node label "cores" >= 4', ""),
    ("cost-aware-web", 'prefer node label "lifecycle" == "spot"', ""),
    ("cost-aware-web", 'minimize node annotation "price"', ""),
    ("cost-aware-web", "pack nodes", ""),
    ("cost-aware-web", "applies to pods where", "applies to all pods"),
    ("ha-zones", 'separate from pods with same label "app" per node', ""),
    ("ha-zones", 'at most 2 per zone of pods with same label "app"', ""),
    ("ha-zones", "applies to pods where", "applies to all pods"),
    ("gang-training", 'gang by label "job" min 4 within zone', ""),
    ("gang-training", 'gang by label "job" min 4 within zone', 'gang by label "job" min 4'),
    ("gang-training", "applies to pods where", "applies to all pods"),
]


def _id(mutation: tuple[str, str, str]) -> str:
    example, statement, replacement = mutation
    return f"{example}: {statement} -> {replacement}" if replacement else f"{example}: without {statement}"


@pytest.mark.parametrize("example,statement,replacement", MUTATIONS, ids=[_id(m) for m in MUTATIONS])
def test_tests_fail_without_the_key_statement(tmp_path, example, statement, replacement):
    copy = tmp_path / example
    shutil.copytree(LIBRARY / example, copy)
    policy = copy / f"{example}.policy"
    lines = policy.read_text(encoding="utf-8").splitlines(keepends=True)
    hits = [i for i, line in enumerate(lines) if line.strip().startswith(statement)]
    assert len(hits) == 1, f"{example}.policy: expected one line starting with {statement!r}, found {len(hits)}"
    indent = lines[hits[0]][: len(lines[hits[0]]) - len(lines[hits[0]].lstrip())]
    lines[hits[0]] = f"{indent}{replacement}\n" if replacement else "\n"
    policy.write_text("".join(lines), encoding="utf-8")

    checked = cli("check", str(copy))
    assert checked.returncode == 0, checked.stderr  # the mutant is still a valid policy
    out = cli("test", str(copy))
    assert out.returncode == 1, f"the tests of {example} still pass without {statement!r}:\n{out.stdout}{out.stderr}"
    assert "FAIL" in out.stdout and not out.stdout.strip().endswith(" 0 failed")
