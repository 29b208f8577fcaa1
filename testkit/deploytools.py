"""The install paths of deploy/ as a user takes them: `kustomize build` (with its opt-in components) and the Helm
chart (`helm lint`, `helm template`), with helm and kustomize built from their Go modules
(tests/e2e/helm/build.sh: no binary downloads, cached under ~/.cache/policy-scheduler/helm/)."""
from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import yaml

from .controlplane import REPO, run_build

HELM_BUILD_SCRIPT = REPO / "tests" / "e2e" / "helm" / "build.sh"
DEPLOY = REPO / "deploy"
CHART = DEPLOY / "helm" / "policy-scheduler"
_tools: Path | None = None


def tools() -> Path:
    """The directory holding `helm` and `kustomize` (built on first use in a session)."""
    global _tools
    if _tools is None:
        _tools = run_build(HELM_BUILD_SCRIPT, ("helm", "kustomize"))
    return _tools


def run_tool(name: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run([str(tools() / name), *args], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "HOME": os.environ.get("HOME", "/tmp")})
    if check:
        assert result.returncode == 0, f"{name} {' '.join(args)} failed ({result.returncode}):\n{result.stderr}"
    return result


def documents(text: str) -> list[dict]:
    return [d for d in yaml.safe_load_all(text) if d]


def kustomize(*components: str) -> list[dict]:
    """`kustomize build` of deploy/ with these components (names under deploy/components/), as an overlay of the
    user's own would list them."""
    with tempfile.TemporaryDirectory() as tmp:
        rel = os.path.relpath(DEPLOY, tmp)
        overlay = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": [rel],
                   "components": [f"{rel}/components/{c}" for c in components]}
        (Path(tmp) / "kustomization.yaml").write_text(yaml.safe_dump(overlay))
        return documents(run_tool("kustomize", "build", tmp).stdout)


def helm_template(release: str = "policy-scheduler", namespace: str = "policy-scheduler", *args: str) -> list[dict]:
    """`helm template` of the chart; `args` are helm's (`--set k=v`, `-f values.yaml`)."""
    return documents(run_tool("helm", "template", release, str(CHART), "--namespace", namespace, *args).stdout)


def helm_template_values(release: str, namespace: str, values: dict | None = None) -> list[dict]:
    """`helm template` of the chart with `values` (a values file's content; None: the chart's defaults)."""
    if not values:
        return helm_template(release, namespace)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "values.yaml"
        path.write_text(yaml.safe_dump(values))
        return helm_template(release, namespace, "-f", str(path))


RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")


def chart_rbac(release: str, namespace: str, values: dict | None = None) -> list[dict]:
    """The chart's ServiceAccount and every RBAC object it renders with `values`: who the scheduler is in the
    cluster and what it may do, nothing else of the release."""
    return [d for d in helm_template_values(release, namespace, values) if d["kind"] in RBAC_KINDS]


def chart_kept_copies(release: str, namespace: str, values: dict | None = None) -> list[dict]:
    """The empty ConfigMaps the chart makes for the scheduler to keep each profile's policy set in force in."""
    return [d for d in helm_template_values(release, namespace, values) if d["kind"] == "ConfigMap"
            and d["metadata"]["labels"].get("app.kubernetes.io/component") == "last-valid-policies"]


# the serving flags of a rendered Deployment: a test's scheduler serves plain HTTP on a free loopback port instead
# (testkit.scheduling starts it with --secure-port 0 --insecure-port PORT), and has no mounted certificate
SERVING_FLAGS = ("--secure-port", "--bind-address", "--tls-cert-file", "--tls-private-key-file")


def served_elsewhere(args: list[str]) -> list[str]:
    """`args` without their serving flags (--flag=value, as the installs write them)."""
    return [a for a in args if a.split("=", 1)[0] not in SERVING_FLAGS]


def container_args(docs: list[dict]) -> list[str]:
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    return deployment["spec"]["template"]["spec"]["containers"][0]["args"]


DIGEST = "sha256:" + "0123456789abcdef" * 4
# every option of the chart at once (an existing Secret and cert-manager exclude each other: their own render)
ALL_ON = {"image": {"digest": DIGEST},
          "tls": {"certManager": {"enabled": True, "issuerRef": {"name": "ca", "kind": "ClusterIssuer"}}},
          "serviceMonitor": {"enabled": True}, "networkPolicy": {"enabled": True}, "crd": {"install": True},
          "preemption": {"enabled": False}, "optIn": {"enabled": True}}
EXISTING_SECRET = {"tls": {"existingSecret": "scheduler-tls"}, "serviceMonitor": {"enabled": True}}
ALL_COMPONENTS = ("podgroup-crd", "elasticquota-crd", "example-policies", "no-preemption", "servicemonitor",
                  "networkpolicy", "cert-manager", "opt-in")


def renders() -> dict[str, list[dict]]:
    """What the installs make, by default and with every option, by name (deploy/security-scan.yaml's `in`)."""
    release = "policy-scheduler"
    return {"helm-default": helm_template_values(release, release),
            "helm-all": helm_template_values(release, release, ALL_ON),
            "helm-existing-secret": helm_template_values(release, release, EXISTING_SECRET),
            "kustomize-base": kustomize(), "kustomize-all": kustomize(*ALL_COMPONENTS)}


CHECKOV_REQUIREMENTS = REPO / "tests" / "e2e" / "checkov" / "requirements.txt"
SECURITY_SCAN = DEPLOY / "security-scan.yaml"


def checkov() -> list[str]:
    """The command that runs checkov: installed from PyPI at the versions tests/e2e/checkov/requirements.txt pins, in
    a virtualenv of its own (its pins would clash with ours), cached under
    ~/.cache/policy-scheduler/checkov/<that file's hash>/ so only a machine's first run pays (about 30 s)."""
    import fcntl
    import hashlib
    import shutil
    import sys

    pins = CHECKOV_REQUIREMENTS.read_bytes()
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "policy-scheduler" / "checkov"
    home = root / hashlib.sha256(pins).hexdigest()[:16]
    python = home / "bin" / "python"
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one install at a time; the others then find it made
        if not (home / "installed").exists():
            building = root / f"{home.name}.building"  # renamed once complete: a broken install is never used
            shutil.rmtree(building, ignore_errors=True)
            for step in ([sys.executable, "-m", "venv", str(building)],
                         [str(building / "bin" / "python"), "-m", "pip", "install", "--quiet",
                          "--disable-pip-version-check", "-r", str(CHECKOV_REQUIREMENTS)]):
                done = subprocess.run(step, capture_output=True, text=True, timeout=900)
                assert done.returncode == 0, f"installing checkov failed: {' '.join(step)}\n{done.stderr[-4000:]}"
            (building / "installed").write_text(CHECKOV_REQUIREMENTS.read_text())
            shutil.rmtree(home, ignore_errors=True)
            building.rename(home)
    # its module, not its script: the script's first line names the directory it was installed in
    return [str(python), "-W", "ignore::SyntaxWarning", "-m", "checkov.main"]


def checkov_failures(directory: Path) -> set[tuple[str, str]]:
    """(check id, file stem) of every Kubernetes check that fails on the manifests in `directory` (checkov offline:
    no download of its platform's metadata)."""
    import json

    out = subprocess.run([*checkov(), "--directory", str(directory), "--framework", "kubernetes",
                          "--skip-download", "--quiet", "--compact", "--output", "json"],
                         capture_output=True, text=True, timeout=600, cwd=directory)
    assert out.returncode in (0, 1), f"checkov failed ({out.returncode}):\n{out.stderr[-4000:]}"
    reports = json.loads(out.stdout)
    failed: set[tuple[str, str]] = set()
    for report in reports if isinstance(reports, list) else [reports]:
        assert report.get("summary", {}).get("parsing_errors", 0) == 0, report["summary"]
        failed |= {(c["check_id"], Path(c["file_path"]).stem) for c in report.get("results", {}).get("failed_checks", [])}
    return failed
