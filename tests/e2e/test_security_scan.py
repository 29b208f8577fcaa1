"""The static security scan of what the installs render (issue 50, point 5): checkov's Kubernetes checks over
`helm template` and `kustomize build`, with every option on as well as by default. A failed check is either fixed
in the manifests or listed in deploy/security-scan.yaml with why it is accepted and where it fails; nothing else
fails, and nothing listed there passes unnoticed. checkov runs from its own virtualenv (testkit.deploytools.checkov:
pinned, installed from PyPI on a machine's first run and cached)."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from testkit.deploytools import SECURITY_SCAN, checkov_failures, helm_template_values, renders


def _write(directory: Path, rendered: dict[str, list[dict]]) -> Path:
    directory.mkdir()
    for name, docs in rendered.items():
        (directory / f"{name}.yaml").write_text(yaml.safe_dump_all(docs))
    return directory


def _accepted() -> dict[str, dict]:
    return yaml.safe_load(SECURITY_SCAN.read_text())["accepted"]


def test_every_accepted_check_says_why_and_where() -> None:
    names = set(renders())
    for check, entry in _accepted().items():
        assert entry.get("check") and len(entry.get("why", "")) > 80, f"{check}: say what it checks and why it is accepted"
        assert entry["in"] and set(entry["in"]) <= names, f"{check}: `in` names renders of {sorted(names)}"


def test_no_failed_check_is_left_unexplained(tmp_path) -> None:
    rendered = renders()
    assert {d["kind"] for d in rendered["helm-all"]} >= {"Certificate", "ServiceMonitor", "NetworkPolicy",
                                                         "CustomResourceDefinition", "MutatingAdmissionPolicy"}
    assert {d["kind"] for d in rendered["kustomize-all"]} >= {"Certificate", "ServiceMonitor", "NetworkPolicy",
                                                              "MutatingAdmissionPolicy"}
    failed = checkov_failures(_write(tmp_path / "rendered", rendered))
    accepted = {(check, render) for check, entry in _accepted().items() for render in entry["in"]}
    assert not failed - accepted, f"failing, not accepted in deploy/security-scan.yaml: {sorted(failed - accepted)}"
    assert not accepted - failed, f"accepted in deploy/security-scan.yaml, yet passing now: {sorted(accepted - failed)}"


@pytest.mark.parametrize("field, check", [("allowPrivilegeEscalation", "CKV_K8S_20"),
                                          ("readOnlyRootFilesystem", "CKV_K8S_22"), ("capabilities", "CKV_K8S_37")])
def test_the_scan_fails_a_weakened_container(tmp_path, field: str, check: str) -> None:
    """The scan sees what it is meant to: the chart's Deployment with one of its container's guards taken away."""
    docs = helm_template_values("policy-scheduler", "policy-scheduler")
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    del deployment["spec"]["template"]["spec"]["containers"][0]["securityContext"][field]
    assert (check, "weakened") in checkov_failures(_write(tmp_path / "rendered", {"weakened": docs}))
