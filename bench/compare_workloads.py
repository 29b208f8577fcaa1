"""Workloads for the side-by-side benchmark (bench/compare.py): what goes through the API, per node count.

Each workload builds a ``Scenario`` for a node count: Nodes, namespaces, PriorityClasses, PodGroups, pods
already bound (created with ``spec.nodeName``), and the pending pods every scheduler is asked to place, in
creation order. The scenario is scheduler-neutral: ``spec.schedulerName`` is filled in per run, so every
scheduler gets exactly the same objects.

The scheduler_perf-like ones (basic, node affinity, anti-affinity, pod affinity, spread) use its node and pod
templates (4 CPU / 32Gi / 110 pods, 10 zones; pause pods of 100m / 500Mi). The realistic ones come from
``bench/realistic.py`` (issue 6): ``mixed`` is its rich-mixed cluster (pools, tainted GPU nodes, running pods,
gangs, priorities), ``hetero`` its hetero-affinity one (the case where one-at-a-time scheduling used to beat
us), both scaled to the node count. The rest exercise what batch placement is about: ``tight-packing`` (sizes
that one-at-a-time placement fragments), ``gangs`` (all-or-nothing, including two gangs of 3 on room for 4),
``cost`` (nodes with a ``price`` annotation; policy-scheduler runs the lowest-price policy). ``tenants`` and
``tenants-reclaim`` give six namespaces scheduler-plugins ElasticQuotas (CapacityScheduling's min / max).
``mixed-hetero`` (issue 30, batch arrival) is many small classes on heterogeneous, tainted and cordoned nodes: apps
of 10 pods, each with one rule (required anti-affinity, a disk selector, required zone affinity, GPUs, a host port, a
gang); bench/cycle_profile.py times one cycle of it in-process.

Issue 28 adds scheduler_perf 1.37's shapes with a threshold, each following one test of
k8s.io/kubernetes v1.37.2's test/integration/scheduler_perf/ (named in its builder's docstring; init pods running,
sizes scaled so 5,000 nodes is the thresholded case): ``scheduling-basic``, ``pod-anti-affinity``,
``topology-spreading``, ``default-topology-spreading``; its gang suites as native gangs (``gangs-of-3``,
``three-big-gangs``); and ``dra-partitionable`` (partitionable GPUs: shared counters, a whole device and two
halves). Workloads with native PodGroups (``Workload.native``) write them in the API of the release measured
(``Workload.scenario(n, kube_version)``: scheduling.k8s.io/v1alpha2 on 1.36, v1beta1 on 1.37).

Issue 49 adds scheduler_perf 1.38's topology-aware gang shapes (podgroup/tas: racks of 100 nodes, every gang required in
one rack: ``tas-750-groups-of-4``, ``tas-1500-groups-of-4``, ``tas-2250-groups-of-4``, ``tas-3-big-groups``), a shape of
its own where racks are tight (``tas-tight-racks``), and its hero gang preemption (``hero-preemption``: 60% of the nodes
running gangs of priority 10,000 and 100, created bound before every run; a priority-1,000,000 gang for half the nodes;
kube-scheduler runs it with DefaultPreemption, ``Workload.preemption``).
"""
from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import realistic as R
import workloads as W
from testkit.manifests import (
    NATIVE_V1ALPHA2,
    NATIVE_V1BETA1,
    claim,
    counter_slice,
    created,
    device_class,
    device_request,
    gpu,
    in_group,
    native_group,
    owned,
    partition,
    pod,
    podgroup,
    replica_set,
    resource_claim,
    resource_slice,
    storage_class,
    volume,
)
from testkit.quantity import amount

ROOT = Path(__file__).resolve().parents[1]
PENDING_LABEL = "bench.policy-scheduler.io/pending"   # the pods a run deletes before the next scheduler
PENDING, PRESET = "true", "preset"  # its values: pods a scheduler is to place; pods created bound before each run
POD_GROUP_LABEL = W.POD_GROUP_LABEL
ZONE_KEY, HOSTNAME_KEY = W.ZONE_KEY, W.HOSTNAME_KEY
PRICE_ANNOTATION = "price"
BENCH_NS = "bench"


@dataclass(frozen=True)
class NodeSpec:
    """A Ready node: what the scheduler sees of it."""

    name: str
    allocatable: dict[str, str]
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[dict[str, str], ...] = ()
    annotations: dict[str, str] = field(default_factory=dict)
    unschedulable: bool = False  # cordoned (spec.unschedulable)


@dataclass(frozen=True)
class Scenario:
    """Everything one workload creates, in order; pending pods carry no schedulerName yet."""

    workload: str
    nodes: list[NodeSpec]
    pending: list[dict[str, Any]]
    namespaces: tuple[str, ...] = (BENCH_NS,)
    running: list[dict[str, Any]] = field(default_factory=list)
    priority_classes: dict[str, int] = field(default_factory=dict)
    pod_groups: list[dict[str, Any]] = field(default_factory=list)
    policy_dir: Path | None = None     # policies for policy-scheduler (a ConfigMap), None: none
    storage_classes: list[dict[str, Any]] = field(default_factory=list)  # created once
    volumes: list[dict[str, Any]] = field(default_factory=list)  # PVs and PVCs, created afresh for every run
    controllers: tuple[str, ...] = ()  # kube-controller-manager controllers the workload needs (the PV binder)
    provisioner: str | None = None     # a StorageClass provisioner the harness plays (creates the claimed PVs)
    # ReplicaSets and Services, created once before the runs; a pending pod's ownerReference names its
    # ReplicaSet and gets the uid the apiserver gave it (no controller runs: nothing else acts on them)
    workloads: list[dict[str, Any]] = field(default_factory=list)
    # DRA: DeviceClasses and ResourceSlices, published once as a driver would; ResourceClaims, afresh every run
    devices: list[dict[str, Any]] = field(default_factory=list)
    claims: list[dict[str, Any]] = field(default_factory=list)
    # scheduler-plugins ElasticQuotas (one per namespace), created once with their CRD; the same for every scheduler
    quotas: list[dict[str, Any]] = field(default_factory=list)
    # pods created bound (spec.nodeName) before every run, as if placed long ago, and deleted after it: what a
    # scheduler may evict (labelled PENDING_LABEL=PRESET; never counted as placed)
    preset: list[dict[str, Any]] = field(default_factory=list)

    def gang_sizes(self) -> dict[str, int]:
        """``namespace/podgroup`` -> minMember (Coscheduling) or gang.minCount (scheduling.k8s.io)."""
        out = {}
        for g in self.pod_groups:
            spec = g["spec"]
            size = spec["minMember"] if "minMember" in spec else (spec["schedulingPolicy"].get("gang") or {}).get("minCount")
            if size:
                out[f"{g['metadata']['namespace']}/{g['metadata']['name']}"] = size
        return out


@dataclass(frozen=True)
class Workload:
    """A named scenario family. ``arrival`` says how pods reach the scheduler: ``stream`` (created while it
    runs, the usual case) or ``batch`` (all pending before it starts: what a backlog or a burst looks like)."""

    name: str
    description: str
    build: Callable[..., Scenario]
    arrival: str = "stream"
    native: bool = False   # scheduling.k8s.io PodGroups: `build(n, native_api=...)` writes them in the release's API
    preemption: bool = False  # kube-scheduler runs with DefaultPreemption (off elsewhere: nothing to preempt)

    def scenario(self, n: int, kube_version: str) -> Scenario:
        """The scenario for `n` nodes on a control plane of `kube_version` (e.g. v1.37.2)."""
        return self.build(n, native_api=native_api(kube_version)) if self.native else self.build(n)


def native_api(kube_version: str) -> str:
    """The scheduling.k8s.io version serving Workload / PodGroup in a release: v1alpha2 in 1.36, v1beta1 from 1.37."""
    major, minor = (int(p) for p in kube_version.removeprefix("v").split(".")[:2])
    return NATIVE_V1BETA1 if (major, minor) >= (1, 37) else NATIVE_V1ALPHA2


# --- builders --------------------------------------------------------------------------------------------

def perf_nodes(n: int, cpu: str = W.NODE_CPU, memory: str = W.NODE_MEMORY, prefix: str = "node") -> list[NodeSpec]:
    """scheduler_perf's node-default template, 10 zones round robin."""
    return [NodeSpec(f"{prefix}-{i:05d}", {"cpu": cpu, "memory": memory, "pods": W.NODE_PODS},
                     {ZONE_KEY: W.ZONE_NAMES[i % W.ZONES], W.REGION_KEY: W.REGION})
            for i in range(n)]


def pause_pod(name: str, app: str, cpu: str = W.POD_CPU, memory: str = W.POD_MEMORY, ns: str = BENCH_NS,
              labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    """A pending pod as created (pause container, requests = limits, no schedulerName yet) labelled with its app."""
    return created(pod(name, cpu=cpu, memory=memory, ns=ns, labels={"app": app, **(labels or {})}, scheduler=None,
                       limits={"cpu": cpu, "memory": memory}, container="pause", image=W.PAUSE_IMAGE, **spec))


def pods_of(app: str, count: int, **kw: Any) -> list[dict[str, Any]]:
    return [pause_pod(f"{app}-{i:05d}", app, **kw) for i in range(count)]


def own_app(app: str) -> dict[str, Any]:
    return {"matchLabels": {"app": app}}


# --- scheduler_perf-like ----------------------------------------------------------------------------------

def basic(n: int) -> Scenario:
    return Scenario("basic", perf_nodes(n), pods_of("basic", 2 * n))


def node_affinity(n: int) -> Scenario:
    term = {"matchExpressions": [{"key": ZONE_KEY, "operator": "In", "values": list(W.NODE_AFFINITY_ZONES)}]}
    aff = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}
    return Scenario("node-affinity", perf_nodes(n), pods_of("node-affinity", n, affinity=aff))


def anti_affinity(n: int) -> Scenario:
    aff = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": own_app("anti"), "topologyKey": HOSTNAME_KEY}]}}
    return Scenario("anti-affinity", perf_nodes(n), pods_of("anti", max(1, n // 2), affinity=aff))


def pod_affinity(n: int) -> Scenario:
    """10 apps, each pod requires its app in its zone (the first of each app may go anywhere)."""
    pods = []
    for a in range(10):
        app = f"aff-{a}"
        aff = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": own_app(app), "topologyKey": ZONE_KEY}]}}
        pods += pods_of(app, max(1, n // 10), affinity=aff)
    return Scenario("pod-affinity", perf_nodes(n), pods)


def topology_spread(n: int) -> Scenario:
    tsc = [{"labelSelector": own_app("spread"), "maxSkew": 1, "topologyKey": ZONE_KEY,
            "whenUnsatisfiable": "DoNotSchedule"}]
    return Scenario("topology-spread", perf_nodes(n), pods_of("spread", n, topologySpreadConstraints=tsc))


# --- scheduler_perf 1.37's shapes with a threshold (issue 28) -----------------------------------------------
# test/integration/scheduler_perf/ of k8s.io/kubernetes v1.37.2; sizes scale with the node count so that 5,000 nodes
# is the thresholded case. Init pods are created bound (spec.nodeName) once, before the runs, round robin.

def init_pods(nodes: list[NodeSpec], count: int, app: str, ns: str = BENCH_NS, **kw: Any) -> list[dict[str, Any]]:
    """scheduler_perf's init pods: `count` pods of the app already running, the k-th on node k mod n."""
    return [pause_pod(f"{app}-{i:05d}", app, ns=ns, nodeName=nodes[i % len(nodes)].name, **kw) for i in range(count)]


def scheduling_basic(n: int) -> Scenario:
    """misc/ SchedulingBasic 5000Nodes_10000Pods (threshold 680 pods/s): n/5 pod-default pods running, 2n to
    schedule (1,000 and 10,000 at 5,000 nodes); resources only."""
    nodes = perf_nodes(n)
    return Scenario("scheduling-basic", nodes, pods_of("basic", 2 * n), running=init_pods(nodes, n // 5, "init"))


ANTI_NAMESPACES = ("sched-0", "sched-1")


def pod_anti_affinity(n: int) -> Scenario:
    """affinity/ SchedulingPodAntiAffinity 5000Nodes_2000Pods (threshold 180 pods/s): n/5 pods running in sched-0,
    2n/5 to schedule in sched-1 (1,000 and 2,000 at 5,000 nodes), each with required anti-affinity on hostname to
    `color: green` in both namespaces: one per node, the running ones included."""
    nodes = perf_nodes(n)
    aff = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"color": "green"}}, "topologyKey": HOSTNAME_KEY,
         "namespaces": list(ANTI_NAMESPACES)}]}}
    green = {"color": "green"}
    running = init_pods(nodes, max(1, n // 5), "anti-init", ns=ANTI_NAMESPACES[0], labels=green, affinity=aff)
    pending = pods_of("anti", max(1, 2 * n // 5), ns=ANTI_NAMESPACES[1], labels=green, affinity=aff)
    return Scenario("pod-anti-affinity", nodes, pending, namespaces=(BENCH_NS, *ANTI_NAMESPACES), running=running)


MOON_ZONES = ("moon-1", "moon-2", "moon-3")


def moon_nodes(n: int) -> list[NodeSpec]:
    """topology_spreading/'s nodes: node-default, zone label moon-1..3 round robin."""
    return [NodeSpec(s.name, s.allocatable, {ZONE_KEY: MOON_ZONES[i % 3]}) for i, s in enumerate(perf_nodes(n))]


def topology_spreading(n: int) -> Scenario:
    """topology_spreading/ TopologySpreading 5000Nodes_5000Pods (threshold 460 pods/s): 3 zones, n pod-default pods
    running, n to schedule with a DoNotSchedule zone spread of maxSkew 5 on `color: blue`."""
    nodes = moon_nodes(n)
    tsc = [{"labelSelector": {"matchLabels": {"color": "blue"}}, "maxSkew": 5, "topologyKey": ZONE_KEY,
            "whenUnsatisfiable": "DoNotSchedule"}]
    return Scenario("topology-spreading", nodes,
                    pods_of("spreading", n, labels={"color": "blue"}, topologySpreadConstraints=tsc),
                    running=init_pods(nodes, n, "init"))


SERVICE_NS = "service-ns"


def default_topology_spreading(n: int) -> Scenario:
    """topology_spreading/ DefaultTopologySpreading 5000Nodes_50000Pods (threshold 160 pods/s): 3 zones, a Service
    selecting `app: scheduler-perf`, n pod-default pods running, 10n to schedule in its namespace: pods with that
    label and no requests and no constraint of their own, which kube-scheduler spreads by its system defaults
    (zone and hostname, ScheduleAnyway) because the Service selects them."""
    nodes = moon_nodes(n)
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "service-0", "namespace": SERVICE_NS},
               "spec": {"selector": {"app": "scheduler-perf"},
                        "ports": [{"protocol": "TCP", "port": 80, "targetPort": 8000}]}}
    pending = [created(pod(f"pod-{i:06d}", cpu=None, ns=SERVICE_NS, labels={"app": "scheduler-perf"}, scheduler=None,
                           container="pause", image=W.PAUSE_IMAGE)) for i in range(10 * n)]
    return Scenario("default-topology-spreading", nodes, pending, namespaces=(BENCH_NS, SERVICE_NS),
                    running=init_pods(nodes, n, "init"), workloads=[service])


GANG_POD_CPU, GANG_POD_MEMORY = "100m", "100Mi"


def native_gang_suite(name: str, groups: int, size: int, n: int, native_api: str) -> Scenario:
    """podgroup/gangscheduling/ GangScheduling: `groups` scheduling.k8s.io PodGroups of gang.minCount `size`
    (`native_api`: v1alpha2 on 1.36, v1beta1 on 1.37), pods of 100m / 100Mi naming them, created group by group."""
    names = [f"gang-{g}" for g in range(groups)]
    pods = [pause_pod(f"{gang}-{i:04d}", gang, cpu=GANG_POD_CPU, memory=GANG_POD_MEMORY,
                      schedulingGroup=in_group(gang)) for gang in names for i in range(size)]
    return Scenario(name, perf_nodes(n), pods,
                    pod_groups=[native_group(g, size, BENCH_NS, api_version=native_api) for g in names])


def gangs_of_3(n: int, native_api: str = NATIVE_V1ALPHA2) -> Scenario:
    """GangScheduling 5000Nodes_1000Gangs_3000Pods (no threshold yet): n/5 gangs of 3."""
    return native_gang_suite("gangs-of-3", max(1, n // 5), 3, n, native_api)


def three_big_gangs(n: int, native_api: str = NATIVE_V1ALPHA2) -> Scenario:
    """GangScheduling 5000Nodes_3Gangs_3000Pods_1000PerGroup (no threshold yet): 3 gangs of n/5."""
    return native_gang_suite("three-big-gangs", 3, max(1, n // 5), n, native_api)


# --- scheduler_perf 1.38's topology-aware gangs and hero preemption (issue 49) ------------------------------
# k8s.io/kubernetes v1.38.0-beta.0's test/integration/scheduler_perf/podgroup/tas/ (GangTopologyAwareScheduling) and
# workload_preemption/ (GangPreemptionHeroWorkload), run on 1.37.2's v1beta1 (1.38's apiserver does not build here
# yet): 1.37.2 serves schedulingConstraints.topology and places by it behind TopologyAwareWorkloadScheduling (its
# TopologyPlacementGenerator and PodGroupPodsCount plugins), and preempts whole groups behind GenericWorkload.

RACK_KEY = "topology.kubernetes.io/rack"
NODES_PER_RACK = 100


def rack_nodes(n: int, per_rack: int = NODES_PER_RACK) -> list[NodeSpec]:
    """podgroup/tas/templates/node.yaml: 4 CPU / 32Gi / 110 pods, hostname, zone-(i/100), rack-(i/per_rack)."""
    return [NodeSpec(f"node-{i:05d}", {"cpu": W.NODE_CPU, "memory": W.NODE_MEMORY, "pods": W.NODE_PODS},
                     {HOSTNAME_KEY: f"node-{i:05d}", ZONE_KEY: f"zone-{i // 100}", RACK_KEY: f"rack-{i // per_rack}"})
            for i in range(n)]


def tas_suite(name: str, groups: int, size: int, n: int, native_api: str) -> Scenario:
    """GangTopologyAwareScheduling: `groups` PodGroups of gang.minCount `size`, each required in one rack
    (schedulingConstraints.topology[0].key topology.kubernetes.io/rack); pods of 100m / 100Mi naming them, created
    group by group (pods 0..size-1 -> group-0, ...)."""
    names = [f"group-{g}" for g in range(groups)]
    pods = [pause_pod(f"{group}-{i:04d}", group, cpu=GANG_POD_CPU, memory=GANG_POD_MEMORY,
                      schedulingGroup=in_group(group)) for group in names for i in range(size)]
    return Scenario(name, rack_nodes(n), pods,
                    pod_groups=[native_group(g, size, BENCH_NS, topology=RACK_KEY, api_version=native_api)
                                for g in names])


def tas_groups_of_4(per_5000: int) -> Callable[..., Scenario]:
    """5000Nodes_50Racks_<per_5000>Groups: per_5000 groups of 4 at 5,000 nodes, as many per node at other sizes."""
    def build(n: int, native_api: str = NATIVE_V1ALPHA2) -> Scenario:
        return tas_suite(f"tas-{per_5000}-groups-of-4", max(1, n * per_5000 // 5000), 4, n, native_api)
    build.__doc__ = f"GangTopologyAwareScheduling 5000Nodes_50Racks_{per_5000}Groups_{4 * per_5000}Pods, scaled."
    return build


def tas_3_groups(n: int, native_api: str = NATIVE_V1ALPHA2) -> Scenario:
    """GangTopologyAwareScheduling 5000Nodes_50Racks_3Groups_3000Pods_1000PerGroup: 3 groups of n/5."""
    return tas_suite("tas-3-big-groups", 3, max(1, n // 5), n, native_api)


TIGHT_RACK = 10  # nodes per rack in tas-tight-racks


def tas_tight_racks(n: int, native_api: str = NATIVE_V1ALPHA2) -> Scenario:
    """Not scheduler_perf's: racks where the room is tight. Racks of 10 nodes of 4 CPU, every pod 4 CPU (one per node),
    every gang required in one rack: as many gangs of 5 as racks, created first, then half as many gangs of 10. All
    fit (two gangs of 5 share a rack, a gang of 10 takes one whole) only if no two racks each hold one gang of 5:
    spreading the first ones over empty racks leaves the big ones nowhere."""
    racks = max(2, n // TIGHT_RACK)
    sizes = [(f"half-{g:03d}", TIGHT_RACK // 2) for g in range(racks)] + \
        [(f"whole-{g:03d}", TIGHT_RACK) for g in range(racks // 2)]
    pods = [pause_pod(f"{name}-{i:02d}", name, cpu=W.NODE_CPU, memory="1Gi", schedulingGroup=in_group(name))
            for name, size in sizes for i in range(size)]
    groups = [native_group(name, size, BENCH_NS, topology=RACK_KEY, api_version=native_api) for name, size in sizes]
    return Scenario("tas-tight-racks", rack_nodes(racks * TIGHT_RACK, TIGHT_RACK), pods, pod_groups=groups)


# GangPreemptionHeroWorkload: every pod 2800m of a node's 4 CPU (one per node) with a host port per group
HERO_CPU, HERO_MEMORY = "2800m", "100Mi"
HERO_CLASSES = {"bench-hero": 1_000_000, "bench-training": 10_000, "bench-batch": 100}
HERO_NAMESPACES = ("gang-preempt-0", "gang-preempt-1", "gang-preempt-2", "gang-preempt-3")


@dataclass(frozen=True)
class HeroShape:
    """Groups x pods of each kind at one size (the upstream workloads' params)."""

    training: tuple[int, int]
    large_batch: tuple[int, int]
    small_batch: tuple[int, int]
    hero: int


HERO_SHAPES = {  # workload_preemption/performance-config.yaml, GangPreemptionHeroWorkload's workloads
    10: HeroShape((3, 1), (1, 2), (1, 1), 5),
    100: HeroShape((3, 10), (1, 20), (2, 5), 50),
    1000: HeroShape((3, 100), (1, 200), (2, 50), 500),
    4900: HeroShape((3, 490), (3, 250), (14, 50), 2450),
}


def hero_shape(n: int) -> HeroShape:
    """Upstream's params at its sizes; elsewhere its 1,000-node shape scaled to n (60% of the nodes occupied)."""
    if n in HERO_SHAPES:
        return HERO_SHAPES[n]
    k = max(1, n // 10)
    return HeroShape((3, k), (1, 2 * k), (2, max(1, k // 2)), max(1, n // 2))


def hero_group_pods(ns: str, prefix: str, groups: int, size: int, cls: str, port_base: int, native_api: str,
                    bound_from: int | None = None, nodes: list[NodeSpec] | None = None
                    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """`groups` PodGroups of gang.minCount `size` (priority class `cls`, disruptionMode all) and their pods (gang-pod
    .yaml: 2800m / 100Mi, host port port_base + group); bound one per node from node `bound_from` when given."""
    pods, pod_groups = [], []
    for g in range(groups):
        name = f"{prefix}-{g}"
        group = native_group(name, size, ns, api_version=native_api, disruption="PodGroup")
        group["spec"]["priorityClassName"] = cls
        pod_groups.append(group)
        for i in range(size):
            extra: dict[str, Any] = {}
            if bound_from is not None and nodes is not None:
                extra["nodeName"] = nodes[bound_from + g * size + i].name
            pods.append(pause_pod(f"{name}-{i:04d}", name, cpu=HERO_CPU, memory=HERO_MEMORY, ns=ns,
                                  schedulingGroup=in_group(name), priorityClassName=cls,
                                  terminationGracePeriodSeconds=0,
                                  ports=[{"containerPort": 80, "hostPort": port_base + g}], **extra))
    return pods, pod_groups


def hero_preemption(n: int, native_api: str = NATIVE_V1ALPHA2) -> Scenario:
    """GangPreemptionHeroWorkload (4900Nodes_Hero2450Pods_60PctOccupied at n=4900, disruptionMode All): 60% of the
    nodes run one pod each, bound before every run: 3 training groups (priority 10,000, 10% of the nodes each), large
    and small batch groups (priority 100); a hero group of priority 1,000,000 asks for half the nodes, one pod per
    node. Only evicting batch groups (whole: disruptionMode all) makes room."""
    nodes = perf_nodes(n)
    shape = hero_shape(n)
    preset, groups, at = [], [], 0
    for ns, prefix, (count, size), cls in ((HERO_NAMESPACES[1], "training", shape.training, "bench-training"),
                                           (HERO_NAMESPACES[2], "large-batch", shape.large_batch, "bench-batch"),
                                           (HERO_NAMESPACES[3], "small-batch", shape.small_batch, "bench-batch")):
        pods, pgs = hero_group_pods(ns, prefix, count, size, cls, 8000, native_api, bound_from=at, nodes=nodes)
        preset += [{**p, "metadata": {**p["metadata"], "labels": {**p["metadata"]["labels"], PENDING_LABEL: PRESET}}}
                   for p in pods]
        groups += pgs
        at += count * size
    hero, hero_groups = hero_group_pods(HERO_NAMESPACES[0], "hero", 1, shape.hero, "bench-hero", 9000, native_api)
    return Scenario("hero-preemption", nodes, hero, namespaces=(BENCH_NS, *HERO_NAMESPACES),
                    priority_classes=dict(HERO_CLASSES), pod_groups=groups + hero_groups, preset=preset)


def hero_fewest_victims(n: int) -> int:
    """The fewest batch pods whose whole groups free enough nodes for the hero (a group is evicted whole)."""
    shape = hero_shape(n)
    free = n - sum(c * s for c, s in (shape.training, shape.large_batch, shape.small_batch))
    need = max(0, shape.hero - free)
    sizes = [shape.large_batch[1]] * shape.large_batch[0] + [shape.small_batch[1]] * shape.small_batch[0]
    best = {0: 0}  # freed nodes -> fewest victims (a subset sum: the pods evicted are the nodes freed)
    for s in sizes:
        best = {**best, **{f + s: f + s for f in best}}
    return min((f for f in best if f >= need), default=-1)


PART_COUNTER_SET, PART_MEMORY = "gpu-0", "40Gi"
PODS_PER_PART_GPU = 3


def dra_partitionable(n: int) -> Scenario:
    """dra/partitionabledevices/ (Partitionable; scheduler_perf gives it no threshold) shaped as issue 28's case:
    a quarter of the nodes carry one partitionable GPU each, its pool published in two ResourceSlices: the shared
    counters (counter set gpu-0, memory 40Gi) and three devices consuming them, a whole 40Gi and two halves of 20Gi.
    Three pods per GPU each claim one device of class `gpu` (a ResourceClaim per pod): at most two fit a GPU (the
    two halves), so a third of the pods cannot be placed without promising the GPU twice. The report counts
    physical devices whose counters the final allocations overcommit."""
    nodes = perf_nodes(n)
    gpu_nodes = nodes[::4][:max(2, n // 4)]
    slices = []
    for node in gpu_nodes:
        pool = f"{node.name}-gpu"
        slices += [created(counter_slice(pool, {PART_COUNTER_SET: {"memory": PART_MEMORY}}, node=node.name)),
                   created(resource_slice(node.name, [partition("whole", PART_COUNTER_SET, "40Gi", part="whole"),
                                                      partition("half-0", PART_COUNTER_SET, "20Gi", part="half"),
                                                      partition("half-1", PART_COUNTER_SET, "20Gi", part="half")],
                                          pool=pool, slices=2))]
    claims, pods = [], []
    for k in range(PODS_PER_PART_GPU * len(gpu_nodes)):
        name = f"part-{k:05d}"
        claims.append(created(resource_claim(name, device_request(), ns=BENCH_NS)))
        pods.append(pause_pod(name, "part", resourceClaims=[{"name": "gpu", "resourceClaimName": name}]))
    return Scenario("dra-partitionable", nodes, pods, devices=[created(device_class("gpu")), *slices], claims=claims)


# --- what batches are for ---------------------------------------------------------------------------------

TIGHT_SIZES_M = (1000, 1500, 2500, 3000)


def tight_packing(n: int) -> Scenario:
    """n/2 pods each of 1, 1.5, 2.5 and 3 CPU, smallest first, on 4-CPU nodes: exactly 100% of the cpu.

    Every pod fits (pair 1+3 and 1.5+2.5 on each node), but placing them one at a time in arrival order
    fragments the nodes whichever way it scores: spreading (LeastAllocated) leaves 150 of 200 placed per 100
    nodes, packing (MostAllocated) 163 (simulated)."""
    pods = []
    for size in TIGHT_SIZES_M:
        pods += pods_of(f"size-{size}m", max(1, n // 2), cpu=f"{size}m", memory="256Mi")
    return Scenario("tight-packing", perf_nodes(n), pods)


GANG_SIZE, GANG_CPU = 8, "2"


def gangs(n: int) -> Scenario:
    """Gangs of 8 x 2 CPU asking for 150% of the cluster's cpu, pods created round robin across gangs (as
    many Jobs submitted at once are), plus the coscheduling design's case on two 2-CPU nodes of their own:
    two gangs of 3 x 1 CPU on room for 4."""
    count = max(2, (n * 4 * 3) // (2 * GANG_SIZE * 2))  # 150% of 4n cpu
    names = [f"job-{g:03d}" for g in range(count)]
    pods = [pause_pod(f"{name}-{i}", name, cpu=GANG_CPU, memory="1Gi", labels={POD_GROUP_LABEL: name})
            for i in range(GANG_SIZE) for name in names]
    nodes, pairs = _pairs_on_room_for_four(n, lambda name: {"labels": {POD_GROUP_LABEL: name}})
    groups = [podgroup(name, GANG_SIZE, BENCH_NS) for name in names] + [podgroup(p, 3, BENCH_NS)
                                                                          for p in ("pair-a", "pair-b")]
    return Scenario("gangs", nodes, pods + pairs, pod_groups=groups)


def _pairs_on_room_for_four(n: int, member: Callable[[str], dict[str, Any]]) -> tuple[list[NodeSpec], list[dict]]:
    """scheduler_perf's nodes plus two 2-CPU nodes of their own (tainted), and the coscheduling design's case on
    them: two gangs of 3 x 1 CPU (`member(name)`: how a pod joins its gang) on room for 4."""
    nodes = perf_nodes(n) + [NodeSpec(f"small-{i}", {"cpu": "2", "memory": "8Gi", "pods": "110"},
                                      {"pool": "small"}, ({"key": "pool", "value": "small",
                                                           "effect": "NoSchedule"},)) for i in range(2)]
    tol = [{"key": "pool", "operator": "Equal", "value": "small", "effect": "NoSchedule"}]
    pods = [pause_pod(f"{name}-{i}", name, cpu="1", memory="1Gi", nodeSelector={"pool": "small"}, tolerations=tol,
                      **member(name)) for name in ("pair-a", "pair-b") for i in range(3)]
    return nodes, pods


PRICES = ("2.0", "1.0", "0.5")


def cost(n: int) -> Scenario:
    """Nodes priced 2.0 / 1.0 / 0.5 (round robin: the cheap ones are not simply the first), pods asking for
    a quarter of the cpu, which the cheapest third could hold. policy-scheduler runs policies/lowest-price."""
    nodes = [NodeSpec(s.name, s.allocatable, s.labels, annotations={PRICE_ANNOTATION: PRICES[i % 3]})
             for i, s in enumerate(perf_nodes(n))]
    return Scenario("cost", nodes, pods_of("web", n, cpu="1", memory="1Gi"),
                    policy_dir=ROOT / "policies" / "lowest-price")


# --- stateful (issue 15) ----------------------------------------------------------------------------------

PROVISIONER = "bench.policy-scheduler.io"
STATEFUL_ZONES = ("zone-a", "zone-b", "zone-c")
REPLICAS = 5


def stateful(n: int) -> Scenario:
    """StatefulSets of 5 x 1 CPU on 4-CPU nodes in 3 zones, one claim each: half on local PVs (no provisioner,
    WaitForFirstConsumer; one PV per replica, on a third of the nodes), half on a provisioned class
    whose allowedTopologies admit zones a and b only. Pods ask for 3/8 of the cpu; where they can go is the
    volumes' say. The harness runs the PV controller and plays the provisioner."""
    nodes = [NodeSpec(f"node-{i:05d}", {"cpu": "4", "memory": "16Gi", "pods": "110"},
                      {ZONE_KEY: STATEFUL_ZONES[i % 3], W.REGION_KEY: W.REGION}) for i in range(n)]
    sets = max(2, (n * 3 // 2) // REPLICAS)
    pods, vols = [], []
    local_nodes = [spec.name for spec in nodes[::3]]
    k = 0
    for s_ in range(sets):
        name, local = f"db-{s_:03d}", s_ % 2 == 0
        for i in range(REPLICAS):
            claim_name = f"data-{name}-{i}"
            vols.append(created(claim(claim_name, storage_class="bench-local" if local else "bench-zonal", ns=BENCH_NS)))
            if local:
                where = local_nodes[(k // 2) % len(local_nodes)]
                vols.append(created(volume(f"local-{k:05d}", storage_class="bench-local", node=where)))
                k += 1
            pods.append(pause_pod(f"{name}-{i}", name, cpu="1", memory="1Gi",
                                  volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}]))
    classes = [created(storage_class("bench-local")),
               created(storage_class("bench-zonal", provisioner=PROVISIONER, zones=list(STATEFUL_ZONES[:2])))]
    return Scenario("stateful", nodes, pods, storage_classes=classes, volumes=vols,
                    controllers=("persistentvolume-binder-controller",), provisioner=PROVISIONER)


# --- replicas (issue 15) ----------------------------------------------------------------------------------

REPLICAS_PER_SET = 30


def replicas(n: int) -> Scenario:
    """Deployments without any placement rule (their ReplicaSets, as a Deployment leaves them), 30 replicas each,
    on scheduler_perf's nodes in 10 zones, for 3/4 of a pod per node: what kube-scheduler's system-default
    spreading puts evenly over zones and nodes, and what a packer would pile up."""
    sets = max(2, (n * 3 // 4) // REPLICAS_PER_SET)
    pods, workloads = [], []
    for k in range(sets):
        app = f"web-{k:03d}"
        labels = {"app": app, "pod-template-hash": f"h{k:03d}"}
        workloads.append(created(replica_set(app, labels, REPLICAS_PER_SET, ns=BENCH_NS, cpu=W.POD_CPU)))
        for i in range(REPLICAS_PER_SET):
            pods.append(owned(pause_pod(f"{app}-{i:03d}", app, labels=labels), "ReplicaSet", app))
    return Scenario("replicas", perf_nodes(n), pods, workloads=workloads)


# --- devices and native gangs (issue 16) ------------------------------------------------------------------

GPUS_PER_NODE, TRAIN_SIZE, TRAIN_GPUS = 4, 4, 2
H100 = 'device.attributes["gpu.example.com"].model == "h100"'
BIG_MEMORY = 'device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0'


def gpu_dra(n: int, native_api: str = NATIVE_V1ALPHA2) -> Scenario:
    """A quarter of scheduler_perf's nodes carry 4 GPUs each, h100 (80Gi) and a100 (40Gi) on alternate nodes,
    published in ResourceSlices as a driver would. Training gangs (native PodGroups, gang of 4, each member
    claiming 2 h100 through a CEL selector: a gang spans two nodes) ask for 125% of the h100s; inference pods
    (one GPU of at least 40Gi each, any model) ask for as many GPUs as the a100s. Created interleaved."""
    gpu_nodes = max(2, n // 4)
    nodes = perf_nodes(n)
    slices = [created(resource_slice(nodes[i].name, [gpu(f"gpu-{k}", model="h100" if g % 2 == 0 else "a100",
                                                         memory="80Gi" if g % 2 == 0 else "40Gi")
                                                     for k in range(GPUS_PER_NODE)]))
              for g, i in enumerate(range(0, gpu_nodes * 4, 4)) if i < n]
    h100 = GPUS_PER_NODE * ((len(slices) + 1) // 2)
    gangs = max(1, (h100 * 5 // 4) // (TRAIN_SIZE * TRAIN_GPUS))
    inference = GPUS_PER_NODE * (len(slices) // 2)
    claims, training, serving, groups = [], [], [], []
    for g in range(gangs):
        name = f"train-{g:03d}"
        groups.append(native_group(name, TRAIN_SIZE, BENCH_NS, api_version=native_api))
        for i in range(TRAIN_SIZE):
            claims.append(created(resource_claim(f"{name}-{i}", device_request(count=TRAIN_GPUS, selectors=(H100,)),
                                                 ns=BENCH_NS)))
            training.append(pause_pod(f"{name}-{i}", name, cpu="1", memory="2Gi", schedulingGroup=in_group(name),
                                      resourceClaims=[{"name": "gpus", "resourceClaimName": f"{name}-{i}"}]))
    for k in range(inference):
        name = f"infer-{k:04d}"
        claims.append(created(resource_claim(name, device_request(selectors=(BIG_MEMORY,)), ns=BENCH_NS)))
        serving.append(pause_pod(name, "infer", cpu="500m", memory="1Gi",
                                 resourceClaims=[{"name": "gpu", "resourceClaimName": name}]))
    pods = _interleave(training, serving)
    return Scenario("gpu-dra", nodes, pods, pod_groups=groups, devices=[created(device_class("gpu")), *slices],
                    claims=claims)


def _interleave(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Alternate a gang's worth of `a` with as many of `b`, then the rest: jobs and services arriving together."""
    out: list[dict[str, Any]] = []
    while a or b:
        out += a[:TRAIN_SIZE] + b[:TRAIN_SIZE]
        a, b = a[TRAIN_SIZE:], b[TRAIN_SIZE:]
    return out


def native_gangs(n: int, native_api: str = NATIVE_V1ALPHA2) -> Scenario:
    """The gangs workload with Kubernetes' own PodGroups (scheduling.k8s.io `native_api`, gang.minCount 8) instead
    of Coscheduling's: gangs of 8 x 2 CPU asking 150% of the cpu, created round robin, every other one
    required in one zone (schedulingConstraints.topology); plus two gangs of 3 on room for 4."""
    count = max(2, (n * 4 * 3) // (2 * GANG_SIZE * 2))
    names = [f"job-{g:03d}" for g in range(count)]
    pods = [pause_pod(f"{name}-{i}", name, cpu=GANG_CPU, memory="1Gi", schedulingGroup=in_group(name))
            for i in range(GANG_SIZE) for name in names]
    groups = [native_group(name, GANG_SIZE, BENCH_NS, topology=ZONE_KEY if g % 2 else None, api_version=native_api)
              for g, name in enumerate(names)]
    nodes, pairs = _pairs_on_room_for_four(n, lambda name: {"schedulingGroup": in_group(name)})
    groups += [native_group(name, 3, BENCH_NS, api_version=native_api) for name in ("pair-a", "pair-b")]
    return Scenario("native-gangs", nodes, pods + pairs, pod_groups=groups)


# --- tenants (issue 19) -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Tenant:
    """A namespace with an ElasticQuota: its min and max as % of the cluster's cpu (and as much of its memory);
    what it asks for in ``tenants`` (pending pods); in ``tenants-reclaim``, what it already runs (pods bound
    before the run) and what it asks for there (pending pods). All in % of the cluster's cpu."""

    name: str
    min_pct: int
    max_pct: int
    asks_pct: int
    runs_pct: int = 0
    reclaims_pct: int = 0


# mins add up to the cluster; a, c, d and f ask beyond their mins (f beyond its max too), b and e below theirs
TENANTS = (
    Tenant("tenant-a", 30, 50, 45, runs_pct=50),
    Tenant("tenant-b", 20, 40, 10, reclaims_pct=15),
    Tenant("tenant-c", 20, 30, 30, runs_pct=30),
    Tenant("tenant-d", 10, 30, 25, runs_pct=20),
    Tenant("tenant-e", 10, 20, 5, reclaims_pct=10),
    Tenant("tenant-f", 10, 15, 25, reclaims_pct=10),
)
TENANT_CLASSES = {"bench-tenant-low": 0, "bench-tenant-high": 100}  # every fourth pod of a tenant is high
TENANT_SIZES_M = (2000, 1000, 500)   # in turn; all divide a node's 4 cpu
MEMORY_PER_CPU = 2**30               # 1Gi per cpu: memory never binds (the nodes have 8Gi per cpu)
STEP_M, MI = 500, 2**20


def shares(total: int, pcts: list[int], step: int) -> list[int]:
    """Each percentage of `total`, rounded down to a multiple of `step`; when the percentages add up to 100 the
    first share takes what the rounding left, so the shares add up to `total`."""
    out = [total * p // 100 // step * step for p in pcts]
    if sum(pcts) == 100:
        out[0] += total - sum(out)
    return out


def capacity(nodes: list[NodeSpec]) -> tuple[int, int]:
    """The cluster's cpu (millicores) and memory (bytes)."""
    return (sum(amount("cpu", n.allocatable["cpu"]) for n in nodes),
            sum(amount("memory", n.allocatable["memory"]) for n in nodes))


def elastic_quotas(nodes: list[NodeSpec]) -> list[dict[str, Any]]:
    """One ElasticQuota per tenant namespace, min and max of cpu and memory (upstream reads a resource a pod asks
    for and a quota does not list as a min and max of 0, so both are listed)."""
    cpu, memory = capacity(nodes)
    mins = zip(shares(cpu, [t.min_pct for t in TENANTS], STEP_M), shares(memory, [t.min_pct for t in TENANTS], MI))
    out = []
    for t, (cpu_min, mem_min) in zip(TENANTS, mins):
        cpu_max, mem_max = cpu * t.max_pct // 100 // STEP_M * STEP_M, memory * t.max_pct // 100 // MI * MI
        out.append({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota",
                    "metadata": {"name": "quota", "namespace": t.name},
                    "spec": {"min": {"cpu": f"{cpu_min}m", "memory": f"{mem_min // MI}Mi"},
                             "max": {"cpu": f"{cpu_max}m", "memory": f"{mem_max // MI}Mi"}}})
    return out


def tenant_pods(t: Tenant, total_m: int, prefix: str, labels: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Pods of 2, 1 and 0.5 cpu in turn (a smaller one where less is left) adding up to `total_m` millicores, in
    the tenant's namespace, every fourth one (of any size) of the high priority class."""
    pods: list[dict[str, Any]] = []
    left = total_m
    while left > 0:
        k = len(pods)
        size = TENANT_SIZES_M[k % len(TENANT_SIZES_M)]
        size = size if size <= left else max(s for s in TENANT_SIZES_M if s <= left)
        cls = "bench-tenant-high" if k % 4 == 3 else "bench-tenant-low"
        pods.append(pause_pod(f"{prefix}-{k:05d}", t.name, cpu=f"{size}m", memory=f"{size * MEMORY_PER_CPU // 1000 // MI}Mi",
                              ns=t.name, labels=labels, priorityClassName=cls))
        left -= size
    return pods


def blend(lists: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Every list's items spread evenly over one sequence: tenants submitting at the same time, each its own amount."""
    keyed = [((k + 0.5) / len(items), j, k) for j, items in enumerate(lists) for k in range(len(items))]
    return [lists[j][k] for _, j, k in sorted(keyed)]


def bind_first_fit(pods: list[dict[str, Any]], nodes: list[NodeSpec]) -> list[dict[str, Any]]:
    """The pods with spec.nodeName: largest first (in their order within a size), each on the first node with room
    for its cpu. With sizes that divide a node's cpu, every node before the current one is full."""
    free = [amount("cpu", n.allocatable["cpu"]) for n in nodes]
    out: list[dict[str, Any]] = []
    i = 0
    for p in sorted(pods, key=lambda p: -amount("cpu", p["spec"]["containers"][0]["resources"]["requests"]["cpu"])):
        need = amount("cpu", p["spec"]["containers"][0]["resources"]["requests"]["cpu"])
        while i < len(free) and free[i] < need:
            i += 1
        if i == len(free):
            raise ValueError("the running pods do not fit the nodes")
        free[i] -= need
        out.append({**p, "spec": {**p["spec"], "nodeName": nodes[i].name}})
    return out


def tenants(n: int) -> Scenario:
    """Six tenants with ElasticQuotas (mins adding up to the cluster's cpu), asking for 140% of it together, their
    pods interleaved as if submitted at once: a, c, d and f borrow (f asks beyond its max), b and e lend."""
    nodes = perf_nodes(n)
    cpu, _ = capacity(nodes)
    asks = [tenant_pods(t, m, "pod") for t, m in zip(TENANTS, shares(cpu, [t.asks_pct for t in TENANTS], STEP_M))]
    return Scenario("tenants", nodes, blend(asks), tuple(t.name for t in TENANTS), priority_classes=dict(TENANT_CLASSES),
                    quotas=elastic_quotas(nodes))


def tenants_reclaim(n: int) -> Scenario:
    """The same quotas on a cluster full of the borrowers' pods (a at its max, c at its max, d at twice its min:
    created bound before each run); then the lenders b, e and f ask for 35% of the cpu, within their mins. Only
    reclaiming borrowed room (40%) places them."""
    nodes = perf_nodes(n)
    cpu, _ = capacity(nodes)
    runners = [t for t in TENANTS if t.runs_pct]
    running = [tenant_pods(t, m, "run", {PENDING_LABEL: PRESET})
               for t, m in zip(runners, shares(cpu, [t.runs_pct for t in runners], STEP_M))]
    lenders = [t for t in TENANTS if t.reclaims_pct]
    asks = [tenant_pods(t, m, "new") for t, m in zip(lenders, shares(cpu, [t.reclaims_pct for t in lenders], STEP_M))]
    return Scenario("tenants-reclaim", nodes, blend(asks), tuple(t.name for t in TENANTS),
                    priority_classes=dict(TENANT_CLASSES), quotas=elastic_quotas(nodes),
                    preset=bind_first_fit(blend(running), nodes))


# --- realistic (bench/realistic.py, issue 6) --------------------------------------------------------------

def from_cluster(workload: str, c: R.Cluster) -> Scenario:
    """A realistic.Cluster as API objects: its running pods bound, its pending pods pending, priorities as
    PriorityClasses (the Priority admission plugin refuses a bare ``spec.priority``)."""
    nodes = [_node_spec(pool, R.node_fields(i)) for i, pool in enumerate(c.pool_of)]
    running, pending, classes = [], [], {}
    for _, _, k, i in R.pod_order(c):
        o = c.owners[k]
        doc = _api_pod(R.pod_doc(o, R.pod_fields(c, o, i), "lean"), classes)
        (running if i < o.running else pending).append(doc)
    groups = [podgroup(o.name, o.replicas, o.namespace) for o in c.owners if o.gang]
    namespaces = tuple(sorted({o.namespace for o in c.owners}))
    return Scenario(workload, nodes, pending, namespaces, running, classes, groups)


def _node_spec(pool: R.NodePool, f: R.NodeFields) -> NodeSpec:
    doc = R.node_doc(pool, f, "lean")
    return NodeSpec(f.name, doc["status"]["allocatable"], doc["metadata"]["labels"],
                    tuple(doc["spec"].get("taints", ())))


def _api_pod(doc: dict[str, Any], classes: dict[str, int]) -> dict[str, Any]:
    """What a client would POST (no uid, timestamps or status); priority by class name."""
    out = created(doc)
    spec = out["spec"] = dict(out["spec"])
    value = spec.pop("priority", None)
    if value:
        name = f"bench-priority-{value}"
        classes[name] = value
        spec["priorityClassName"] = name
    return out


def mixed(n: int) -> Scenario:
    return from_cluster("mixed", R.rich_mixed(nodes=n, running=5 * n, pending=n))


# --- many small classes on heterogeneous nodes (issue 30) -------------------------------------------------

HETERO_SHAPES = ({"cpu": "4", "memory": "16Gi"}, {"cpu": "8", "memory": "32Gi"}, {"cpu": "16", "memory": "64Gi"})
GPU_RESOURCE, GPUS_PER_GPU_NODE, DISK_KEY, ACCELERATOR_KEY = "nvidia.com/gpu", "4", "disk", "accelerator"
GPU_TAINT = {"key": GPU_RESOURCE, "value": "present", "effect": "NoSchedule"}
CORDON_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}  # what the node controller adds
PODS_PER_APP = 10
# an app's placement rule, by share of the apps (and so of the pods): 100 apps at 200 nodes, one per 2 nodes
APP_RULES = (("anti", 30), ("disk", 10), ("zone", 10), ("gpu", 7), ("port", 3), ("gang", 10), ("plain", 30))
APP_CPU_M, APP_MEMORY_MI = (100, 250, 500, 1000), (256, 512, 1024, 2048)


def hetero_nodes(n: int, seed: int = 30) -> list[NodeSpec]:
    """Three shapes in turn, 10 zones, half the nodes labelled disk=ssd (the rest hdd); 15% tainted GPU nodes (4
    GPUs each) and 5% cordoned, chosen at random (seeded)."""
    chosen = random.Random(seed).sample(range(n), n * 20 // 100)
    gpu_nodes, cordoned = set(chosen[:n * 15 // 100]), set(chosen[n * 15 // 100:])
    out = []
    for i in range(n):
        labels = {ZONE_KEY: W.ZONE_NAMES[i % W.ZONES], W.REGION_KEY: W.REGION, DISK_KEY: "ssd" if i % 2 else "hdd"}
        allocatable = {**HETERO_SHAPES[i % 3], "pods": W.NODE_PODS}
        taints: tuple[dict[str, str], ...] = ()
        if i in gpu_nodes:
            allocatable[GPU_RESOURCE] = GPUS_PER_GPU_NODE
            labels[ACCELERATOR_KEY] = "gpu"
            taints = (GPU_TAINT,)
        if i in cordoned:
            taints = (*taints, CORDON_TAINT)
        out.append(NodeSpec(f"node-{i:05d}", allocatable, labels, taints, unschedulable=i in cordoned))
    return out


def app_rules(apps: int) -> list[str]:
    """Each app's rule (APP_RULES' shares), dealt so that every stretch of 100 apps has each share exactly."""
    deck = [rule for rule, share in APP_RULES for _ in range(share)]
    return [deck[(a * 37) % len(deck)] for a in range(apps)]  # 37 is prime to 100: a permutation per 100 apps


def hetero_app(a: int, rule: str, cpu_m: int, memory_mi: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One app's pods (PODS_PER_APP, its rule in every pod) and its PodGroup if it is a gang."""
    app = f"app-{a:04d}"
    spec: dict[str, Any] = {}
    labels: dict[str, str] = {}
    requests: dict[str, str] = {}
    groups = []
    if rule == "anti":
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": own_app(app), "topologyKey": HOSTNAME_KEY}]}}
    elif rule == "disk":
        spec["nodeSelector"] = {DISK_KEY: "ssd"}
    elif rule == "zone":
        spec["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": own_app(app), "topologyKey": ZONE_KEY}]}}
    elif rule == "gpu":
        requests[GPU_RESOURCE] = "1"
        spec["tolerations"] = [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}]
    elif rule == "gang":
        labels[POD_GROUP_LABEL] = app
        groups.append(podgroup(app, PODS_PER_APP, BENCH_NS))
    cpu, memory = f"{cpu_m}m", f"{memory_mi}Mi"
    pods = []
    for i in range(PODS_PER_APP):
        extra = dict(spec)
        if rule == "port":
            extra["ports"] = [{"containerPort": 8080, "hostPort": 30000 + a % 2000, "protocol": "TCP"}]
        doc = created(pod(f"{app}-{i:03d}", cpu=cpu, memory=memory, ns=BENCH_NS, labels={"app": app, **labels},
                          scheduler=None, requests=requests or None, limits={"cpu": cpu, "memory": memory, **requests},
                          container="pause", image=W.PAUSE_IMAGE, **extra))
        pods.append(doc)
    return pods, groups


def mixed_hetero(n: int, seed: int = 30) -> Scenario:
    """Issue 30's `mixed`: 5 pending pods per node in apps of 10 (one app per 2 nodes), each app with one rule
    (APP_RULES), sizes drawn per app (seeded), created interleaved as Deployments and Jobs submitted together."""
    rng = random.Random(seed)
    rules = app_rules(max(1, n // 2))
    apps, groups = [], []
    for a, rule in enumerate(rules):
        pods, group = hetero_app(a, rule, rng.choice(APP_CPU_M), rng.choice(APP_MEMORY_MI))
        apps.append(pods)
        groups += group
    return Scenario("mixed-hetero", hetero_nodes(n, seed), blend(apps), pod_groups=groups)


def hetero(n: int) -> Scenario:
    return from_cluster("hetero", R.hetero_affinity(nodes=n, pending=5 * n))


WORKLOADS: dict[str, Workload] = {w.name: w for w in (
    Workload("basic", "identical pods, resources only (scheduler_perf SchedulingBasic); 2 pods per node", basic),
    Workload("node-affinity", "required nodeAffinity: zone In 3 of 10; 1 pod per node", node_affinity),
    Workload("anti-affinity", "required podAntiAffinity to own app on hostname; 1 pod per 2 nodes", anti_affinity),
    Workload("pod-affinity", "10 apps, required podAffinity to own app on zone; 1 pod per node", pod_affinity),
    Workload("topology-spread", "DoNotSchedule maxSkew 1 on zone; 1 pod per node", topology_spread),
    Workload("scheduling-basic", "scheduler_perf SchedulingBasic (1.37 threshold 680 pods/s at 5,000 nodes): n/5 "
             "pods running, 2n identical pods to schedule, resources only", scheduling_basic),
    Workload("pod-anti-affinity", "scheduler_perf SchedulingPodAntiAffinity (threshold 180): n/5 running in sched-0, "
             "2n/5 to schedule in sched-1, required hostname anti-affinity to color=green in both", pod_anti_affinity),
    Workload("topology-spreading", "scheduler_perf TopologySpreading (threshold 460): 3 zones, n running, n to "
             "schedule with a DoNotSchedule zone spread maxSkew 5", topology_spreading),
    Workload("default-topology-spreading", "scheduler_perf DefaultTopologySpreading (threshold 160): 3 zones, a "
             "Service selecting the pods, n running, 10n BestEffort pods without constraints (system-default "
             "spreading)", default_topology_spreading),
    Workload("gangs-of-3", "scheduler_perf GangScheduling 1000Gangs_3000Pods (no threshold): n/5 native gangs of 3 x "
             "100m", gangs_of_3, native=True),
    Workload("three-big-gangs", "scheduler_perf GangScheduling 3Gangs_1000PerGroup (no threshold): 3 native gangs "
             "of n/5 x 100m", three_big_gangs, native=True),
    Workload("tas-750-groups-of-4", "scheduler_perf 1.38 GangTopologyAwareScheduling 5000Nodes_50Racks_750Groups_"
             "3000Pods (1.38 threshold 400 pods/s): racks of 100 nodes, 0.15n native gangs of 4 x 100m, each required "
             "in one rack (schedulingConstraints.topology topology.kubernetes.io/rack)", tas_groups_of_4(750), native=True),
    Workload("tas-1500-groups-of-4", "the same, 5000Nodes_50Racks_1500Groups_6000Pods (threshold 350): 0.3n gangs "
             "of 4", tas_groups_of_4(1500), native=True),
    Workload("tas-2250-groups-of-4", "the same, 5000Nodes_50Racks_2250Groups_9000Pods (threshold 350): 0.45n gangs "
             "of 4", tas_groups_of_4(2250), native=True),
    Workload("tas-3-big-groups", "the same, 5000Nodes_50Racks_3Groups_3000Pods_1000PerGroup (threshold 550): 3 "
             "gangs of n/5, each in one rack", tas_3_groups, native=True),
    Workload("tas-tight-racks", "not scheduler_perf's: racks of 10 nodes, 4-CPU pods (one per node), gangs each "
             "required in one rack: n/10 gangs of 5 created first, then n/20 gangs of 10; all fit only if the gangs of "
             "5 pair up in racks", tas_tight_racks, native=True),
    Workload("hero-preemption", "scheduler_perf 1.38 GangPreemptionHeroWorkload 4900Nodes_Hero2450Pods_60PctOccupied: "
             "60% of the nodes run one 2800m pod each (training gangs at priority 10,000, batch gangs at 100, "
             "disruptionMode all), a priority-1,000,000 gang asks for half the nodes; kube-scheduler with "
             "DefaultPreemption", hero_preemption, native=True, preemption=True),
    Workload("dra-partitionable", "DRA partitionable devices: a quarter of the nodes with one GPU (shared counters "
             "40Gi; devices: whole 40Gi, two halves of 20Gi), 3 pods per GPU claiming one device each: at most 2 "
             "fit", dra_partitionable),
    Workload("mixed", "bench/realistic.py rich-mixed: 3 pools (tainted high-memory and GPU), 5 running and "
             "1 pending pod per node, affinity stacks, StatefulSets, GPU pods, gangs, 3 priorities", mixed),
    Workload("mixed-hetero", "issue 30: nodes of 3 shapes (4/8/16 CPU), 15% tainted GPU nodes, 5% cordoned, disk "
             "labels; apps of 10 pods, one per 2 nodes: 30% required hostname anti-affinity in the app, 10% nodeSelector "
             "disk=ssd, 10% required zone affinity to the app, 7% GPU pods (toleration), 3% host port, 10% gangs "
             "(PodGroups of 10), 30% plain", mixed_hetero, arrival="batch"),
    Workload("hetero", "bench/realistic.py hetero-affinity (issue 6): 5 pending pods per node in stacks: cache "
             "(zone spread, hostname anti-affinity), workers (required zone affinity to it), api", hetero),
    Workload("tight-packing", "1 / 1.5 / 2.5 / 3 CPU pods, n/2 each, smallest first: 100% of cpu, all fit only "
             "if paired", tight_packing, arrival="batch"),
    Workload("gangs", "PodGroups of 8 x 2 CPU asking 150% of cpu, created round robin; plus two gangs of 3 on "
             "room for 4", gangs),
    Workload("cost", "nodes priced 2.0 / 1.0 / 0.5, pods for 25% of cpu; policy-scheduler: lowest-price policy",
             cost),
    Workload("stateful", "StatefulSets of 5 x 1 CPU, a claim each: half on local PVs (one per replica, on a "
             "third of the nodes), half provisioned in 2 of 3 zones; the PV controller runs, the harness provisions", stateful),
    Workload("replicas", "Deployments' ReplicaSets of 30 replicas without placement rules, 10 zones: spread by "
             "upstream's system defaults", replicas),
    Workload("gpu-dra", "DRA: a quarter of the nodes with 4 GPUs (h100 / a100 alternating) in ResourceSlices; "
             "training gangs (native, 4 x 2 h100 by CEL selector) for 125% of the h100s, inference pods (1 GPU "
             ">= 40Gi) for as many as the a100s, interleaved", gpu_dra, native=True),
    Workload("native-gangs", "scheduling.k8s.io PodGroups of 8 x 2 CPU asking 150% of cpu, every other one in "
             "one zone, created round robin; plus two gangs of 3 on room for 4", native_gangs, native=True),
    Workload("tenants", "6 namespaces with ElasticQuotas (min 30/20/20/10/10/10% of cpu, max 50/40/30/30/20/15%) "
             "asking 45/10/30/25/5/25%, 140% in all, pods of 2 / 1 / 0.5 CPU interleaved, every 4th at priority 100",
             tenants),
    Workload("tenants-reclaim", "the same quotas; the cluster full of borrowers' pods, bound before each run "
             "(tenant-a 50%, c 30%, d 20% of cpu: 40% borrowed); the lenders b, e, f ask 15/10/10%, within their mins: "
             "placed only by reclaiming", tenants_reclaim),
)}
