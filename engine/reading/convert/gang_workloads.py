"""The workload objects `gang by workload` reads (engine.model.workload_gangs) into `model.GangWorkload`: how many
pods each one's gang needs, and whether it is one gang per part. Sizes as the workloads' own gang integrations say
(Kueue's, KAI's podgrouper, each operator's PodGroup): defaults as their APIs default."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...model.cluster import GangWorkload
from ...model.workload_gangs import REPLICATED_JOB, TRAINING_ROLE
from .fields import as_int, as_list, as_mapping, as_text, choice, timestamp


def gang_workload(kind: str, obj: dict[str, Any]) -> GangWorkload:
    """One workload object in the model (raises what `fields.PROBLEMS` lists for one the model cannot read)."""
    meta, spec = obj["metadata"], as_mapping(obj.get("spec"), "spec")
    size, split, parts = _SIZES[kind](spec, as_mapping(obj.get("status"), "status"))
    created = meta.get("creationTimestamp")
    return GangWorkload(kind, as_text(meta.get("namespace") or "default", "metadata.namespace"),
                        as_text(meta["name"], "metadata.name"), size, split, parts,
                        "" if created is None else timestamp(created, "metadata.creationTimestamp"))


Sizes = tuple[int, str | None, tuple[tuple[str, int], ...]]


def _count(mapping: dict[str, Any], key: str, what: str, default: int) -> int:
    value = mapping.get(key)
    return default if value is None else as_int(value, f"{what}.{key}", 0)


def _job_pods(spec: dict[str, Any], what: str) -> int:
    """The pods a Job runs at once: parallelism (default 1), no more than its completions."""
    parallelism = _count(spec, "parallelism", what, 1)
    completions = spec.get("completions")
    return parallelism if completions is None else min(parallelism, as_int(completions, f"{what}.completions", 0))


def _job(spec: dict[str, Any], status: dict[str, Any]) -> Sizes:
    """batch/v1 Job: its parallelism, capped by what is left to complete (completions - status.succeeded)."""
    size = _count(spec, "parallelism", "spec", 1)
    if spec.get("completions") is not None:
        left = as_int(spec["completions"], "spec.completions", 0) - _count(status, "succeeded", "status", 0)
        size = min(size, max(left, 0))
    return size, None, ()


def _jobset(spec: dict[str, Any], status: dict[str, Any]) -> Sizes:
    """JobSet: replicas x pods per Job of each replicated job; one gang (AnyOrder, the default) or one per replicated
    job (startupPolicy InOrder: the controller creates each once the ones before are ready)."""
    parts = []
    for i, item in enumerate(as_list(spec.get("replicatedJobs"), "spec.replicatedJobs")):
        what = f"spec.replicatedJobs[{i}]"
        rjob = as_mapping(item, what)
        job = as_mapping(as_mapping(rjob.get("template"), f"{what}.template").get("spec"), f"{what}.template.spec")
        parts.append((as_text(rjob.get("name"), f"{what}.name"),
                      _count(rjob, "replicas", what, 1) * _job_pods(job, f"{what}.template.spec")))
    startup = as_mapping(spec.get("startupPolicy"), "spec.startupPolicy").get("startupPolicyOrder") or "AnyOrder"
    if choice(startup, "spec.startupPolicy.startupPolicyOrder", ("AnyOrder", "InOrder")) == "InOrder":
        return sum(n for _, n in parts), REPLICATED_JOB, tuple(parts)
    return sum(n for _, n in parts), None, ()


def _min_available(spec: dict[str, Any]) -> int | None:
    """runPolicy.schedulingPolicy.minAvailable (None: not set)."""
    policy = as_mapping(as_mapping(spec.get("runPolicy"), "spec.runPolicy").get("schedulingPolicy"),
                        "spec.runPolicy.schedulingPolicy")
    value = policy.get("minAvailable")
    return None if value is None else as_int(value, "spec.runPolicy.schedulingPolicy.minAvailable", 0)


def _replicas(spec: dict[str, Any], field: str, default: int) -> dict[str, int]:
    """Each replica type's replicas of a Kubeflow job's `field` (pytorchReplicaSpecs, mpiReplicaSpecs)."""
    specs = as_mapping(spec.get(field), f"spec.{field}")
    return {str(name): _count(as_mapping(item, f"spec.{field}.{name}"), "replicas", f"spec.{field}.{name}", default)
            for name, item in specs.items()}


def _pytorch(spec: dict[str, Any], status: dict[str, Any]) -> Sizes:
    """PyTorchJob: minAvailable, else every replica (master and workers), as the training operator's PodGroup."""
    least = _min_available(spec)
    return (sum(_replicas(spec, "pytorchReplicaSpecs", 1).values()) if least is None else least), None, ()


def _mpi(spec: dict[str, Any], status: dict[str, Any]) -> Sizes:
    """MPIJob: minAvailable, else the workers and the launcher (mpi-operator's calculateMinAvailable). With
    launcherCreationPolicy WaitForWorkersReady the launcher is made once the workers run: the gang is the workers."""
    workers = _replicas(spec, "mpiReplicaSpecs", 0).get("Worker", 0)
    least = _min_available(spec)
    policy = spec.get("launcherCreationPolicy") or "AtStartup"
    if choice(policy, "spec.launcherCreationPolicy", ("AtStartup", "WaitForWorkersReady")) == "WaitForWorkersReady":
        size = workers if least is None else min(least, workers)
        return size, TRAINING_ROLE, (("worker", size),)
    return (workers + 1 if least is None else least), None, ()


def _ray(spec: dict[str, Any], status: dict[str, Any]) -> Sizes:
    """RayCluster: the head and each worker group's minimum (minReplicas x numOfHosts; a suspended group none)."""
    size = 1
    for i, item in enumerate(as_list(spec.get("workerGroupSpecs"), "spec.workerGroupSpecs")):
        group = as_mapping(item, f"spec.workerGroupSpecs[{i}]")
        if group.get("suspend") is True:
            continue
        what = f"spec.workerGroupSpecs[{i}]"
        size += _count(group, "minReplicas", what, 0) * _count(group, "numOfHosts", what, 1)
    return size, None, ()


def _lws(spec: dict[str, Any], status: dict[str, Any]) -> Sizes:
    """LeaderWorkerSet: each group (leader and workers) is a gang of leaderWorkerTemplate.size."""
    template = as_mapping(spec.get("leaderWorkerTemplate"), "spec.leaderWorkerTemplate")
    return _count(template, "size", "spec.leaderWorkerTemplate", 1), None, ()


_SIZES: dict[str, Callable[[dict[str, Any], dict[str, Any]], Sizes]] = {
    "Job": _job, "JobSet": _jobset, "PyTorchJob": _pytorch, "MPIJob": _mpi, "RayCluster": _ray,
    "LeaderWorkerSet": _lws,
}
