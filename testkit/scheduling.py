"""Talking to a control plane as the scheduler's e2e tests and the benchmarks do: raw-JSON API calls and
`policy-scheduler run` processes.

Objects are plain dicts both ways (like the scheduler itself sees them); the scheduler runs as a separate
process (`python -m engine run --kubeconfig ...`), stopped at the end of each test.
"""
from __future__ import annotations

import json
import re
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from . import metrics
from .controlplane import REPO, ControlPlane, Process, free_port, http_get, signal_group


class Kube:
    """Raw JSON calls as the admin (or any kubeconfig): no typed models in the way."""

    def __init__(self, kubeconfig: Path):
        config = kubernetes.client.Configuration()
        kubernetes.config.load_kube_config(config_file=str(kubeconfig), client_configuration=config)
        config.proxy = None
        self.client = kubernetes.client.ApiClient(config)

    def request(self, method: str, path: str, body: Any = None, query: list | None = None,
                content_type: str = "application/json") -> tuple[int, Any]:
        params = self.client.param_serialize(method, path, query_params=query or [],
                                             header_params={"Accept": "application/json", "Content-Type": content_type},
                                             body=body, auth_settings=["BearerToken"])
        response = self.client.call_api(*params, _request_timeout=30)
        data = response.read()
        try:
            return response.status, json.loads(data) if data else None
        except ValueError:
            return response.status, data.decode(errors="replace")

    def ok(self, method: str, path: str, body: Any = None, **kw: Any) -> Any:
        status, data = self.request(method, path, body, **kw)
        assert 200 <= status < 300, f"{method} {path}: {status} {data}"
        return data

    def create(self, obj: dict) -> dict:
        return self.ok("POST", collection(obj), obj)

    def pods(self, namespace: str) -> dict[str, dict]:
        return {p["metadata"]["name"]: p for p in self.ok("GET", f"/api/v1/namespaces/{namespace}/pods")["items"]}

    def events(self, namespace: str) -> list[dict]:
        return self.ok("GET", f"/api/v1/namespaces/{namespace}/events")["items"]

    def podgroups_api(self) -> str:
        """The scheduling.k8s.io version serving native PodGroups, newest first (what the loop's discovery finds)."""
        for version in ("v1beta1", "v1alpha2"):
            status, body = self.request("GET", f"/apis/scheduling.k8s.io/{version}")
            if status == 200 and any(r.get("name") == "podgroups" for r in body.get("resources") or []):
                return f"scheduling.k8s.io/{version}"
        raise AssertionError("the test control plane serves no scheduling.k8s.io podgroups")


PLURALS = {"Pod": "pods", "ConfigMap": "configmaps", "PodGroup": "podgroups", "Node": "nodes",
           "PriorityClass": "priorityclasses", "Namespace": "namespaces", "ServiceAccount": "serviceaccounts",
           "Service": "services", "Deployment": "deployments", "ClusterRole": "clusterroles",
           "ClusterRoleBinding": "clusterrolebindings", "Role": "roles", "RoleBinding": "rolebindings",
           "CustomResourceDefinition": "customresourcedefinitions", "PodDisruptionBudget": "poddisruptionbudgets",
           "PersistentVolume": "persistentvolumes", "PersistentVolumeClaim": "persistentvolumeclaims",
           "StorageClass": "storageclasses", "CSINode": "csinodes",
           "CSIDriver": "csidrivers", "CSIStorageCapacity": "csistoragecapacities", "StatefulSet": "statefulsets",
           "ReplicaSet": "replicasets", "ResourceSlice": "resourceslices", "DeviceClass": "deviceclasses",
           "ResourceClaim": "resourceclaims", "ResourceClaimTemplate": "resourceclaimtemplates",
           "DeviceTaintRule": "devicetaintrules",
           "ValidatingAdmissionPolicy": "validatingadmissionpolicies",
           "ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings", "ElasticQuota": "elasticquotas",
           "MutatingAdmissionPolicy": "mutatingadmissionpolicies",
           "MutatingAdmissionPolicyBinding": "mutatingadmissionpolicybindings",
           "CompositePodGroup": "compositepodgroups", "ReplicationController": "replicationcontrollers",
           "Job": "jobs"}
CLUSTER_SCOPED = {"Node", "Namespace", "PriorityClass", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition",
                  "PersistentVolume", "StorageClass", "CSINode", "CSIDriver", "ResourceSlice", "DeviceClass",
                  "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "MutatingAdmissionPolicy",
                  "MutatingAdmissionPolicyBinding"}


def collection(obj: dict) -> str:
    api = obj.get("apiVersion", "v1")
    root = "/api/v1" if api == "v1" else f"/apis/{api}"
    ns = (obj.get("metadata") or {}).get("namespace")
    plural = PLURALS[obj["kind"]]
    return f"{root}/namespaces/{ns}/{plural}" if ns and obj["kind"] not in CLUSTER_SCOPED else f"{root}/{plural}"


def apply(kube: Kube, obj: dict, dry_run: bool = False) -> tuple[int, Any]:
    """Server-side apply (`kubectl apply --server-side [--dry-run=server]`): idempotent, no client-side diff."""
    query = [("fieldManager", "e2e"), ("force", "true")] + ([("dryRun", "All")] if dry_run else [])
    return kube.request("PATCH", f"{collection(obj)}/{obj['metadata']['name']}", obj, query=query,
                        content_type="application/apply-patch+yaml")


def deploy_manifests(*components: str) -> list[dict]:
    """Every object `kustomize build` makes of deploy/ with these opt-in components (deploy/components/NAME)."""
    from .deploytools import kustomize

    return kustomize(*components)


def install_chart_identity(cp: ControlPlane, release: str, namespace: str, values: dict | None = None) -> Path:
    """The Helm chart's ServiceAccount with exactly the chart's RBAC (`helm template` with `values`, its
    ServiceAccount, ClusterRoles, Roles and bindings applied as the admin), and a token kubeconfig for it: the
    scheduler running with it may do what an install of the chart may, nothing more. The empty ConfigMaps the chart
    makes for the scheduler to keep its policies in (it may patch them, not create them) are applied too."""
    from .deploytools import chart_kept_copies, chart_rbac

    cp.ensure_namespace(namespace)  # helm install --create-namespace
    kube = Kube(cp.kubeconfig)
    for doc in chart_rbac(release, namespace, values) + chart_kept_copies(release, namespace, values):
        status, body = apply(kube, doc)
        assert status in (200, 201), f"{doc['kind']} {doc['metadata']['name']}: {status} {body}"
    return cp.service_account_kubeconfig(namespace, release)  # the chart names its ServiceAccount after the release


# how the scheduler logs a call the apiserver refused for want of rights: error='403: ...' or status=403 (timings
# like solve_s=0.403 are not), or RBAC's words where the refusal comes as another status (a claim's status write
# that the resourceclaims/binding check refuses answers 422); an admission policy's "forbidden" is not RBAC's
REFUSED = re.compile(r"'403: |status=403\b|cannot \w+ resource \"|requires resource=")


def refusals(log: str) -> list[str]:
    """The lines of a scheduler's log that say the apiserver refused it something (RBAC)."""
    return [line for line in log.splitlines() if REFUSED.search(line)]


def play_kubelet(kube: Kube, ns: str) -> list[str]:
    """Finish what a kubelet would: pods of `ns` being deleted go away now. Returns their names, sorted."""
    gone = []
    for name, p in kube.pods(ns).items():
        if p["metadata"].get("deletionTimestamp"):
            kube.request("DELETE", f"/api/v1/namespaces/{ns}/pods/{name}",
                         {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0})
            gone.append(name)
    return sorted(gone)


def wait_for(what: str, check: Callable[[], Any], timeout: float = 30.0, every: float = 0.2) -> Any:
    """Poll until `check()` is truthy; returns its value, or fails the test naming `what`."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(every)
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")


def node_of(pod: dict) -> str | None:
    return (pod.get("spec") or {}).get("nodeName")


def condition(pod: dict, type_: str = "PodScheduled") -> dict | None:
    return next((c for c in (pod.get("status") or {}).get("conditions") or [] if c["type"] == type_), None)


@dataclass
class Scheduler:
    """One `policy-scheduler run` process; its log is kept for failure messages."""

    process: Process
    metrics_port: int

    def get(self, path: str) -> tuple[int, bytes]:
        return http_get(f"http://127.0.0.1:{self.metrics_port}{path}")

    def metrics_text(self) -> str:
        """The /metrics exposition, read now."""
        status, body = self.get("/metrics")
        assert status == 200, (status, body[:300])
        return body.decode()

    def metric(self, name: str, **labels: str) -> float:
        """Sum of the samples called `name` (with these labels) on /metrics."""
        return metrics.total(self.metrics_text(), name, **labels)

    def cycles(self) -> metrics.Cycles:
        """Its scheduling cycles so far (batch sizes, solve seconds), from /metrics."""
        return metrics.cycles(self.metrics_text())

    def log(self) -> str:
        return self.process.log_path.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL: a crash, no lease release."""
        signal_group(self.process.popen.pid, signal.SIGKILL)
        self.process.popen.wait()

    def stop(self) -> int | None:
        self.process.stop()
        return self.process.popen.returncode


@dataclass
class Schedulers:
    """Starts scheduler processes for one test and stops every one of them at its end."""

    cp: ControlPlane
    workdir: Path
    kubeconfig: Path | None = None  # whom they run as by default (None: the admin)
    started: list[Scheduler] = field(default_factory=list)

    def start(self, *args: str, kubeconfig: Path | None = None, name: str = "scheduler", ready: bool = True,
              env: dict[str, str] | None = None) -> Scheduler:
        port = free_port()
        kubeconfig = kubeconfig or self.kubeconfig or self.cp.kubeconfig
        argv = [sys.executable, "-m", "engine", "run", "--kubeconfig", str(kubeconfig),
                "--secure-port", "0", "--insecure-port", str(port), "--batch-window", "0.3", "--time-limit", "2", *args]
        process = Process(name, argv, self.workdir / f"{name}-{len(self.started)}.log", env=env or {})
        process.start()
        scheduler = Scheduler(process, port)
        self.started.append(scheduler)
        path = "/readyz" if ready else "/healthz"  # not ready: a profile without its policies, say
        wait_for(f"{name} {path}", lambda: _answers(scheduler, path), timeout=60)
        return scheduler

    def stop_all(self) -> None:
        for scheduler in self.started:
            scheduler.process.stop()

    def refusals(self) -> list[str]:
        """What the apiserver refused any of them for want of rights, from their logs."""
        return [line for scheduler in self.started for line in refusals(scheduler.log())]


def _answers(scheduler: Scheduler, path: str) -> bool:
    """Whether the scheduler answers 200 on `path` (/readyz, /healthz); fails the test if it exited."""
    if not scheduler.process.running():
        pytest.fail(f"scheduler exited ({scheduler.process.popen.returncode}):\n{scheduler.process.log_tail()}")
    try:
        return scheduler.get(path)[0] == 200
    except OSError:
        return False


def install_elasticquota_crd(kube: Kube, timeout: float = 30) -> None:
    """Apply scheduler-plugins' ElasticQuota CRD (deploy/components/elasticquota-crd), idempotent, and wait until
    ElasticQuotas are served."""
    import yaml

    crd = yaml.safe_load((REPO / "deploy" / "components" / "elasticquota-crd" / "elasticquota-crd.yaml").read_text())
    status, data = kube.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    assert status in (201, 409), (status, data)
    wait_for("ElasticQuota CRD established",
             lambda: kube.request("GET", "/apis/scheduling.x-k8s.io/v1alpha1/elasticquotas")[0] == 200, timeout=timeout)


def install_podgroup_crd(kube: Kube, crd_file: Path = REPO / "deploy" / "components" / "podgroup-crd" / "podgroup-crd.yaml",
                         timeout: float = 30) -> None:
    """Apply the PodGroup CRD (ours by default, or scheduler-plugins' own: same group, version and fields),
    idempotent, and wait until PodGroups are served."""
    import yaml

    crd = yaml.safe_load(crd_file.read_text())
    status, data = kube.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    assert status in (201, 409), (status, data)
    wait_for("PodGroup CRD established",
             lambda: kube.request("GET", "/apis/scheduling.x-k8s.io/v1alpha1/podgroups")[0] == 200, timeout=timeout)
