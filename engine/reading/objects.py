"""Every Kubernetes object kind policy-scheduler reads, said once.

One entry per kind: the apiVersions the model reads it at, where the API serves it, whether the scheduler loop
watches it, which converter family reads it (engine.reading.convert), the cluster event a change raises (the kinds'
queueing hints, engine.kinds.base.Resource), whether planning reads only its spec and labels, and the bulky
fields the YAML pruner may drop. The loader (`engine.reading.load`), the live dry-run (`engine.loop.live`), the loop's
watches and API paths (`engine.loop.scheduler`, `engine.loop.api`), the cache's rebuild rules
(`engine.loop.cache`) and the pruner (`engine.reading.yaml_parallel`) all read it: adding an object kind is one entry
here plus its converter.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..model.cluster import TERMINAL_PHASES
from .convert.fields import show_value

# the store's name for KEP-4671's PodGroups (scheduling.k8s.io), beside Coscheduling's PodGroups
NATIVE_POD_GROUP = "PodGroup.scheduling.k8s.io"
POD_GROUP_APIS = ("scheduling.x-k8s.io/v1alpha1", "scheduling.sigs.k8s.io/v1alpha1")
# KEP-4671's PodGroup: v1alpha2 in 1.36; v1beta1 in 1.37 (v1alpha3, its alpha twin, has the same shape); the shapes
# differ (engine.reading.convert.native_groups reads both into one model). No release serves it at v1 yet (1.38.0-beta.0's
# scheduling.k8s.io/v1 holds PriorityClasses alone), so a PodGroup there is refused as a Pod at v2 is.
NATIVE_GROUP_APIS = ("scheduling.k8s.io/v1alpha2", "scheduling.k8s.io/v1alpha3", "scheduling.k8s.io/v1beta1")
COMPOSITE_GROUP_APIS = ("scheduling.k8s.io/v1alpha3", "scheduling.k8s.io/v1beta1")
QUOTA_APIS = ("scheduling.x-k8s.io/v1alpha1", "scheduling.sigs.k8s.io/v1alpha1")
DRA_APIS = ("resource.k8s.io/v1", "resource.k8s.io/v1beta2")  # the same shapes (v1beta1's requests differ)


@dataclass(frozen=True, slots=True)
class Pruned:
    """Fields no scheduling decision reads, dropped from large snapshots before they cross a process boundary:
    `metadata`/`status` keys, and keys of each container. A field some converter reads must never be here."""

    metadata: tuple[str, ...] = ("managedFields",)
    status: tuple[str, ...] = ()
    container: tuple[str, ...] = ()
    volume_kept: tuple[str, ...] | None = None  # of each spec.volumes entry, the keys kept (None: all)


@dataclass(frozen=True, slots=True)
class ObjectKind:
    """One kind we read. `name` is the store's name for it (the manifest's kind, unless two API groups share one);
    `versions` the apiVersions the model reads (an object at any other is refused: the apiserver would not hold
    it); `api_version` where the loop lists and watches it, with `served` the versions to look for, newest
    first, when that depends on the cluster; `family` the converter family (None: not part of the model, read
    for the loop itself); `event` the cluster event a change raises (None: no waiting pod can be helped by it)."""

    name: str
    versions: tuple[str, ...]
    plural: str
    namespaced: bool
    family: str | None
    event: str | None = None
    spec_only: bool = False  # planning reads only its spec and labels (its status moves with every bind)…
    status_read: tuple[str, ...] = ()  # …and these keys of its status (a Job's succeeded count)
    kind: str = ""  # the manifest's kind where `name` differs
    served: tuple[str, ...] = ()
    pruned: Pruned | None = None
    watched: bool = True  # the loop watches it (ConfigMaps: only the policies' own, per profile)

    @property
    def manifest_kind(self) -> str:
        return self.kind or self.name

    @property
    def api_version(self) -> str:
        """Where the loop lists and watches it: the group at its newest served version, else the first read."""
        if self.served:
            return f"{self.versions[0].split('/')[0]}/{self.served[-1]}"
        return self.versions[0]


_POD_PRUNED = Pruned(
    status=("conditions", "containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses", "podIP",
            "podIPs", "hostIP", "hostIPs", "qosClass"),
    container=("env", "envFrom", "volumeMounts", "volumeDevices", "command", "args", "imagePullPolicy",
               "livenessProbe", "readinessProbe", "startupProbe", "lifecycle", "securityContext",
               "terminationMessagePath", "terminationMessagePolicy", "workingDir"),
    volume_kept=("name", "persistentVolumeClaim", "ephemeral"))  # a volume's claim is all engine.reading.convert reads
_NODE_PRUNED = Pruned(status=("conditions", "nodeInfo", "addresses", "daemonEndpoints", "volumesInUse",
                              "volumesAttached", "config"))

# In the order the live dry-run lists them (pods last: everything they read is there by then).
OBJECT_KINDS: tuple[ObjectKind, ...] = (
    ObjectKind("Namespace", ("v1",), "namespaces", False, "namespace", "Namespace"),
    ObjectKind("Node", ("v1",), "nodes", False, "node", "Node", pruned=_NODE_PRUNED),
    ObjectKind("PriorityClass", ("scheduling.k8s.io/v1",), "priorityclasses", False, "priority_class", "PriorityClass"),
    ObjectKind("PodGroup", POD_GROUP_APIS, "podgroups", True, "pod_group", "PodGroup"),
    ObjectKind(NATIVE_POD_GROUP, NATIVE_GROUP_APIS, "podgroups", True, "native_group", "PodGroup", kind="PodGroup",
               served=("v1beta1", "v1alpha3", "v1alpha2")),
    # 1.37 serves it at v1alpha3 behind the CompositePodGroup alpha gate, 1.38 at v1beta1: watched where served
    ObjectKind("CompositePodGroup", COMPOSITE_GROUP_APIS, "compositepodgroups", True, "composite_group", "PodGroup",
               served=("v1beta1", "v1alpha3")),
    ObjectKind("ElasticQuota", QUOTA_APIS, "elasticquotas", True, "quota", "ElasticQuota"),
    ObjectKind("PodDisruptionBudget", ("policy/v1",), "poddisruptionbudgets", True, "budget"),
    ObjectKind("PersistentVolumeClaim", ("v1",), "persistentvolumeclaims", True, "storage", "PersistentVolumeClaim"),
    ObjectKind("PersistentVolume", ("v1",), "persistentvolumes", False, "storage", "PersistentVolume"),
    ObjectKind("StorageClass", ("storage.k8s.io/v1",), "storageclasses", False, "storage", "StorageClass"),
    ObjectKind("CSINode", ("storage.k8s.io/v1",), "csinodes", False, "storage", "CSINode"),
    ObjectKind("CSIDriver", ("storage.k8s.io/v1",), "csidrivers", False, "storage", "CSIDriver"),
    ObjectKind("CSIStorageCapacity", ("storage.k8s.io/v1",), "csistoragecapacities", True, "storage",
               "CSIStorageCapacity"),
    ObjectKind("Service", ("v1",), "services", True, "workload", spec_only=True),
    ObjectKind("ReplicationController", ("v1",), "replicationcontrollers", True, "workload", spec_only=True),
    ObjectKind("ReplicaSet", ("apps/v1",), "replicasets", True, "workload", spec_only=True),
    ObjectKind("StatefulSet", ("apps/v1",), "statefulsets", True, "workload", spec_only=True),
    ObjectKind("ResourceSlice", DRA_APIS, "resourceslices", False, "device", "ResourceSlice"),
    ObjectKind("DeviceClass", DRA_APIS, "deviceclasses", False, "device", "DeviceClass"),
    ObjectKind("ResourceClaim", DRA_APIS, "resourceclaims", True, "device", "ResourceClaim"),
    ObjectKind("ResourceClaimTemplate", DRA_APIS, "resourceclaimtemplates", True, "device", "ResourceClaimTemplate"),
    # GA in 1.37 (v1); 1.36 serves it only behind an off-by-default gate (v1beta2, v1alpha3): watched where served
    # (discovery; none served counts as no rules); a change re-taints slices, as upstream's tracker raises it
    ObjectKind("DeviceTaintRule", (*DRA_APIS, "resource.k8s.io/v1alpha3"), "devicetaintrules", False, "device",
               "ResourceSlice", served=("v1", "v1beta2", "v1alpha3")),
    # the workloads `gang by workload` reads (engine.reading.convert.gang_workloads); all but Job are CRDs, optional: a
    # kind not served is read as none; a new one may complete a gang its pods wait for (as a PodGroup does). Of all
    # the spec is read, and of a Job's status its succeeded count (it caps the gang; its other counts move with
    # every pod started)
    *(ObjectKind(kind, (version,), plural, True, "gang_workload", "PodGroup", spec_only=True,
                 status_read=("succeeded",) if kind == "Job" else ())
      for kind, version, plural in (("Job", "batch/v1", "jobs"), ("JobSet", "jobset.x-k8s.io/v1alpha2", "jobsets"),
                                    ("PyTorchJob", "kubeflow.org/v1", "pytorchjobs"),
                                    ("MPIJob", "kubeflow.org/v2beta1", "mpijobs"),
                                    ("RayCluster", "ray.io/v1", "rayclusters"),
                                    ("LeaderWorkerSet", "leaderworkerset.x-k8s.io/v1", "leaderworkersets"))),
    ObjectKind("Pod", ("v1",), "pods", True, "pod", "Pod", pruned=_POD_PRUNED),
    # not part of the model: the policies' ConfigMap, watched by the loop for policy reloads
    ObjectKind("ConfigMap", ("v1",), "configmaps", True, None, watched=False),
    # not part of the model: the scheduler's own Deployments, whose arguments say which ConfigMaps they read
    # (`check --kubeconfig`)
    ObjectKind("Deployment", ("apps/v1",), "deployments", True, None, watched=False),
)
BY_NAME: dict[str, ObjectKind] = {k.name: k for k in OBJECT_KINDS}
MODEL_KINDS: tuple[ObjectKind, ...] = tuple(k for k in OBJECT_KINDS if k.family is not None)
# manifest kind -> every apiVersion the model reads it at (PodGroup: both groups')
API_VERSIONS: dict[str, tuple[str, ...]] = {}
for _k in MODEL_KINDS:
    API_VERSIONS[_k.manifest_kind] = (*API_VERSIONS.get(_k.manifest_kind, ()), *_k.versions)
KINDS = tuple(API_VERSIONS)  # the manifest kinds a snapshot may hold
WATCHED: tuple[ObjectKind, ...] = tuple(k for k in MODEL_KINDS if k.watched)  # what the loop and live dry-run read


def kind_of(obj: dict[str, Any]) -> ObjectKind | None:
    """The entry a manifest belongs to, by its kind and apiVersion (None: a kind the model does not read)."""
    kind = obj.get("kind")
    if kind == "PodGroup" and obj.get("apiVersion") in NATIVE_GROUP_APIS:
        return BY_NAME[NATIVE_POD_GROUP]
    found = BY_NAME.get(kind) if isinstance(kind, str) else None
    return found if found is not None and found.family is not None else None


def check_api_version(kind: str, obj: dict[str, Any]) -> None:
    """Raise ValueError when `obj` is not at an apiVersion the model reads `kind` at."""
    found, accepted = obj.get("apiVersion"), API_VERSIONS[kind]
    if found not in accepted:
        want = accepted[0] if len(accepted) == 1 else f"one of {', '.join(accepted)}"
        problem = "missing" if found is None else f"{kind} is not served at {show_value(found)}"
        raise ValueError(f"apiVersion: {problem} (want {want})")


def is_terminal(obj: dict[str, Any]) -> bool:
    """A pod that has finished (Succeeded or Failed): it holds no capacity and is never scheduled."""
    return (obj.get("status") or {}).get("phase") in TERMINAL_PHASES


def waits_for(obj: dict[str, Any], scheduler_name: str) -> bool:
    """A pod manifest this scheduler may place now: its spec.schedulerName, no node, not being deleted, not gated,
    not finished (the model then says whether it is pending or skipped, and why)."""
    spec, meta = obj.get("spec") or {}, obj.get("metadata") or {}
    return (spec.get("schedulerName") == scheduler_name and not spec.get("nodeName")
            and not meta.get("deletionTimestamp") and not spec.get("schedulingGates") and not is_terminal(obj))
