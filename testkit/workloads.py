"""The workloads `gang by workload` reads, as their controllers make them: the objects (Job, JobSet, PyTorchJob,
MPIJob, RayCluster, LeaderWorkerSet) and their pods with the labels and owner references each controller sets (no
controller runs in the tests: a test makes the pods by hand). And the CRDs, from the released manifests of the pinned
Go modules (`go mod download` puts them in the module cache), for the e2e tests to install.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import yaml

from .manifests import pod

# the released CRDs the e2e tests install: (Go module, version, the CRD manifest's path in the module)
WORKLOAD_CRDS: dict[str, tuple[str, str, str]] = {
    "JobSet": ("sigs.k8s.io/jobset", "v0.10.1", "config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml"),
    "LeaderWorkerSet": ("sigs.k8s.io/lws", "v0.7.0", "config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml"),
    "RayCluster": ("github.com/ray-project/kuberay/ray-operator", "v1.5.0", "config/crd/bases/ray.io_rayclusters.yaml"),
    "PyTorchJob": ("github.com/kubeflow/training-operator", "v1.8.1",
                   "manifests/base/crds/kubeflow.org_pytorchjobs.yaml"),
    "MPIJob": ("github.com/kubeflow/mpi-operator", "v0.6.0", "manifests/base/kubeflow.org_mpijobs.yaml"),
}
API = {"Job": "batch/v1", "JobSet": "jobset.x-k8s.io/v1alpha2", "PyTorchJob": "kubeflow.org/v1",
       "MPIJob": "kubeflow.org/v2beta1", "RayCluster": "ray.io/v1", "LeaderWorkerSet": "leaderworkerset.x-k8s.io/v1",
       "StatefulSet": "apps/v1"}
PLURAL = {"Job": "jobs", "JobSet": "jobsets", "PyTorchJob": "pytorchjobs", "MPIJob": "mpijobs",
          "RayCluster": "rayclusters", "LeaderWorkerSet": "leaderworkersets"}


def workload_crd(kind: str) -> dict[str, Any]:
    """`kind`'s CustomResourceDefinition as its pinned release ships it (downloaded into the module cache once)."""
    module, version, path = WORKLOAD_CRDS[kind]
    out = subprocess.run(["go", "mod", "download", "-json", f"{module}@{version}"], capture_output=True, text=True,
                         timeout=600, check=True)
    return yaml.safe_load((Path(json.loads(out.stdout)["Dir"]) / path).read_text())


def _object(kind: str, name: str, ns: str, spec: dict[str, Any], status: dict[str, Any] | None = None) -> dict:
    obj = {"apiVersion": API[kind], "kind": kind, "metadata": {"name": name, "namespace": ns}, "spec": spec}
    return {**obj, "status": status} if status is not None else obj


def _job_template(parallelism: int | None, completions: int | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"template": {"spec": {"restartPolicy": "Never",
                                                  "containers": [{"name": "main", "image": "busybox"}]}}}
    if parallelism is not None:
        spec["parallelism"] = parallelism
    if completions is not None:
        spec["completions"] = completions
    return spec


def job(name: str, parallelism: int | None = None, completions: int | None = None, succeeded: int | None = None,
        ns: str = "default") -> dict:
    status = None if succeeded is None else {"succeeded": succeeded}
    return _object("Job", name, ns, _job_template(parallelism, completions), status)


def jobset(name: str, replicated: list[tuple[str, int, int | None, int | None]], in_order: bool = False,
           ns: str = "default") -> dict:
    """A JobSet of `replicated` jobs: (name, replicas, parallelism, completions) each."""
    spec: dict[str, Any] = {"replicatedJobs": [{"name": r, "replicas": n, "template": {"spec": _job_template(p, c)}}
                                               for r, n, p, c in replicated]}
    if in_order:
        spec["startupPolicy"] = {"startupPolicyOrder": "InOrder"}
    return _object("JobSet", name, ns, spec)


def _replica(replicas: int) -> dict[str, Any]:
    return {"replicas": replicas, "template": {"spec": {"containers": [{"name": "main", "image": "busybox"}]}}}


def pytorchjob(name: str, workers: int, min_available: int | None = None, ns: str = "default") -> dict:
    spec: dict[str, Any] = {"pytorchReplicaSpecs": {"Master": _replica(1), "Worker": _replica(workers)}}
    if min_available is not None:
        spec["runPolicy"] = {"schedulingPolicy": {"minAvailable": min_available}}
    return _object("PyTorchJob", name, ns, spec)


def mpijob(name: str, workers: int, wait_for_workers: bool = False, ns: str = "default") -> dict:
    spec: dict[str, Any] = {"mpiReplicaSpecs": {"Launcher": _replica(1), "Worker": _replica(workers)}}
    if wait_for_workers:
        spec["launcherCreationPolicy"] = "WaitForWorkersReady"
    return _object("MPIJob", name, ns, spec)


def raycluster(name: str, groups: list[tuple[str, int, int]], ns: str = "default") -> dict:
    """A RayCluster with worker groups (name, minReplicas, numOfHosts)."""
    template = {"spec": {"containers": [{"name": "ray", "image": "rayproject/ray"}]}}
    return _object("RayCluster", name, ns, {
        "headGroupSpec": {"rayStartParams": {}, "template": template},
        "workerGroupSpecs": [{"groupName": g, "minReplicas": m, "maxReplicas": m, "replicas": m, "numOfHosts": h,
                              "rayStartParams": {}, "template": template} for g, m, h in groups]})


def leaderworkerset(name: str, size: int, replicas: int = 1, ns: str = "default") -> dict:
    template = {"spec": {"containers": [{"name": "main", "image": "busybox"}]}}
    return _object("LeaderWorkerSet", name, ns, {"replicas": replicas,
                                                 "leaderWorkerTemplate": {"size": size, "workerTemplate": template}})


def owned(manifest: dict, kind: str, name: str, uid: str = "") -> dict:
    """`manifest` controlled by `kind` `name` (its uid: the object's, in a real apiserver)."""
    ref = {"apiVersion": API.get(kind, "batch/v1"), "kind": kind, "name": name, "uid": uid or f"uid-{kind}-{name}",
           "controller": True, "blockOwnerDeletion": True}
    manifest["metadata"]["ownerReferences"] = [ref]
    return manifest


def member_pod(name: str, labels: dict[str, str], owner: tuple[str, str, str], **kwargs: Any) -> dict:
    """A workload's pod: its controller's labels, controlled by `owner` (kind, name, uid)."""
    return owned(pod(name, labels=labels, **kwargs), *owner)


def job_pod(name: str, job_name: str, uid: str = "", **kwargs: Any) -> dict:
    labels = {"batch.kubernetes.io/job-name": job_name, "job-name": job_name}
    return member_pod(name, labels, ("Job", job_name, uid), **kwargs)


def jobset_pod(name: str, jobset_name: str, rjob: str, index: int = 0, **kwargs: Any) -> dict:
    """A pod of Job `index` of replicated job `rjob` (the JobSet's child Job is its owner)."""
    child = f"{jobset_name}-{rjob}-{index}"
    labels = {"jobset.sigs.k8s.io/jobset-name": jobset_name, "jobset.sigs.k8s.io/replicatedjob-name": rjob,
              "jobset.sigs.k8s.io/job-index": str(index), "batch.kubernetes.io/job-name": child, "job-name": child}
    return member_pod(name, labels, ("Job", child, ""), **kwargs)


def pytorch_pod(name: str, job_name: str, role: str, uid: str = "", **kwargs: Any) -> dict:
    labels = {"training.kubeflow.org/job-name": job_name, "training.kubeflow.org/operator-name": "pytorchjob-controller",
              "training.kubeflow.org/replica-type": role}
    if role == "master":
        labels["training.kubeflow.org/job-role"] = "master"
    return member_pod(name, labels, ("PyTorchJob", job_name, uid), **kwargs)


def mpi_pod(name: str, job_name: str, role: str, uid: str = "", **kwargs: Any) -> dict:
    """A worker (controlled by the MPIJob) or the launcher (by its Job `NAME-launcher`)."""
    labels = {"training.kubeflow.org/job-name": job_name, "training.kubeflow.org/operator-name": "mpi-operator",
              "training.kubeflow.org/job-role": role}
    owner = ("MPIJob", job_name, uid) if role == "worker" else ("Job", f"{job_name}-launcher", "")
    return member_pod(name, labels, owner, **kwargs)


def ray_pod(name: str, cluster: str, group: str = "headgroup", uid: str = "", **kwargs: Any) -> dict:
    labels = {"ray.io/cluster": cluster, "ray.io/group": group,
              "ray.io/node-type": "head" if group == "headgroup" else "worker"}
    return member_pod(name, labels, ("RayCluster", cluster, uid), **kwargs)


def lws_pod(name: str, lws: str, group: int, worker: int, **kwargs: Any) -> dict:
    """Worker `worker` of group `group` (0: the leader, controlled by the LWS's StatefulSet; the others by the
    group's own StatefulSet)."""
    labels = {"leaderworkerset.sigs.k8s.io/name": lws, "leaderworkerset.sigs.k8s.io/group-index": str(group),
              "leaderworkerset.sigs.k8s.io/worker-index": str(worker)}
    owner = ("StatefulSet", lws if worker == 0 else f"{lws}-{group}", "")
    return member_pod(name, labels, owner, **kwargs)
