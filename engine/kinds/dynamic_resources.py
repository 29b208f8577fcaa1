"""DynamicResources: a pod's ResourceClaims (resource.k8s.io/v1) must be met on its node, devices allocated in
the batch's solve. A claim missing, not yet created from its template, being deleted or being allocated for
another pod keeps the pod pending (PreFilter); an allocated claim's node selector restricts the nodes; the
claims the pod allocates need devices reachable from the node (Filter: the structured allocator, engine.dra,
per class on each node). In the solver, each node's free devices of a request's kind are a capacity row, so two
pods of the batch never count on one device; Reserve then allocates concretely, in placement order, and takes
out a pod whose claims cannot be met after all (requests that the rows only approximate: `firstAvailable`,
`All`, devices reachable from several nodes)."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

import numpy as np

from ..dra import Allocator, taken_devices
from ..ir import NodeTerms
from ..model import Node, Pod, ResourceClaim, SubRequest
from ..rejections import Rejection, Rejections
from .base import Action, ClusterEvent, Kind, Resource

if TYPE_CHECKING:
    from ..compile import Compiled
    from .context import Batch, ClassSpec, ProblemBuilder

ERR_ALLOCATE = "cannot allocate all claims"
ERR_NOT_AVAILABLE = "resourceclaim not available on the node"
ERR_RESERVE = "its ResourceClaims' devices went to other pods of this batch"


def claims_of(pod: Pod, batch_claims: dict[str, ResourceClaim]) -> list[ResourceClaim]:
    return [batch_claims[key] for key in pod.dra.to_allocate]


class DynamicResources(Kind):
    name = "DynamicResources"
    events = (ClusterEvent(Resource.RESOURCE_CLAIM, Action.ADD | Action.UPDATE),
              ClusterEvent(Resource.RESOURCE_SLICE, Action.ADD | Action.UPDATE),
              ClusterEvent(Resource.DEVICE_CLASS, Action.ADD | Action.UPDATE),
              ClusterEvent(Resource.POD, Action.DELETE),
              ClusterEvent(Resource.NODE, Action.ADD | Action.UPDATE_NODE_LABEL))

    def prefilter(self, spec: ClassSpec, batch: Batch) -> Rejection | None:
        blocked = spec.sample.dra.blocked
        return Rejection(self.name, (blocked,), resolvable=False) if blocked else None

    def filter(self, spec: ClassSpec, batch: Batch, out: Rejections) -> None:
        dra, index = spec.sample.dra, batch.index
        for terms in dra.allocated_terms:
            out.add(Rejection(self.name, (ERR_NOT_AVAILABLE,), resolvable=False),
                    ~index.matching_mask(NodeTerms(terms)))
        if dra.to_allocate:
            allocator, taken = self._allocator(batch)
            claims = claims_of(spec.sample, batch.cluster.devices.claims)
            met = np.fromiter((allocator.reaches(node) and allocator.allocate(claims, node, set(taken)) is not None
                               for node in index.nodes), dtype=bool, count=len(index.nodes))
            out.add(Rejection(self.name, (ERR_ALLOCATE,)), ~met)

    def _allocator(self, batch: Batch) -> tuple[Allocator, set[str]]:
        memo = batch.memo.setdefault(self.name, {})
        if "allocator" not in memo:
            memo["allocator"] = Allocator(batch.cluster.devices)
            memo["taken"] = taken_devices(batch.cluster.devices)
        return memo["allocator"], memo["taken"]

    def emit(self, build: ProblemBuilder) -> None:
        """Per kind of device asked for (a class and selectors, `exactly` requests): each node's free devices
        of that kind that only it reaches, and each class's devices of that kind per pod."""
        asks: dict[SubRequest, dict[int, int]] = defaultdict(lambda: defaultdict(int))
        claims = build.batch.cluster.devices.claims
        for a, info in build.checked():
            for claim in claims_of(info.sample, claims):
                for request in claim.requests:
                    if len(request.alternatives) == 1 and not request.alternatives[0].all:
                        sub = request.alternatives[0]
                        asks[SubRequest("", sub.device_class, sub.selectors)][a] += sub.count
        if not asks:
            return
        allocator, taken = self._allocator(build.batch)
        nodes = build.index.nodes
        for shape, per_class in asks.items():
            room = _room(allocator, shape, nodes, taken, sum(build.problem.classes[a].count * k
                                                             for a, k in per_class.items()) + 1)
            demand = [per_class.get(a, 0) for a in range(len(build.classes))]
            build.add_resource(f"devices: {shape.device_class}{_selectors(shape)}", room, room, demand)

    def reserving(self, compiled: Compiled) -> bool:
        return any(info.sample.dra.to_allocate for info in compiled.classes)

    def reserve(self, compiled: Compiled, placements: list[tuple[Pod, Node]],
                reserved: dict[str, dict[str, object]]) -> dict[str, str]:
        """Allocate each placed pod's claims on its node, in placement order; the allocation goes into
        `reserved` (the binder writes it as upstream's PreBind does), a pod that cannot be served is returned."""
        devices = compiled.cluster.devices
        allocator, taken = Allocator(devices), taken_devices(devices)
        dropped: dict[str, str] = {}
        for pod, node in placements:
            if not pod.dra.to_allocate:
                continue
            allocation = allocator.allocate(claims_of(pod, devices.claims), node, taken)
            if allocation is None:
                dropped[pod.key] = f"0/1 nodes are available: 1 {ERR_ALLOCATE}: {ERR_RESERVE}"
            else:
                reserved.setdefault(pod.key, {})[self.name] = allocation
        return dropped


def _room(allocator: Allocator, shape: SubRequest, nodes: list[Node], taken: set[str], unbounded: int) -> list[int]:
    """Per node: the free devices of `shape` reachable from it alone; unbounded where a device several nodes
    reach could serve (Reserve settles those)."""
    room = [0] * len(nodes)
    cls = allocator.devices.classes.get(shape.device_class)
    if cls is None:
        return room
    index = {n.name: i for i, n in enumerate(nodes)}
    for device in allocator.devices.devices:
        if device.key in taken or not allocator.selectors.matches(device, cls.selectors + shape.selectors):
            continue
        if device.node is not None:
            if device.node in index:
                room[index[device.node]] += 1
            continue
        for i, node in enumerate(nodes):
            if device.reachable(node):
                room[i] = unbounded
    return room


def _selectors(shape: SubRequest) -> str:
    return f" where {' && '.join(shape.selectors)}" if shape.selectors else ""


KIND = DynamicResources()
