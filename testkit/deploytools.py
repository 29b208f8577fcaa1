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


def container_args(docs: list[dict]) -> list[str]:
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    return deployment["spec"]["template"]["spec"]["containers"][0]["args"]
