"""DynamicResources: a pod's ResourceClaims (resource.k8s.io/v1) must be met on its node, devices allocated in
the batch's solve. A claim missing, not yet created from its template or being deleted keeps the pod pending
(PreFilter); an allocated claim's node selector restricts the nodes; the claims the pod allocates need devices
reachable from the node (Filter: the structured allocator, engine.dra, per class on each node). In the solver,
each node's free devices of a request's kind are a capacity row, so two pods of the batch never count on one
device; Reserve then allocates concretely, in placement order, and takes out a pod whose claims cannot be met
after all (requests that the rows only approximate: `firstAvailable`, `All`, devices reachable from several
nodes). A claim several pods of the batch share is allocated once, by the first of them; the others go where
its devices are (a colocation row with that pod, one node a domain) and Reserve checks they reach them."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

import numpy as np

from ..dra import Allocator, ClaimAllocation, allocation_results, taken_devices
from ..ir import NodeTerms
from ..model import Devices, Node, Pod, ResourceClaim, SubRequest
from ..rejections import Rejection, Rejections
from ..solve.problem import Colocation
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
        """Allocated claims' node selectors; the claims it allocates, and those it shares with the pod that
        allocates them, met on the node."""
        dra, index = spec.sample.dra, batch.index
        for terms in dra.allocated_terms:
            out.add(Rejection(self.name, (ERR_NOT_AVAILABLE,), resolvable=False),
                    ~index.matching_mask(NodeTerms(terms)))
        if dra.to_allocate or dra.follows:
            allocator, taken = self._allocator(batch)
            known = batch.cluster.devices.claims
            claims = claims_of(spec.sample, known) + [known[key] for key, _ in dra.follows]
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
        of that kind that only it reaches, and each class's devices of that kind per pod; pods following a
        shared claim's allocation stay with the pod that allocates it."""
        asks: dict[SubRequest, dict[int, int]] = defaultdict(lambda: defaultdict(int))
        claims = build.batch.cluster.devices.claims
        for a, info in build.checked():
            for claim in claims_of(info.sample, claims):
                for request in claim.requests:
                    if len(request.alternatives) == 1 and not request.alternatives[0].all:
                        sub = request.alternatives[0]
                        asks[SubRequest("", sub.device_class, sub.selectors, tolerations=sub.tolerations)][a] += sub.count
        _emit_followers(build)
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
        return any(info.sample.dra.to_allocate or info.sample.dra.follows for info in compiled.classes)

    def reserve(self, compiled: Compiled, placements: list[tuple[Pod, Node]],
                reserved: dict[str, dict[str, object]]) -> dict[str, str]:
        """Allocate each placed pod's claims on its node, in placement order (the pods that allocate a shared
        claim before those that follow it); the allocation goes into `reserved` (the binder writes it as
        upstream's PreBind does), a pod that cannot be served is returned."""
        devices = compiled.cluster.devices
        allocator, taken = Allocator(devices), taken_devices(devices)
        dropped: dict[str, str] = {}
        results: dict[str, ClaimAllocation] = {}
        ordered = [pn for pn in placements if not pn[0].dra.follows] + [pn for pn in placements if pn[0].dra.follows]
        for pod, node in ordered:
            if not pod.dra.to_allocate and not pod.dra.follows:
                continue
            why = _unfollowable(pod, node, results, devices)
            allocation = None if why else allocator.allocate(claims_of(pod, devices.claims), node, taken)
            if allocation is None:
                dropped[pod.key] = f"0/1 nodes are available: 1 {ERR_ALLOCATE}: {why or ERR_RESERVE}"
                continue
            mine = allocation_results(devices, allocation)
            results.update(mine)
            reserved.setdefault(pod.key, {})[self.name] = mine
        return dropped


def _unfollowable(pod: Pod, node: Node, results: dict[str, ClaimAllocation], devices: Devices) -> str:
    """Why `pod` cannot use, on `node`, the shared claims another placed pod of the batch allocated ("" if it can)."""
    by_key = {d.key: d for d in devices.devices} if pod.dra.follows else {}
    for claim, leader in pod.dra.follows:
        got = results.get(claim)
        if got is None:
            return f"its shared ResourceClaim {claim} was not allocated (pod {leader} was not placed)"
        if not all(by_key[d].reachable(node) for _, d in got.devices):
            return f"the devices of its shared ResourceClaim {claim} are not reachable from the node"
    return ""


def _emit_followers(build: ProblemBuilder) -> None:
    """A class following a shared claim goes only where a pod of the class allocating it goes (one node a
    domain), unless every device that could serve the claim is reachable from every node."""
    leaders: dict[str, int] = {}
    for a, info in enumerate(build.classes):
        for pod in info.pods:
            leaders[pod.key] = a
    allocator = Allocator(build.batch.cluster.devices) if any(i.sample.dra.follows for i in build.classes) else None
    for a, info in build.checked():
        for claim, leader in info.sample.dra.follows:
            if allocator is None or leader not in leaders or _anywhere(allocator, build.batch.cluster.devices.claims[claim]):
                continue
            build.problem.colocations.append(Colocation(
                build.partitions.each_node(), (a,), (leaders[leader],), seed_group=-1,
                why=f"shared ResourceClaim {claim} (allocated with pod {leader})"))
            build.followers.add(a)


def _anywhere(allocator: Allocator, claim: ResourceClaim) -> bool:
    """Every device that could serve the claim is reachable from every node (no allocation node selector)."""
    return all(d.node is None and d.node_terms is None for r in claim.requests for sub in r.alternatives
               for d in allocator.devices.devices if allocator.serves(d, sub))


def _room(allocator: Allocator, shape: SubRequest, nodes: list[Node], taken: set[str], unbounded: int) -> list[int]:
    """Per node: the free devices of `shape` reachable from it alone; unbounded where a device several nodes
    reach could serve (Reserve settles those)."""
    room = [0] * len(nodes)
    index = {n.name: i for i, n in enumerate(nodes)}
    for device in allocator.devices.devices:
        if device.key in taken or not allocator.serves(device, shape):
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
