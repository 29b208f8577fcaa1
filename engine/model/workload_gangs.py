"""Which workload a pod was made for, from the pod alone: its labels and its controlling owner.

A policy's `gang by workload` makes the pods of one workload a gang (engine.model.gangs). The workload is named by
the labels its controller sets on every pod it makes (the pod's owner may be a Job or StatefulSet in between), so the
scheduler loop's queue can group a workload's pods (`gang_key`) before the workload object is read; the object
(model.GangWorkload, engine.reading.convert.gang_workloads) then says how many pods the gang needs and whether it is
one gang per part. The labels are the controllers' own (JobSet v0.10, LeaderWorkerSet v0.7, KubeRay v1.5, the Kubeflow
training operator v1.8 and mpi-operator v0.6). A Kubeflow TrainJob runs as a JobSet it owns and a RayJob as a
RayCluster it owns: their pods carry the JobSet's and the RayCluster's labels, so theirs is that gang.
"""

from __future__ import annotations

from dataclasses import dataclass

from .cluster import Gang, GangWorkload, Pod

JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"
JOB_NAME = "batch.kubernetes.io/job-name"
LEGACY_JOB_NAME = "job-name"  # before Kubernetes 1.27, and still set beside the new one
TRAINING_JOB_NAME = "training.kubeflow.org/job-name"
TRAINING_OPERATOR = "training.kubeflow.org/operator-name"
TRAINING_ROLE = "training.kubeflow.org/job-role"
RAY_CLUSTER = "ray.io/cluster"
LWS_NAME = "leaderworkerset.sigs.k8s.io/name"
LWS_GROUP = "leaderworkerset.sigs.k8s.io/group-index"
# training.kubeflow.org/operator-name values: which kind a training pod belongs to
OPERATORS = {"mpi-operator": "MPIJob", "pytorchjob-controller": "PyTorchJob"}
KINDS = ("Job", "JobSet", "PyTorchJob", "MPIJob", "RayCluster", "LeaderWorkerSet")


@dataclass(frozen=True, slots=True)
class WorkloadPod:
    """A pod's workload: its kind and name, the label every pod of it carries (valued the name) and the part of it the
    pod alone decides (a LeaderWorkerSet's group: one gang per group, whatever the object says)."""

    kind: str
    namespace: str
    name: str
    label: str
    group: tuple[str, str] | None = None

    @property
    def workload_key(self) -> str:
        """The workload object's key (model.GangWorkload.key)."""
        return f"{self.namespace}/{self.kind}/{self.name}"

    @property
    def key(self) -> str:
        """The queue's unit for its pods: the workload, or its group."""
        return self.workload_key if self.group is None else f"{self.workload_key}/{self.group[1]}"


def workload_of(pod: Pod) -> WorkloadPod | None:
    """The workload `pod` was made for (None: none of the kinds `gang by workload` reads)."""
    return workload_named(pod.namespace, pod.labels, pod.owner)


def workload_named(ns: str, labels: dict[str, str], owner: tuple[str, str] | None) -> WorkloadPod | None:
    """The workload a pod of namespace `ns` with these labels and controlling owner was made for (the queue view asks
    with a manifest's). A JobSet's pods are its child Jobs' too, and an MPIJob's launcher is a Job's pod: the
    workload's own labels are looked at first."""
    if name := labels.get(JOBSET_NAME):
        return WorkloadPod("JobSet", ns, name, JOBSET_NAME)
    if (name := labels.get(LWS_NAME)) and (group := labels.get(LWS_GROUP)) is not None:
        return WorkloadPod("LeaderWorkerSet", ns, name, LWS_NAME, (LWS_GROUP, group))
    if name := labels.get(RAY_CLUSTER):
        return WorkloadPod("RayCluster", ns, name, RAY_CLUSTER)
    if name := labels.get(TRAINING_JOB_NAME):
        kind = OPERATORS.get(labels.get(TRAINING_OPERATOR, ""))
        if kind is None and owner is not None and owner[0] in ("PyTorchJob", "MPIJob"):
            kind = owner[0]
        return None if kind is None else WorkloadPod(kind, ns, name, TRAINING_JOB_NAME)
    return _job(ns, labels, owner)


def _job(ns: str, labels: dict[str, str], owner: tuple[str, str] | None) -> WorkloadPod | None:
    """A batch/v1 Job's pod: by its job-name label (the newer one first), the owner's name when it has one."""
    job = owner[1] if owner is not None and owner[0] == "Job" else None
    for label in (JOB_NAME, LEGACY_JOB_NAME):
        name = labels.get(label)
        if name and (job is None or name == job):
            return WorkloadPod("Job", ns, name, label)
    return None


def workload_gang(pod: Pod, found: WorkloadPod, workload: GangWorkload) -> Gang | None:
    """The gang `pod` belongs to in `workload` (None: its part needs one pod or none, so the pod goes alone). The
    rest of the gang (its topology) is the policy's, added by engine.model.gangs."""
    key, size, part = found.key, workload.size, found.group
    if workload.split is not None:
        value = pod.labels.get(workload.split)
        size = dict(workload.parts).get(value or "", 0)
        key, part = f"{found.key}/{value}", (workload.split, value or "")
    if size <= 1:
        return None
    source = f"{workload.kind} {workload.namespace}/{workload.name}"
    if part is not None:
        source += f" group {part[1]}" if workload.kind == "LeaderWorkerSet" else f" {part[1]}"
    return Gang(key, pod.namespace, size, source, found.label, found.name, created=workload.created, part=part,
                workload=workload.kind)
