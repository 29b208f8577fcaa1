"""The typed cluster model: what the loader produces and everything downstream reads.

Only scheduling-relevant fields are kept, already normalised (quantities parsed, defaults applied,
matchLabels folded into requirements), so no later stage ever looks at a raw manifest again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from .reasons import Code

UNSCHEDULABLE_TAINT_KEY = "node.kubernetes.io/unschedulable"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
SCHEDULING_GROUP = "spec.schedulingGroup.podGroupName"  # where a native PodGroup's members name it (a Gang's `label`)
HARD_EFFECTS = ("NoSchedule", "NoExecute")
PREEMPT_LOWER = "PreemptLowerPriority"
NEVER_PREEMPT = "Never"
TERMINAL_PHASES = ("Succeeded", "Failed")  # a pod in one holds no capacity and is never scheduled again


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str

    def __str__(self) -> str:
        return f"{{{self.key}: {self.value}}}" if self.value else f"{{{self.key}}}"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    seconds: int | None = None  # tolerationSeconds: kept for device tolerations (copied into allocation results)

    def tolerates(self, taint: Taint) -> bool:
        """Upstream ToleratesTaint: empty effect matches all effects; empty key + Exists matches all keys."""
        if self.effect and self.effect != taint.effect:
            return False
        if not self.key:
            return self.operator == "Exists"
        if self.key != taint.key:
            return False
        return self.operator == "Exists" or self.value == taint.value


def tolerated(tolerations: tuple[Toleration, ...], taint: Taint) -> bool:
    return any(t.tolerates(taint) for t in tolerations)


@dataclass(frozen=True, slots=True)
class Requirement:
    """One selector requirement (label or field): In, NotIn, Exists, DoesNotExist, Gt, Lt."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op == "In":
            return self.key in labels and labels[self.key] in self.values
        if op == "NotIn":
            return self.key not in labels or labels[self.key] not in self.values
        if op == "Exists":
            return self.key in labels
        if op == "DoesNotExist":
            return self.key not in labels
        if op in ("Gt", "Lt"):
            if self.key not in labels:
                return False
            try:
                have, want = int(labels[self.key]), int(self.values[0])
            except (ValueError, IndexError):
                return False
            return have > want if op == "Gt" else have < want
        return False

    def __str__(self) -> str:
        if self.operator in ("Exists", "DoesNotExist"):
            return f"{self.key} {self.operator}"
        return f"{self.key} {self.operator} [{', '.join(self.values)}]"


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A metav1.LabelSelector; `matchLabels` are folded into `In` requirements.

    `nothing` marks a null selector, which upstream treats as matching no object.
    """

    requirements: tuple[Requirement, ...] = ()
    nothing: bool = False

    def matches(self, labels: Mapping[str, str]) -> bool:
        return not self.nothing and all(r.matches(labels) for r in self.requirements)

    def label_keys(self) -> frozenset[str]:
        """The label keys this selector reads: pods differing only in other labels match alike."""
        return frozenset(r.key for r in self.requirements)

    def __str__(self) -> str:
        if self.nothing:
            return "<none>"
        return ", ".join(str(r) for r in self.requirements) or "<all>"


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """Expressions and fields ANDed; a term with neither matches no node (upstream)."""

    expressions: tuple[Requirement, ...] = ()
    fields: tuple[Requirement, ...] = ()

    def matches(self, node: Node) -> bool:
        if not self.expressions and not self.fields:
            return False
        return all(r.matches(node.labels) for r in self.expressions) and all(
            r.matches(node.fields) for r in self.fields
        )


@dataclass(frozen=True, slots=True, weakref_slot=True)
class PodAffinityTerm:
    """Pods matching `selector` in `namespaces` (None = every namespace), within `topology_key` domains.

    Its hash is taken once, when it is made: every cycle puts each bound pod's required anti-affinity terms in a
    dict (engine.model.view.View.anti_domains), and hashing the nested selector again each time was a third of
    a one-pod cycle late in a stream."""

    selector: LabelSelector
    namespaces: frozenset[str] | None
    topology_key: str
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash(self.parts()))

    def parts(self) -> tuple[LabelSelector, frozenset[str] | None, str]:
        """What it is made of (what it hashes and compares by), without itself."""
        return self.selector, self.namespaces, self.topology_key

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self) -> tuple[type[PodAffinityTerm], tuple[LabelSelector, frozenset[str] | None, str]]:
        """Made again where it is unpickled: a str's hash differs between processes."""
        return (type(self), self.parts())

    def matches(self, pod: Pod) -> bool:
        return (self.namespaces is None or pod.namespace in self.namespaces) and self.selector.matches(
            pod.labels
        )

    def label_keys(self) -> frozenset[str]:
        return self.selector.label_keys()


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    max_skew: int
    topology_key: str
    hard: bool
    selector: LabelSelector
    min_domains: int = 1
    honor_affinity: bool = True
    honor_taints: bool = False


@dataclass(frozen=True, slots=True)
class HostPort:
    protocol: str
    port: int
    ip: str = ""

    def conflicts(self, other: HostPort) -> bool:
        if self.protocol != other.protocol or self.port != other.port:
            return False
        wild = ("", "0.0.0.0", "::")
        return self.ip in wild or other.ip in wild or self.ip == other.ip


@dataclass(frozen=True, slots=True)
class ClaimUse:
    """One of a pod's unbound WaitForFirstConsumer claims, as volume matching reads it. The claim's name is
    left out: a StatefulSet's replicas ask alike and stay one class."""

    storage_class: str
    request: int  # bytes of spec.resources.requests.storage
    modes: frozenset[str]  # spec.accessModes
    block: bool  # spec.volumeMode Block
    selector: LabelSelector | None  # spec.selector over PV labels
    provisioner: str  # the class's provisioner ("" or kubernetes.io/no-provisioner: static PVs only)
    topology: tuple[NodeSelectorTerm, ...] | None  # the class's allowedTopologies (None: anywhere)
    # the provisioner's CSIStorageCapacity reports for the class, by name, when its CSIDriver tracks capacity
    # (spec.storageCapacity); None: capacity is not checked
    capacities: tuple[CapacityReport, ...] | None = None


@dataclass(frozen=True, slots=True)
class CapacityReport:
    """A CSIStorageCapacity: free storage of one class on the nodes its nodeTopology selects (null: none)."""

    name: str  # namespace/name
    storage_class: str
    nodes: LabelSelector
    capacity: int | None  # bytes (None: not reported)
    maximum_volume_size: int | None  # bytes, the largest one volume may be (None: not reported)

    def limit(self) -> int | None:
        """What one new volume may take (upstream's volumeLimit: the maximum volume size when reported)."""
        return self.maximum_volume_size if self.maximum_volume_size is not None else self.capacity


@dataclass(frozen=True, slots=True)
class PodVolumes:
    """What a pod's PersistentVolumeClaims mean for placement, resolved once against the snapshot's storage
    objects (engine.devices.storage) so the constraint kinds read facts, never manifests."""

    blocked: str = ""  # why no node can take the pod now (upstream's PreFilter words), "" if none
    pv_missing: bool = False  # a claim is bound to a PersistentVolume the snapshot lacks
    bound_terms: tuple[tuple[NodeSelectorTerm, ...], ...] = ()  # each bound PV's required node affinity
    zones: tuple[tuple[str, frozenset[str]], ...] = ()  # bound PVs' legacy zone/region labels (VolumeZone)
    waiting: tuple[ClaimUse, ...] = ()  # unbound WaitForFirstConsumer claims
    attach: tuple[tuple[str, str], ...] = ()  # (CSI driver, volume handle) of its bound CSI volumes (NodeVolumeLimits)
    provisioned: tuple[str, ...] = ()  # the CSI driver of each unbound claim's volume-to-be: a new volume wherever it goes
    read_write_once_pod: tuple[str, ...] = ()  # namespace/name of its ReadWriteOncePod claims


NO_VOLUMES = PodVolumes()


@dataclass(frozen=True, slots=True)
class Claim:
    """A PersistentVolumeClaim as scheduling reads it."""

    namespace: str
    name: str
    uid: str = ""
    storage_class: str = ""
    request: int = 0
    modes: frozenset[str] = frozenset()
    block: bool = False
    volume_name: str = ""  # spec.volumeName
    bound: bool = False  # fully bound: volumeName set and the PV controller finished (bind-completed or phase Bound)
    lost: bool = False  # status.phase Lost
    deleting: bool = False
    selector: LabelSelector | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class Volume:
    """A PersistentVolume as scheduling reads it."""

    name: str
    storage_class: str = ""
    capacity: int = 0
    modes: frozenset[str] = frozenset()
    block: bool = False
    node_terms: tuple[NodeSelectorTerm, ...] | None = None  # spec.nodeAffinity.required (None: any node)
    claim: tuple[str, str] | None = None  # spec.claimRef (namespace, name)
    available: bool = False  # status.phase Available
    pending: bool = False  # status.phase Pending: new, not yet made Available by the PV controller
    deleting: bool = False
    labels: tuple[tuple[str, str], ...] = ()
    driver: str = ""  # spec.csi.driver ("" for other volume sources)
    handle: str = ""  # spec.csi.volumeHandle


@dataclass(frozen=True, slots=True)
class StorageClass:
    name: str
    provisioner: str
    wait_for_consumer: bool  # volumeBindingMode WaitForFirstConsumer
    topology: tuple[NodeSelectorTerm, ...] | None = None  # allowedTopologies (None: anywhere)


@dataclass(slots=True)
class Storage:
    """The snapshot's storage objects: claims by namespace/name, volumes and classes by name, per node the
    CSI drivers' attach limits (CSINode spec.drivers[].allocatable.count), the CSI drivers' storage capacity reports
    and which drivers ask for capacity to be checked."""

    claims: dict[str, Claim] = field(default_factory=dict)
    volumes: dict[str, Volume] = field(default_factory=dict)
    classes: dict[str, StorageClass] = field(default_factory=dict)
    limits: dict[str, dict[str, int]] = field(default_factory=dict)
    capacities: dict[str, CapacityReport] = field(default_factory=dict)  # CSIStorageCapacities by namespace/name
    tracked: dict[str, bool] = field(default_factory=dict)  # CSIDriver name -> spec.storageCapacity


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    labels: dict[str, str]
    allocatable: dict[str, int]
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    annotations: dict[str, str] = field(default_factory=dict)
    declared_features: tuple[str, ...] = ()  # status.declaredFeatures, sorted (NodeDeclaredFeatures)

    @property
    def fields(self) -> dict[str, str]:
        return {"metadata.name": self.name}

    def attribute(self, kind: str, key: str) -> str | int | None:
        """A node's label, annotation, allocatable amount or taint value by key (None when absent)."""
        if kind == "label":
            return self.labels.get(key)
        if kind == "annotation":
            return self.annotations.get(key)
        if kind == "allocatable":
            return self.allocatable.get(key)
        if kind == "taint":
            return next((t.value for t in self.taints if t.key == key), None)
        raise ValueError(f"unknown node attribute {kind!r}")


@dataclass(frozen=True, slots=True)
class CapacityPolicy:
    """A device capacity's requestPolicy (DRAConsumableCapacity), in milli-units: what a request that names no
    amount consumes (`default`), and the amounts allowed: `valid_values` (ascending), or the range from `least`
    up to `most` (None: no bound) in steps of `step` (None: any amount)."""

    default: int | None = None
    valid_values: tuple[int, ...] = ()
    least: int | None = None
    most: int | None = None
    step: int | None = None


@dataclass(frozen=True, slots=True)
class Device:
    """A device a DRA driver publishes in a ResourceSlice, and where it can be used: on one node (`node`), on
    the nodes its selector admits (`node_terms`), or anywhere (both None)."""

    driver: str
    pool: str
    name: str
    attributes: tuple[tuple[str, str, object], ...] = ()  # (domain, name, value): int, bool, str, or Version
    capacity: tuple[tuple[str, str, int], ...] = ()  # (domain, name, milli-units)
    node: str | None = None
    node_terms: tuple[NodeSelectorTerm, ...] | None = None
    taints: tuple[Taint, ...] = ()  # its own (ResourceSlice) and DeviceTaintRules'
    consumes: tuple[tuple[str, str, int], ...] = ()  # consumesCounters: (counter set, counter, milli-units)
    multiple: bool = False  # allowMultipleAllocations: shared by claims within its capacity (consumable capacity)
    policies: tuple[tuple[str, str, CapacityPolicy], ...] = ()  # capacity[].requestPolicy, by (domain, name)
    binding_conditions: tuple[str, ...] = ()  # bindingConditions: PreBind waits for these on the claim's status
    binding_failure_conditions: tuple[str, ...] = ()  # bindingFailureConditions: any true fails the binding
    binds_to_node: bool = False  # bindsToNode: the allocation is pinned to the node it was made for

    @property
    def key(self) -> str:
        return f"{self.driver}/{self.pool}/{self.name}"

    @property
    def pool_key(self) -> str:
        return f"{self.driver}/{self.pool}"

    def untolerated(self, tolerations: tuple[Toleration, ...]) -> bool:
        """A NoSchedule or NoExecute taint the tolerations do not tolerate keeps the device from being allocated
        (other effects, None included, are ignored, as upstream's allocator does)."""
        return any(t.effect in ("NoSchedule", "NoExecute") and not tolerated(tolerations, t) for t in self.taints)

    def reachable(self, node: Node) -> bool:
        if self.node is not None:
            return node.name == self.node
        return self.node_terms is None or any(t.matches(node) for t in self.node_terms)


@dataclass(frozen=True, slots=True)
class Version:
    """A semantic version attribute (DRA's `version` type), ordered as semver orders them."""

    text: str


@dataclass(frozen=True, slots=True)
class DeviceClass:
    name: str
    selectors: tuple[str, ...] = ()  # CEL expressions every device of the class satisfies
    extended_resource: str | None = None  # spec.extendedResourceName (DRAExtendedResource)
    config: tuple[str, ...] = ()  # spec.config[]: each DeviceConfiguration (opaque driver parameters) as JSON
    created: str = ""  # metadata.creationTimestamp: of two classes naming one extended resource, the newer serves it


DEVICE_ROW = "devices: "  # the start of a device capacity row's name (the DeviceClass, the requests asking)


@dataclass(frozen=True, slots=True)
class SubRequest:
    """One way to serve a request: `count` devices (every matching one when `all`) of a class, each satisfying
    the class's and these selectors."""

    name: str  # the request's name, or request/subrequest for a firstAvailable alternative
    device_class: str
    selectors: tuple[str, ...] = ()
    count: int = 1
    all: bool = False
    tolerations: tuple[Toleration, ...] = ()  # device taints it tolerates
    capacity: tuple[tuple[str, int], ...] = ()  # capacity.requests: (qualified name as written, milli-units)
    admin: bool = False  # adminAccess: devices in use serve it too, and it holds none (DRAAdminAccess)


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    name: str
    alternatives: tuple[SubRequest, ...]  # `exactly`: one; `firstAvailable`: in order of preference


@dataclass(frozen=True, slots=True)
class ResourceClaim:
    """A resource.k8s.io ResourceClaim: its requests and constraints, and, once allocated, its devices and the
    nodes the allocation is usable on."""

    namespace: str
    name: str
    requests: tuple[DeviceRequest, ...] = ()
    match_attributes: tuple[tuple[tuple[str, ...], str], ...] = ()  # (requests or () for all, domain/attribute)
    allocated: tuple[str, ...] | None = None  # device keys; None while unallocated
    allocation_terms: tuple[NodeSelectorTerm, ...] | None = None  # status.allocation.nodeSelector
    reserved_for: tuple[str, ...] = ()  # status.reservedFor: pods by name, other consumers as `resource.group/name`
    deleting: bool = False
    config: tuple[tuple[tuple[str, ...], str], ...] = ()  # spec.devices.config[]: (requests, DeviceConfiguration JSON)
    extended_owner: str | None = None  # the pod whose extended resources it serves (upstream's special claim)
    mappings: tuple[tuple[str, str, str], ...] = ()  # for such a claim made here: (container, resource, request)
    admin_results: tuple[str, ...] = ()  # device keys allocated with adminAccess (not counted as allocated)
    shares: tuple[tuple[str, tuple[tuple[str, str, int], ...]], ...] = ()
    # allocated shares of devices allowing multiple allocations: (device key, consumedCapacity as (domain, name, milli))

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(slots=True)
class Devices:
    """DRA objects of a snapshot: devices from ResourceSlices, DeviceClasses, ResourceClaims by key and the
    ResourceClaimTemplates that exist (namespace/name)."""

    devices: list[Device] = field(default_factory=list)
    classes: dict[str, DeviceClass] = field(default_factory=dict)
    claims: dict[str, ResourceClaim] = field(default_factory=dict)
    templates: set[str] = field(default_factory=set)
    taint_rules: list[tuple[tuple[str | None, str | None, str | None], Taint]] = field(default_factory=list)
    # DeviceTaintRules: ((driver, pool, device) each None for any, the taint)
    counter_sets: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)
    # sharedCounters (partitionable devices): (driver/pool, counter set) -> counter -> milli-units
    invalid_pools: dict[str, str] = field(default_factory=dict)  # driver/pool -> why its devices are not allocated
    pools: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    # driver/pool -> (its newest generation, that generation's resourceSliceCount, its slices seen)


EXTENDED_CLAIM = "<extended-resources>"  # upstream's in-memory name of a pod's claim for DRA-backed extended resources
EXTENDED_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"  # marks such a claim once created
DEVICE_CLASS_PREFIX = "deviceclass.resource.kubernetes.io/"  # a DeviceClass's implicit extended resource name


@dataclass(frozen=True, slots=True)
class ExtendedRequest:
    """An extended resource a long-lived container requests (DRAExtendedResource may serve it from devices)."""

    container: int  # index in initContainers + containers
    container_name: str
    resource: str
    count: int
    position: int  # the resource's index among the container's requests, sorted by name (upstream's request name)


@dataclass(frozen=True, slots=True)
class PodClaims:
    """What a pod's ResourceClaims mean for placement, resolved once per snapshot (engine.devices.dra): why it cannot be
    placed at all, the claims still to allocate (this pod allocates them), and where allocated ones are usable."""

    blocked: str = ""
    to_allocate: tuple[str, ...] = ()  # claim keys
    allocated_terms: tuple[tuple[NodeSelectorTerm, ...], ...] = ()
    shapes: tuple = ()  # what the claims to allocate ask (requests, constraints), without their names
    follows: tuple[tuple[str, str], ...] = ()  # (claim key, pending pod allocating it): its unallocated shared claims
    shared: tuple[str, ...] = ()  # its unallocated claims other pending pods use too (it allocates or follows them)


NO_CLAIMS = PodClaims()


@dataclass(frozen=True, slots=True)
class Pod:
    namespace: str
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    requests: dict[str, int] = field(default_factory=lambda: {"pods": 1})
    node_name: str | None = None
    scheduler_name: str = "default-scheduler"
    phase: str = "Pending"
    priority: int = 0
    node_selector: tuple[tuple[str, str], ...] = ()
    required_node_terms: tuple[NodeSelectorTerm, ...] | None = None
    preferred_node_terms: tuple[tuple[int, NodeSelectorTerm], ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    affinity_required: tuple[PodAffinityTerm, ...] = ()
    affinity_preferred: tuple[tuple[int, PodAffinityTerm], ...] = ()
    anti_affinity_required: tuple[PodAffinityTerm, ...] = ()
    anti_affinity_preferred: tuple[tuple[int, PodAffinityTerm], ...] = ()
    spread: tuple[SpreadConstraint, ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    owner: tuple[str, str] | None = None
    created: str = ""
    annotations: dict[str, str] = field(default_factory=dict)
    preemption_policy: str = PREEMPT_LOWER  # or NEVER_PREEMPT: the pod waits instead of evicting others
    terminating: bool = False  # metadata.deletionTimestamp set: going already, never a victim twice
    gang: str | None = None  # the key of the Gang it belongs to (Cluster.gangs), decided once by engine.model.gangs
    claims: tuple[str, ...] = ()  # PersistentVolumeClaims it mounts, by name in its namespace (ephemeral ones too)
    volumes: PodVolumes = NO_VOLUMES  # what those claims mean, resolved by engine.devices.storage
    default_spread: LabelSelector | None = None  # system-default spreading's selector, set by engine.reading.workloads
    scheduling_group: str | None = None  # spec.schedulingGroup.podGroupName: a scheduling.k8s.io PodGroup
    resource_claims: tuple[tuple[str, str | None], ...] = ()  # (spec.resourceClaims name, its claim's name or None)
    dra: PodClaims = NO_CLAIMS  # what those claims mean, resolved by engine.devices.dra
    extended: tuple[ExtendedRequest, ...] = ()  # extended resources its long-lived containers request
    required_features: tuple[str, ...] = ()  # node features its spec needs, sorted (engine.reading.convert.features)
    runtime: int | None = None  # seconds it runs at most: spec.activeDeadlineSeconds, else a policy's estimate
    started: str = ""  # status.startTime: a running pod ends by started + runtime (engine.time.timeline)
    # a running pod the batch model of preemption may evict, asked about as pending on this node (engine.preempt.model)
    running_on: str | None = None
    # a preemptor in the batch model: the nodes where it passes every filter with only the pods it may evict gone
    preempts_on: frozenset[str] | None = None
    # "namespace/name", made once: every cycle asks it of every bound pod (a property formatted it each time)
    key: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", f"{self.namespace}/{self.name}")

    @property
    def pod_group(self) -> str | None:
        return self.labels.get(POD_GROUP_LABEL)


@dataclass(frozen=True, slots=True)
class PodGroup:
    """A scheduler-plugins Coscheduling PodGroup (members labelled scheduling.x-k8s.io/pod-group: NAME), or with
    `native` a Kubernetes scheduling.k8s.io PodGroup (KEP-4671; members name it in spec.schedulingGroup), whose
    `gang.minCount` is `min_member` (0 for a `basic` group: plain pods)."""

    namespace: str
    name: str
    min_member: int
    timeout_seconds: int | None = None
    min_resources: tuple[tuple[str, int], ...] = ()  # spec.minResources: room the whole gang needs
    created: str = ""  # metadata.creationTimestamp: Coscheduling serves equal-priority gangs oldest first
    native: bool = False
    topology_key: str | None = None  # native: schedulingConstraints.topology[0].key, one domain for the group
    priority: int | None = None  # native: spec.priority / priorityClassName, the group's scheduling priority
    disruption_mode: str = "Pod"  # native: Pod, or PodGroup (evicted whole or not at all; v1beta1's `all`)
    # native from scheduling.k8s.io/v1beta1 on (1.37): every member's priority, schedulerName and preemptionPolicy
    # must agree with the group's, or upstream refuses the group; v1alpha2 (1.36) lends its priority to its pods
    members_match: bool = False
    preemption_policy: str | None = None  # native: spec.preemptionPolicy (1.37, PodGroupPreemptionPolicy gate)
    workload: str | None = None  # native: the Workload it was made from (workloadRef / podGroupTemplateRef), if any
    parent: str | None = None  # native: the CompositePodGroup it belongs to (spec.parentCompositePodGroupName)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class CompositeGroup:
    """A scheduling.k8s.io CompositePodGroup (1.37's v1alpha3, 1.38's v1beta1): PodGroups that name it as their
    parent, started together. `min_groups` > 0 (`gang.minGroupCount`): at least that many of them start in one batch,
    each whole, or none does; 0 (`basic`): each starts on its own. `topology_key`: every pod of every child in one
    domain of it (a block above the children's racks)."""

    namespace: str
    name: str
    min_groups: int
    topology_key: str | None = None
    parent: str | None = None  # a CompositePodGroup above it (nesting)
    priority: int | None = None
    disruption_mode: str = "Pod"  # Pod (children one by one) or PodGroup (`all`: every child together)
    created: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class Gang:
    """An all-or-nothing group: at least `min_member` of its pods (bound ones included) run, or none.

    Members are the pods of `namespace` whose label `label` has the value `value` (a PodGroup's members carry
    scheduling.x-k8s.io/pod-group: NAME). Decided once, when the cluster is built (engine.model.gangs), from the
    pod's own PodGroup or a policy's `gang by label`; compile, preemption, the queue and the binder read it.
    """

    key: str  # namespace/name of the PodGroup, or namespace/label=value
    namespace: str
    min_member: int
    source: str  # where it was declared: "PodGroup ns/name", or a policy's file:line (policy name)
    label: str = POD_GROUP_LABEL
    value: str = ""
    within: str | None = None  # topology key: every member in one domain of it
    min_resources: tuple[tuple[str, int], ...] = ()  # the PodGroup's spec.minResources
    created: str = ""  # the PodGroup's creation time: among equal priorities, older gangs go first
    prefer: tuple[str, ...] = ()  # topology keys: the fewest domains of each, the first first (a policy's)
    least: tuple[str, int] | None = None  # (key, n): a domain of key holding a member holds at least n
    composite: str | None = None  # the CompositePodGroup (key) it starts with, for a scheduling.k8s.io PodGroup
    device_within: str | None = None  # device attribute (domain/name): every member's devices in one value of it
    device_source: str = ""  # the policy that asked for it (file:line:col), for explanations
    part: tuple[str, str] | None = None  # a second label = value its members carry (a workload's part of it)
    workload: str = ""  # the kind of the workload it is made from (`gang by workload`), named `value`

    def member(self, pod: Pod) -> bool:
        if self.label == SCHEDULING_GROUP:
            return pod.namespace == self.namespace and pod.scheduling_group == self.value
        return (pod.namespace == self.namespace and pod.labels.get(self.label) == self.value
                and (self.part is None or pod.labels.get(self.part[0]) == self.part[1]))


@dataclass(frozen=True, slots=True)
class GangWorkload:
    """A workload object whose pods a policy's `gang by workload` makes gangs of (engine.model.workload_gangs): a
    batch/v1 Job, a JobSet, a PyTorchJob or MPIJob, a RayCluster, a LeaderWorkerSet. `size` is its gang's size;
    `split` the pod label it is one gang per value of, when the object says so (a JobSet started InOrder: per
    replicated job; an MPIJob whose launcher waits for its workers: the workers alone), with `parts` the size of
    each value's gang (a value not there: its pods are no gang)."""

    kind: str
    namespace: str
    name: str
    size: int
    split: str | None = None
    parts: tuple[tuple[str, int], ...] = ()
    created: str = ""  # metadata.creationTimestamp: among equal priorities, older gangs go first

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.kind}/{self.name}"


class PodMatcher(Protocol):
    """Which pods a policy speaks of (a policy's `applies to`, engine.policy.ast)."""

    def matches(self, pod: Pod) -> bool: ...


@dataclass(frozen=True, slots=True)
class Quota:
    """A quota: the pods it covers (those of `namespaces`, or those `members` matches) use together at most
    `max` of each resource it lists; a *tenant* quota also guarantees its pods `min` of each resource when they
    ask for it and weighs their fair share by `weight`. scheduler-plugins' ElasticQuota is a tenant over its own
    namespace; a policy's `quota` statements make one over the pods in the policy's scope (engine.quotas.tenants says
    which tenant a pod belongs to). `source` names it in reasons."""

    name: str
    namespaces: frozenset[str] = frozenset()
    min: tuple[tuple[str, int], ...] = ()
    max: tuple[tuple[str, int], ...] = ()
    source: str = ""
    members: PodMatcher | None = None
    weight: float = 1.0
    tenant: bool = True  # False: a cap only (a parent's `max` over several tenants), no min and no share

    def covers(self, pod: Pod) -> bool:
        return pod.namespace in self.namespaces or (self.members is not None and self.members.matches(pod))


@dataclass(frozen=True, slots=True)
class DisruptionBudget:
    """A policy/v1 PodDisruptionBudget: how many of the pods it selects may be evicted now.

    `allowed` is status.disruptionsAllowed when the snapshot has a status, else what the spec allows
    given the matching running pods (see engine.reading.load). An empty selector (`{}`) covers every pod of its
    namespace, a missing one none: policy/v1's meaning, which kube-scheduler's preemption follows from 1.38 (1.36 and
    1.37 skipped a budget with an empty selector, and pods without labels, when counting violations).
    """

    namespace: str
    name: str
    selector: LabelSelector
    allowed: int

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def covers(self, pod: Pod) -> bool:
        return pod.namespace == self.namespace and self.selector.matches(pod.labels)


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """Which object of the input: kind, namespace ("" when cluster-scoped), name."""

    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}" if self.namespace else f"{self.kind} {self.name}"


@dataclass(frozen=True, slots=True)
class Refusal:
    """An object the model could not read, left out of the cluster: where it came from, why, and which it is
    (None when it has no name)."""

    source: str
    message: str
    ref: ObjectRef | None = None


@dataclass(slots=True)
class Workloads:
    """The objects upstream's system-default spreading reads to decide which pods belong together: Services'
    selectors by namespace, and the label selectors of ReplicaSets, StatefulSets and ReplicationControllers by
    (kind, namespace, name), for pods they control."""

    services: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    controllers: dict[tuple[str, str, str], LabelSelector] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Reservation:
    """Room held for a pending pod or gang that cannot start now (engine.time.timeline): where each of its pods starts
    and when enough room has freed there (its shadow time), what it needs on each node and the devices it holds
    (DRA). Pods placed meanwhile may use that room only if they end before `start` (backfill)."""

    holder: str  # the gang's key, or the pod's
    pods: tuple[tuple[str, str], ...]  # (pod key, node) for each of its pods
    start: float  # seconds since the epoch
    need: tuple[tuple[str, tuple[tuple[str, int], ...]], ...]  # (node, ((resource, amount), ...)) it needs there
    scope: str = ""  # the `reserve` statement it counts under ("": the defaults), kept for the cycles it is carried
    claims: tuple[ResourceClaim, ...] = ()  # its pods' ResourceClaims as allocated at its start: the devices it holds


@dataclass(frozen=True, slots=True)
class Moment:
    """When a plan is made and the room held then for pods that start later: the plan's `now` (seconds since the
    epoch; running pods' ends are counted from it; None: no time in the plan) and the reservations it is planned
    beside (engine.time.timeline; engine.kinds.reservations keeps pods running past their starts out of their room).
    Beside the cluster, not on it: one snapshot is planned at several moments (time steps, the backfill re-plan)."""

    now: float | None = None
    reservations: tuple[Reservation, ...] = ()


@dataclass(frozen=True, slots=True)
class Cluster:
    """A snapshot: nodes, pods already bound, the pending batch, gangs, namespace labels, and pods left out. The
    time it is planned at is beside it (`Moment`), not on it: a cluster is read, never written, once assembled."""

    nodes: list[Node] = field(default_factory=list)
    bound: list[Pod] = field(default_factory=list)
    pending: list[Pod] = field(default_factory=list)
    pod_groups: dict[str, PodGroup] = field(default_factory=dict)
    native_groups: dict[str, PodGroup] = field(default_factory=dict)  # scheduling.k8s.io PodGroups, by key
    composite_groups: dict[str, CompositeGroup] = field(default_factory=dict)  # their CompositePodGroups, by key
    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)
    workloads: Workloads = field(default_factory=Workloads)
    gang_workloads: dict[str, GangWorkload] = field(default_factory=dict)  # by key (namespace/Kind/name)
    notes: list[str] = field(default_factory=list)
    # pods of this scheduler without a node that are not pending at all (gated, terminating, unknown
    # PriorityClass, missing PodGroup): pod key -> reason; never placed, take no capacity
    skipped: dict[str, str] = field(default_factory=dict)
    # the reason code of each skipped pod that waits for an object (a PriorityClass, a PodGroup: InvalidObject); a
    # gated or terminating pod has none (engine.model.reasons)
    skipped_codes: dict[str, Code] = field(default_factory=dict)
    budgets: list[DisruptionBudget] = field(default_factory=list)
    gangs: dict[str, Gang] = field(default_factory=dict)  # gangs with a pending member, by key
    refused: list[Refusal] = field(default_factory=list)  # objects left out (build_cluster(strict=False))
    # scheduling.k8s.io PodGroups refused as a whole because their pods disagree (schedulerName, priority,
    # preemptionPolicy), with upstream's words: group key -> reason (their pods are skipped with it)
    refused_groups: dict[str, str] = field(default_factory=dict)
    storage: Storage = field(default_factory=Storage)
    devices: Devices = field(default_factory=Devices)
    quotas: list[Quota] = field(default_factory=list)  # tenants' quotas (ElasticQuotas, policies)
