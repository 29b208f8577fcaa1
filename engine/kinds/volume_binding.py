"""VolumeBinding: a pod's PersistentVolumeClaims must be met on the node. Claims missing, being deleted, lost
or unbound with Immediate binding keep the pod pending (PreFilter); a bound claim's PV node affinity restricts
the nodes; an unbound WaitForFirstConsumer claim needs an available PV that admits the node (of its class, size,
access and volume modes) or a provisioner whose allowedTopologies admit it and, where its CSIDriver tracks
capacity, a CSIStorageCapacity of the node that holds it. Within the batch two claims never get the same local
PV: per node, the PVs a pool of alike claims can use are a capacity row per size asked.

Scoring is upstream's StorageCapacityScoring (beta and on in 1.37, off in 1.36): nodes where the pod's claims
would use less of the storage they get score higher (`capacity_points`)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from ..devices.storage import fits, match_claims, node_capacity, provisionable
from ..model.cluster import ClaimUse, Node, Pod, Volume
from ..model.ir import NodeTerms
from ..model.reasons import Code
from ..model.rejections import Rejection, Rejections
from .base import Action, ClassFields, ClusterEvent, Emit, Filter, PreFilter, Requeue, Resource, Score, ScorePart

if TYPE_CHECKING:
    from ..model.view import View
    from ..planning.classes import ClassInfo
    from .context import Batch, ClassSpec, ProblemBuilder

ERR_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
ERR_NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
ERR_PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
ERR_NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"
MAX_UTILIZATION = 100  # StorageCapacityScoring's default shape: 100 points at 0% used, 0 at 100%
KEEP_LOCAL_PENALTY = 1  # per pod, on a node with unclaimed local PVs, for pods that claim none


@dataclass(frozen=True, slots=True)
class Served:
    """An available PersistentVolume and the nodes its node affinity admits."""

    volume: Volume
    nodes: np.ndarray  # boolean mask over the index's nodes


def served_volumes(cluster_volumes: list[Volume], view: View) -> dict[str, list[Served]]:
    """Available, unclaimed PVs by storage class, each with its nodes (masks shared by PVs pinned alike)."""
    out: dict[str, list[Served]] = defaultdict(list)
    everywhere = np.ones(len(view.nodes), dtype=bool)
    for v in cluster_volumes:
        if v.available and v.claim is None and not v.deleting:
            mask = everywhere if v.node_terms is None else view.matching_mask(NodeTerms(v.node_terms))
            out[v.storage_class].append(Served(v, mask))
    return out


def provisioning_mask(use: ClaimUse, view: View, capacity: bool = True) -> np.ndarray:
    """Nodes a provisioner can serve the claim on (with `capacity`: where its tracked capacity holds it too)."""
    if not use.provisioner:
        return np.zeros(len(view.nodes), dtype=bool)
    mask = np.ones(len(view.nodes), dtype=bool) if use.topology is None else view.matching_mask(NodeTerms(use.topology))
    if capacity and use.capacities is not None:
        mask = mask & np.fromiter((node_capacity(use, n) is not False for n in view.nodes), dtype=bool,
                                  count=len(view.nodes))
    return mask


class VolumeBinding(ClassFields, PreFilter, Filter, Score, Emit, Requeue):
    name, code = "VolumeBinding", Code.VOLUME
    events = (ClusterEvent(Resource.PERSISTENT_VOLUME_CLAIM, Action.ADD | Action.UPDATE),
              ClusterEvent(Resource.PERSISTENT_VOLUME, Action.ADD | Action.UPDATE),
              ClusterEvent(Resource.STORAGE_CLASS, Action.ADD | Action.UPDATE),
              ClusterEvent(Resource.CSI_STORAGE_CAPACITY, Action.ADD | Action.UPDATE),
              ClusterEvent(Resource.CSI_DRIVER, Action.ADD | Action.UPDATE),
              ClusterEvent(Resource.NODE, Action.ADD | Action.UPDATE_NODE_LABEL))

    def class_fields(self, pod: Pod) -> tuple:
        return (pod.volumes,)  # what its claims mean (every volume kind reads PodVolumes)

    def prefilter(self, spec: ClassSpec, batch: Batch) -> Rejection | None:
        blocked = spec.sample.volumes.blocked
        return Rejection(self.name, (blocked,), resolvable=False) if blocked else None

    def filter(self, spec: ClassSpec, batch: Batch, out: Rejections) -> None:
        volumes, view = spec.sample.volumes, batch.view
        if volumes.pv_missing:
            out.add(Rejection(self.name, (ERR_PV_NOT_EXIST,), resolvable=False, code=Code.INVALID_OBJECT),
                    np.ones(len(view.nodes), dtype=bool))
        for terms in volumes.bound_terms:
            out.add(Rejection(self.name, (ERR_NODE_CONFLICT,), resolvable=False), ~view.matching_mask(NodeTerms(terms)))
        if volumes.waiting:
            met = self._claims_met(volumes.waiting, batch, capacity=False)
            out.add(Rejection(self.name, (ERR_BIND_CONFLICT,), resolvable=False), ~met)
            if any(u.capacities is not None for u in volumes.waiting):
                short = met & ~self._claims_met(volumes.waiting, batch)
                out.add(Rejection(self.name, (ERR_NOT_ENOUGH_SPACE,), resolvable=False), short)

    def _claims_met(self, uses: tuple[ClaimUse, ...], batch: Batch, capacity: bool = True) -> np.ndarray:
        """Nodes where every waiting claim gets its own PV or a provisioned one (upstream's matching, smallest
        claim first, smallest PV each); `capacity`: a provisioned one only where tracked capacity holds it."""
        view = batch.view
        usable = self._usable(uses, batch)
        if len(uses) == 1:
            met = provisioning_mask(uses[0], view, capacity).copy()
            for s in usable:
                met |= s.nodes
            return met
        return np.fromiter((_met_on(uses, usable, node, i, capacity) for i, node in enumerate(view.nodes)),
                           dtype=bool, count=len(view.nodes))

    def _usable(self, uses: tuple[ClaimUse, ...], batch: Batch) -> list[Served]:
        return [s for sc in {u.storage_class for u in uses} for s in self._served(batch).get(sc, ())
                if any(fits(u, s.volume) for u in uses)]

    def score(self, info: ClassInfo, candidates: np.ndarray, batch: Batch) -> list[ScorePart]:
        """Upstream's StorageCapacityScoring for a pod with waiting claims (`capacity_points`). Ours, not upstream's:
        a pod that waits on no claim loses a point on nodes with unclaimed local PVs, so among equal plans it
        leaves their room to the claims that can go nowhere else (pods arriving later included). Nothing when
        every node has them or none does."""
        uses = info.sample.volumes.waiting
        if uses:
            usable, nodes = self._usable(uses, batch), batch.view.nodes
            if not usable and all(u.capacities is None for u in uses):
                return []  # nothing known of any storage's size: no points anywhere
            points = np.fromiter((capacity_points(uses, [s.volume for s in usable if s.nodes[i]], nodes[i])
                                  for i in candidates), dtype=np.int64, count=len(candidates))
            return [ScorePart("VolumeBinding: free storage capacity", points)] if points.any() else []
        local = self._local_nodes(batch)
        if not local.any() or local.all():
            return []
        return [ScorePart("keeps room beside unclaimed local PersistentVolumes", -KEEP_LOCAL_PENALTY * local[candidates])]

    def _local_nodes(self, batch: Batch) -> np.ndarray:
        """Nodes an unclaimed PV admits alone (a local volume), Available or about to be (phase Pending: just
        created, which matching does not offer yet, as upstream; its pods are on their way too)."""
        memo = batch.memo.setdefault(self.name, {})
        if "local" not in memo:
            local = np.zeros(len(batch.view.nodes), dtype=np.int64)
            for v in batch.cluster.storage.volumes.values():
                if (v.available or v.pending) and v.claim is None and not v.deleting and v.node_terms is not None:
                    where = np.flatnonzero(batch.view.matching_mask(NodeTerms(v.node_terms)))
                    if len(where) == 1:
                        local[where[0]] = 1
            memo["local"] = local
        return memo["local"]

    def _served(self, batch: Batch) -> dict[str, list[Served]]:
        memo = batch.memo.setdefault(self.name, {})
        if "served" not in memo:
            memo["served"] = served_volumes(list(batch.cluster.storage.volumes.values()), batch.view)
        return memo["served"]

    def emit(self, build: ProblemBuilder) -> None:
        """Per pool of alike claims (all but the size) and per size asked: each node's local PVs of at least
        that size, and each class's claims of at least that size (Hall's condition, exact for nested sizes)."""
        asks: dict[ClaimUse, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
        for a, info in build.checked():
            for use in info.sample.volumes.waiting:
                asks[replace(use, request=0)][a].append(use.request)
        for pool, per_class in asks.items():
            served = self._served(build.batch).get(pool.storage_class, [])
            for size in sorted({r for requests in per_class.values() for r in requests}):
                demand = [sum(1 for r in per_class.get(a, ()) if r >= size) for a in range(len(build.classes))]
                self._emit_row(build, replace(pool, request=size), served, demand)

    def _emit_row(self, build: ProblemBuilder, use: ClaimUse, served: list[Served], demand: list[int]) -> None:
        """Local PVs (those admitting one node) that fit `use`, per node; unbounded where a provisioner or a
        PV admitting several nodes could serve instead."""
        nodes = len(build.view.nodes)
        unbounded = sum(c.count * d for c, d in zip(build.problem.classes, demand)) + 1
        local = np.zeros(nodes, dtype=np.int64)
        shared = provisioning_mask(use, build.view).copy()
        for s in served:
            if fits(use, s.volume):
                where = np.flatnonzero(s.nodes)
                if len(where) == 1:
                    local[where[0]] += 1
                else:
                    shared |= s.nodes
        room = np.where(shared, unbounded, local).tolist()
        name = f"volumes: {use.storage_class or '<no class>'} PVs >= {use.request} bytes"
        build.add_resource(name, room, room, demand, shared.tolist())


def _met_on(uses: tuple[ClaimUse, ...], usable: list[Served], node: Node, i: int, capacity: bool) -> bool:
    here = [s.volume for s in usable if s.nodes[i]]
    if not here and not any(provisionable(u, node, capacity) for u in uses):
        return False
    return match_claims(uses, here, node, capacity=capacity) is not None


def capacity_points(uses: tuple[ClaimUse, ...], volumes: list[Volume], node: Node) -> int:
    """VolumeBinding.Score with StorageCapacityScoring's default shape: per storage class, 100 minus the percent
    of the storage the claims would use (the PVs matched on the node, summed; else, for provisioned claims whose
    driver tracks capacity, the node's CSIStorageCapacity's capacity); the classes' mean, rounded. 0 where the
    claims cannot be met or nothing is known of the storage's size."""
    chosen = match_claims(uses, volumes, node)
    if chosen is None:
        return 0
    ordered = sorted(uses, key=lambda u: u.request)
    per_class: dict[str, list[int]] = {}  # class -> [requested, capacity]
    if any(pv is not None for pv in chosen):  # static bindings: the PVs' capacity
        for use, pv in zip(ordered, chosen):
            if pv is not None:
                got = per_class.setdefault(use.storage_class, [0, 0])
                got[0], got[1] = got[0] + use.request, got[1] + pv.capacity
    else:
        for use in ordered:
            report = node_capacity(use, node)
            if not isinstance(report, bool):  # a provisioned claim whose capacity was checked
                got = per_class.setdefault(use.storage_class, [0, 0])
                got[0], got[1] = got[0] + use.request, report.capacity or 0
    if not per_class:
        return 0
    total = sum(_shape(requested, capacity) for requested, capacity in per_class.values())
    return int(total / len(per_class) + 0.5)


def _shape(requested: int, capacity: int) -> int:
    if capacity == 0 or requested > capacity:
        return 0
    return MAX_UTILIZATION - requested * MAX_UTILIZATION // capacity


KIND = VolumeBinding()
