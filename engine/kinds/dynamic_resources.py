"""DynamicResources: a pod's ResourceClaims (resource.k8s.io/v1) must be met on its node, devices allocated in
the batch's solve. A claim missing, not yet created from its template or being deleted keeps the pod pending
(PreFilter); an allocated claim's node selector restricts the nodes; the claims the pod allocates need devices
reachable from the node (Filter: the structured allocator, engine.devices.dra, per class on each node). In the solver,
each node's free devices of a request's kind are a capacity row, so two pods of the batch never count on one
device; Reserve then allocates concretely, in placement order, and takes out a pod whose claims cannot be met
after all (requests that the rows only approximate: `firstAvailable`, `All`, devices reachable from several
nodes). A claim several pods of the batch share is allocated once, by the first of them; the others go where
its devices are (a colocation row with that pod, one node a domain) and Reserve checks they reach them."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from functools import reduce
from itertools import combinations
from math import gcd
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from ..devices.dra import Allocator, ClaimAllocation, Shortfall, Unmet, allocation_results, claim_shapes, taken_devices
from ..devices.dra_capacity import consumed, shares_left
from ..devices.dra_counters import Counters
from ..devices.dra_domains import DeviceDomain, device_domain
from ..model.cluster import DEVICE_ROW, EXTENDED_CLAIM, Cluster, Device, Devices, Moment, Node, Pod, ResourceClaim, SubRequest
from ..model.ir import NodeTerms
from ..model.reasons import Code
from ..model.rejections import Rejection, Rejections
from ..solve.problem import Colocation, Limit
from ..time.dra_time import later_devices
from ..time.timeline import exempt, rfc3339, takes_from
from .base import Action, ClassFields, ClusterEvent, Emit, Filter, PreFilter, Requeue, ReserveAfterSolve, Resource

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping

    from ..devices.cel import CelError
    from ..model.view import View
    from ..planning.classes import ClassInfo
    from ..planning.compile import Compiled
    from .context import Batch, ClassSpec, ProblemBuilder

ERR_ALLOCATE = "cannot allocate all claims"
ERR_NOT_AVAILABLE = "resourceclaim not available on the node"
ERR_INVALID_POOLS = "invalid resource pools were encountered"  # upstream's allocator: a pool the node reaches is invalid
ERR_NO_CLASS = "request {request}: device class {device_class} does not exist"  # upstream's PreFilter
ERR_RESERVE = "its ResourceClaims' devices went to other pods of this batch"
T = TypeVar("T")
RESERVED = "reserved for"  # a row of the devices reservations leave: "<row> reserved for ml/train from <time>"


def claims_of(pod: Pod, batch_claims: dict[str, ResourceClaim]) -> list[ResourceClaim]:
    return [batch_claims[key] for key in pod.dra.to_allocate]


def _missing_class(pod: Pod, devices: Devices) -> SubRequest | None:
    """The first request (or firstAvailable alternative) of the claims the pod allocates or follows whose DeviceClass
    does not exist, as upstream's PreFilter checks them (not its extended resources' claim, made for classes that do)."""
    for key in (*pod.dra.to_allocate, *(k for k, _ in pod.dra.follows)):
        claim = devices.claims[key]
        if claim.name.startswith(EXTENDED_CLAIM):
            continue
        for sub in (sub for request in claim.requests for sub in request.alternatives):
            if sub.device_class not in devices.classes:
                return sub
    return None


class DynamicResources(ClassFields, PreFilter, Filter, Emit, Requeue, ReserveAfterSolve):
    name, code = "DynamicResources", Code.DEVICE
    events = (ClusterEvent(Resource.RESOURCE_CLAIM, Action.ADD | Action.UPDATE),
              ClusterEvent(Resource.RESOURCE_SLICE, Action.ADD | Action.UPDATE),
              ClusterEvent(Resource.DEVICE_CLASS, Action.ADD | Action.UPDATE),
              ClusterEvent(Resource.POD, Action.DELETE),
              ClusterEvent(Resource.NODE, Action.ADD | Action.UPDATE_NODE_LABEL))

    def class_fields(self, pod: Pod) -> tuple:
        return claim_shapes(pod)

    def class_fields_in(self, cluster: Cluster, moment: Moment, view: View) -> Callable[[Pod], tuple]:
        """Beside what its claims ask: which reservations holding devices a pod placed now keeps off (backfill)."""
        if moment.now is None or not any(r.claims for r in moment.reservations):
            return self.class_fields
        return lambda pod: (*claim_shapes(pod), keeps_off(moment, pod)) if pod.resource_claims else ()

    def prefilter(self, spec: ClassSpec, batch: Batch) -> Rejection | None:
        """A claim missing, not created yet or being deleted, or a request naming a DeviceClass that does not exist: the
        pod is refused with upstream's words (a DeviceClass being created wakes it: `events`)."""
        blocked = spec.sample.dra.blocked
        if blocked:
            return Rejection(self.name, (blocked,), resolvable=False, code=Code.INVALID_OBJECT)
        if (missing := _missing_class(spec.sample, batch.cluster.devices)) is not None:
            return Rejection(self.name, (ERR_NO_CLASS.format(request=missing.name, device_class=missing.device_class),),
                             resolvable=False, code=Code.INVALID_OBJECT)
        return None

    def filter(self, spec: ClassSpec, batch: Batch, out: Rejections) -> None:
        """Allocated claims' node selectors; the claims it allocates, and those it shares with the pod that
        allocates them, met on the node. As upstream's allocator, only the nodes every earlier filter passed are
        tried, and so only the devices they reach meet the claims' selectors: a selector that fails on one of those
        (a CEL runtime error) refuses the pod with upstream's words, an error; one that would fail on a device no
        such node reaches (another team's devices, without the attribute it reads) is never evaluated."""
        dra, view = spec.sample.dra, batch.view
        for terms in dra.allocated_terms:
            out.add(Rejection(self.name, (ERR_NOT_AVAILABLE,), resolvable=False),
                    ~view.matching_mask(NodeTerms(terms)))
        if not (dra.to_allocate or dra.follows):
            return
        off = keeps_off(batch.moment, spec.sample)
        allocator, taken = self._allocator(batch, off, _fence_of(batch.cluster, spec.sample))
        known = batch.cluster.devices.claims
        claims = claims_of(spec.sample, known) + [known[key] for key, _ in dra.follows]
        alive = np.flatnonzero(~out.rejected())
        error = self._selector_error(claims, allocator, [view.nodes[i] for i in alive.tolist()], batch)
        if error:
            out.add(Rejection(self.name, (error,), resolvable=False, error=True), alive)
            return
        met = np.zeros(len(view.nodes), dtype=bool)
        met[alive] = per_kind_of_node(allocator, taken, [view.nodes[i] for i in alive.tolist()], lambda node: (
            allocator.reaches(node) and allocator.allocate(claims, node, set(taken)) is not None))
        if off:  # nodes refused only for the devices reservations hold there: the reason names them
            plain, free = self._allocator(batch, (), allocator.fence.attribute if allocator.fence else None)
            kept = np.zeros(len(view.nodes), dtype=bool)
            for i in np.flatnonzero(~met[alive]).tolist():
                node = view.nodes[alive[i]]
                kept[alive[i]] = plain.reaches(node) and plain.allocate(claims, node, set(free)) is not None
            held = batch.moment.reservations
            out.add(Rejection(self.name, (f"{ERR_ALLOCATE}: devices {RESERVED} " + " and ".join(
                f"{held[k].holder} from {rfc3339(held[k].start)}" for k in off),)), kept)
            met |= kept
        unmet: dict[tuple[str, bool], list[int]] = defaultdict(list)
        left = alive[~met[alive]].tolist()
        for i, found in zip(left, per_kind_of_node(allocator, taken, [view.nodes[i] for i in left], lambda node: (
                self._why_not(batch, off, allocator, claims, node, taken)))):
            unmet[found].append(i)
        for (why, resolvable), nodes in unmet.items():
            out.add(Rejection(self.name, (why,), resolvable=resolvable), nodes)

    def _why_not(self, batch: Batch, off: tuple[int, ...], allocator: Allocator, claims: list[ResourceClaim],
                 node: Node, taken: set[str]) -> tuple[str, bool]:
        """`_why_not`, naming the gang's device attribute where it is what keeps the claims off the node (they
        could be met there with devices of another value, or without one)."""
        why = _why_not(allocator, claims, node, taken)
        fence = allocator.fence
        if fence is None:
            return why
        plain, _ = self._allocator(batch, off)
        if not (plain.reaches(node) and plain.allocate(claims, node, set(taken)) is not None):
            return why
        value = fence.node_value(node)
        where = (f"its gang's members take only the node's devices in value {value!r} of device attribute "
                 f"{fence.attribute}" if value else
                 f"no device on the node carries its gang's device attribute {fence.attribute}")
        return f"{ERR_ALLOCATE} ({where})", why[1]

    def _selector_error(self, claims: list[ResourceClaim], allocator: Allocator, nodes: list[Node],
                        batch: Batch) -> str:
        """The first selector error of `claims` on the devices `nodes` reach, in device order, in upstream's words
        ("" if none); each (request's kind, device) judged once per batch."""
        reached = _reached(allocator, nodes)
        if not reached:
            return ""
        judged = batch.memo.setdefault(self.name, {}).setdefault("judged", {})
        for claim in claims:
            for sub in (s for request in claim.requests for s in request.alternatives):
                shape = (sub.device_class, sub.selectors, sub.tolerations)
                for device in allocator.devices.devices:
                    if device.key not in reached:
                        continue
                    if (shape, device.key) not in judged:
                        judged[(shape, device.key)] = _error_on(allocator, device, sub)
                    if (error := judged[(shape, device.key)]) is not None:
                        return error.words(claim.key)
        return ""

    def _allocator(self, batch: Batch, off: tuple[int, ...] = (), fence: str | None = None) -> tuple[Allocator, set[str]]:
        """The batch's allocator and the devices taken; with `off`, the reservations (by position) whose devices a
        class keeps off taken too (what they consume known to the allocator); with `fence`, a gang's device
        attribute, one that offers a member on each node only the devices of the node's value of it."""
        memo = batch.memo.setdefault(self.name, {})
        if fence is not None:
            if (off, fence) not in memo:
                base, taken = self._allocator(batch, off)
                fenced = Allocator(base.devices, base.selectors)
                fenced.fence = device_domain(batch.memo, batch.cluster.devices, fence)
                memo[(off, fence)] = (fenced, taken)
            return memo[(off, fence)]
        if "allocator" not in memo:
            memo["allocator"] = Allocator(batch.cluster.devices)
            memo["taken"] = taken_devices(batch.cluster.devices)
        if not off:
            return memo["allocator"], memo["taken"]
        if off not in memo:
            claims = [c for k in off for c in batch.moment.reservations[k].claims]
            held = later_devices(batch.cluster.devices, (), claims)
            memo[off] = (Allocator(held, memo["allocator"].selectors),
                         memo["taken"] | taken_devices(Devices(claims={c.key: c for c in claims})))
        return memo[off]

    def emit(self, build: ProblemBuilder) -> None:
        """Per kind of device asked for (a class and selectors, `exactly` requests): each node's free devices
        of that kind that only it reaches, and each class's devices of that kind per pod; pods following a
        shared claim's allocation stay with the pod that allocates it. Where reservations hold devices, the
        same rows once more over the devices they leave, for the classes keeping off them (backfill)."""
        asks, askers = _asks(build)
        _emit_followers(build)
        if not asks:
            return
        allocator, taken = self._allocator(build.batch)
        rows = _device_rows(build, asks, askers, allocator, taken)
        for row in rows:
            build.add_resource(row.name, row.room, row.room, row.demand, row.unlimited)
            if row.unbounded:
                _cluster_limit(build, row.name, row.room, row.demand, row.unbounded)
        plain = {row.name: row.room for row in rows}
        reservations = build.batch.moment.reservations
        offs = [keeps_off(build.batch.moment, info.sample) for info in build.classes]
        for off in sorted({o for o in offs if o}):
            counted = {a for a, o in enumerate(offs) if set(off) <= set(o)}
            mine = {shape: kept for shape, per in asks.items() if (kept := {a: n for a, n in per.items() if a in counted})}
            held = " and ".join(f"{reservations[k].holder} from {rfc3339(reservations[k].start)}" for k in off)
            for row in _device_rows(build, mine, askers, *self._allocator(build.batch, off)):
                if row.room != plain.get(row.name):
                    build.add_resource(f"{row.name} {RESERVED} {held}", row.room, row.room, row.demand, row.unlimited)

    def reserving(self, compiled: Compiled) -> bool:
        return any(info.sample.dra.to_allocate or info.sample.dra.follows for info in compiled.classes)

    def reserve(self, compiled: Compiled, placements: list[tuple[Pod, Node]],
                reserved: dict[str, dict[str, object]]) -> dict[str, str]:
        """Allocate each placed pod's claims on its node, in placement order (the pods that allocate a shared
        claim before those that follow it); the allocation goes into `reserved` (the binder writes it as
        upstream's PreBind does), a pod that cannot be served is returned."""
        devices = compiled.cluster.devices
        reservations = compiled.moment.reservations
        held = [c for r in reservations for c in r.claims]
        allocator, taken = Allocator(later_devices(devices, (), held) if held else devices), taken_devices(devices)
        dropped: dict[str, str] = {}
        results: dict[str, ClaimAllocation] = {}
        fence = _fences(compiled.cluster)
        for pod, node in _reserve_order(allocator, placements, fence, taken):
            if not pod.dra.to_allocate and not pod.dra.follows:
                continue
            allocator.fence = fence(pod)  # a gang's device attribute: only devices of the node's value
            why = _unfollowable(pod, node, results, devices)
            off = taken_devices(Devices(claims={c.key: c for k in keeps_off(compiled.moment, pod)
                                                for c in reservations[k].claims})) - taken if held else set()
            trial = taken | off
            allocator.preferred = frozenset(d for r in reservations if r.holder in (pod.key, pod.gang)
                                            for c in r.claims for d in c.allocated or ())  # its own, kept for it
            allocation = None if why else allocator.allocate(claims_of(pod, devices.claims), node, trial)
            taken.update(trial - off)
            if allocation is None:
                dropped[pod.key] = (f"0/1 nodes are available: 1 {ERR_ALLOCATE}: {why}" if why else
                                    f"node {node.name} was planned for it, but it {ERR_ALLOCATE} there: {ERR_RESERVE}")
                continue
            mine = allocation_results(allocator, allocation, node.name)
            results.update(mine)
            reserved.setdefault(pod.key, {})[self.name] = mine
        return dropped


def devices_alike(allocator: Allocator, node: Node, taken: set[str]) -> tuple | None:
    """What the allocator's verdict on `node` reads of it, without device names: the devices only it reaches, each's
    driver, attributes, capacity, policies, taints, whether it is usable, taken, and its shares' amounts (selectors
    never see a device's name, nor its pool's). Nodes alike here get one verdict (a cluster of a few node types asks
    the allocator a few times, not once a node). None where names can matter: devices several nodes reach, a gang's
    fence, shared counters, binding conditions, devices preferred or contested (Reserve's)."""
    if allocator.roaming or allocator.fence is not None or allocator.preferred or allocator.contested:
        return None
    out = []
    for d in allocator.pinned.get(node.name, ()):
        if d.consumes or d.binding_conditions:
            return None
        shares = tuple(sorted(allocator.used_shares(d, taken))) if d.multiple else ()
        out.append((d.driver, d.attributes, d.capacity, d.multiple, d.policies, d.taints, d.key in taken, shares,
                    allocator.counters.usable(d)))
    return tuple(out)


def per_kind_of_node(allocator: Allocator, taken: set[str], nodes: list[Node], ask: Callable[[Node], T]) -> list[T]:
    """`ask` of each node, asked once per kind of node state (`devices_alike`): the allocator's verdicts and reasons
    read nothing else of a node."""
    seen: dict[tuple, T] = {}
    out = []
    states = allocator.alike.setdefault(id(taken), (taken, {}))[1]  # a node's state once per allocator and `taken`
    for node in nodes:
        if node.name not in states:
            states[node.name] = devices_alike(allocator, node, taken)
        state = states[node.name]
        if state is None:
            out.append(ask(node))
            continue
        if state not in seen:
            seen[state] = ask(node)
        out.append(seen[state])
    return out


def _why_not(allocator: Allocator, claims: list[ResourceClaim], node: Node, taken: set[str]) -> tuple[str, bool]:
    """Why the claims cannot be allocated on `node`, and whether evicting pods could ever help there: upstream's words
    ("invalid resource pools were encountered" when a pool the node reaches is invalid, else "cannot allocate all
    claims"), told apart by the first request that cannot be met there even alone and where its devices ran short
    (devices the node lacks, the selectors exclude, lack capacity, carry taints, or are in use)."""
    if allocator.invalid_near(node):
        return ERR_INVALID_POOLS, False
    unmet = allocator.unmet(claims, node, taken)
    if unmet is None:  # each request could be met alone: only together they cannot
        return ERR_ALLOCATE, True
    return f"{ERR_ALLOCATE} ({_shortfall(unmet)})", unmet.shortfall is Shortfall.IN_USE


def _shortfall(unmet: Unmet) -> str:
    """Where a request's devices on a node ran short, in words naming the request (as upstream's allocator: "request
    gpu", "request gpu/a100" for a firstAvailable alternative) and its device class, never a claim (the pods of a
    class each have their own)."""
    cls = f"device class {unmet.device_class}"
    words = {
        Shortfall.CLASS: (f"the node has no device of {cls}", f"the node has too few devices of {cls}"),
        Shortfall.SELECTORS: (f"its selectors exclude every device of {cls} on the node",
                              f"its selectors leave too few devices of {cls} on the node"),
        Shortfall.CAPACITY: ("no device it selects on the node has the capacity it asks for",
                             "too few devices it selects on the node have the capacity it asks for"),
        Shortfall.TAINTS: ("every device it selects on the node has a taint it does not tolerate",
                           "too many devices it selects on the node have a taint it does not tolerate"),
        Shortfall.IN_USE: ("every device it selects on the node is in use by other claims",
                           "some devices it selects on the node are in use by other claims" if unmet.all else
                           "too few devices it selects on the node are free, the others are in use by other claims"),
    }[unmet.shortfall]
    asked = " (all devices)" if unmet.all else f" ({unmet.count} devices)" if unmet.count > 1 else ""
    return f"request {unmet.request}{asked}: {words[unmet.some]}"


@dataclass(frozen=True, slots=True)
class DeviceRow:
    """A capacity row of devices: each node's room, each class's demand per pod, the nodes whose room stands for
    "more than the batch can use"; `unbounded`: that amount, for a row of devices counted (the cluster-wide limit)."""

    name: str
    room: list[int]
    demand: list[int]
    unlimited: list[bool]
    unbounded: int = 0


def keeps_off(moment: Moment, pod: Pod) -> tuple[int, ...]:
    """The reservations holding devices (by position) whose devices a pod placed now must keep off: those it takes
    from (engine.time.timeline.takes_from: it would still run at their starts, and they are not its own or after it)."""
    now, held = moment.now, moment.reservations
    if now is None or not pod.resource_claims:
        return ()
    return tuple(k for k, r in enumerate(held) if r.claims and takes_from(r, exempt(held, k), pod, now))


def _asks(build: ProblemBuilder) -> tuple[dict[SubRequest, dict[int, int]], dict[SubRequest, dict[str, None]]]:
    """Per kind of device asked for (`exactly` requests), how many each class asks per pod, and the requests asking
    for it, in order."""
    asks: dict[SubRequest, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    askers: dict[SubRequest, dict[str, None]] = defaultdict(dict)
    claims = build.batch.cluster.devices.claims
    for a, info in _judged(build):
        fence = _fence_of(build.batch.cluster, info.sample)  # a gang's device attribute: a kind of its own
        for claim in claims_of(info.sample, claims):
            for request in claim.requests:
                if len(request.alternatives) == 1 and not request.alternatives[0].all \
                        and not request.alternatives[0].admin:  # admin access holds no device
                    sub = request.alternatives[0]
                    shape = SubRequest(f"{FENCE}{fence}" if fence else "", sub.device_class, sub.selectors,
                                       tolerations=sub.tolerations, capacity=sub.capacity)
                    asks[shape][a] += sub.count
                    askers[shape][f"claim {claim.key} request {request.name}"] = None
    return asks, askers


def _device_rows(build: ProblemBuilder, asks: dict[SubRequest, dict[int, int]],
                 askers: dict[SubRequest, dict[str, None]], allocator: Allocator, taken: set[str]) -> list[DeviceRow]:
    """The rows for `asks` over the devices free beside `taken`: free devices per kind (and union of kinds that
    share devices), partitionable devices' shared counters, consumable capacity."""
    nodes = build.view.nodes
    where = {n.name: i for i, n in enumerate(nodes)}
    by_name = {n.name: n for n in nodes}
    fences = {shape: device_domain(build.batch.memo, build.batch.cluster.devices, shape.name.removeprefix(FENCE))
              for shape in asks if shape.name}
    free = {shape: [d for d in allocator.devices.devices if allocator.free(d, shape, taken)
                    and _serves(allocator, d, shape) and (shape not in fences or fences[shape].may_serve(d, by_name))]
            for shape in asks}
    rows: list[DeviceRow] = []
    for group in _rows(list(asks), free):
        devices = list({d.key: d for shape in group for d in free[shape]}.values())
        per_class = [sum(asks[shape].get(a, 0) for shape in group) for a in range(len(build.classes))]
        unbounded = sum(build.problem.classes[a].count * k for a, k in enumerate(per_class)) + 1
        room, shared = _room(devices, nodes, where, unbounded, allocator, taken, group)
        rows.append(DeviceRow(DEVICE_ROW + _union_name([_kind_name(shape, list(askers[shape])) for shape in group]),
                              room, per_class, shared, unbounded))
    return rows + _counter_rows(build, asks, free, allocator, taken) + _capacity_rows(build, asks, free, allocator, taken)


def _counter_rows(build: ProblemBuilder, asks: dict[SubRequest, dict[int, int]], free: dict[SubRequest, list[Device]],
                  allocator: Allocator, taken: set[str]) -> list[DeviceRow]:
    """Partitionable devices: per counter name (`memory`), each node's free amount of it in the counter sets its
    devices consume, and each class's least use of it per pod (its kinds' smallest consumer, times the count), so
    that pods of different kinds (a whole GPU, its halves) never count on one physical device twice. A relaxation:
    Reserve allocates exactly."""
    counters = allocator.counters
    names = sorted({name for shape in asks for d in free[shape] for _, name, _ in d.consumes} - {""})
    nodes = build.view.nodes
    where = {n.name: i for i, n in enumerate(nodes)}
    rows: list[DeviceRow] = []
    for counter in names:
        demand = [0] * len(build.classes)
        for shape, per_class in asks.items():
            least = min((sum(m for _, n, m in d.consumes if n == counter) for d in free[shape]), default=0)
            for a, count in per_class.items():
                demand[a] += least * count
        if not any(demand):
            continue
        room, unlimited = _counter_room(counters, counter, [d for shape in asks for d in free[shape]], nodes, where, taken)
        scale = reduce(gcd, [*demand, *room])
        most = sum(build.problem.classes[a].count * d for a, d in enumerate(demand)) // scale + 1
        row = [most if u else r // scale for r, u in zip(room, unlimited)]
        rows.append(DeviceRow(f"{DEVICE_ROW}shared counter {counter}", row, [d // scale for d in demand], unlimited))
    return rows


def _capacity_rows(build: ProblemBuilder, asks: dict[SubRequest, dict[int, int]], free: dict[SubRequest, list[Device]],
                   allocator: Allocator, taken: set[str]) -> list[DeviceRow]:
    """Consumable capacity: per capacity of devices allowing multiple allocations (`memory`), each node's free
    amount of it on such devices only it reaches, and each class's least use of it per pod (0 where its kind has
    a device not shared, which the count rows hold), so that pods of different kinds never share past a device's
    capacity. A relaxation: Reserve allocates exactly."""
    names = sorted({(domain, name) for shape in asks for d in free[shape] if d.multiple
                    for domain, name, _ in d.capacity})
    nodes = build.view.nodes
    where = {n.name: i for i, n in enumerate(nodes)}
    rows: list[DeviceRow] = []
    for capacity in names:
        demand = [0] * len(build.classes)
        for shape, per_class in asks.items():
            least = min((_use(d, shape, capacity) for d in free[shape]), default=0)
            for a, count in per_class.items():
                demand[a] += least * count
        if not any(demand):
            continue
        room, unlimited = [0] * len(nodes), [False] * len(nodes)
        for device in {d.key: d for shape in asks for d in free[shape] if d.multiple}.values():
            left = {(dm, n): v for dm, n, v in device.capacity}.get(capacity, 0) - sum(
                m for share in allocator.used_shares(device, taken) for dm, n, m in share if (dm, n) == capacity)
            if device.node is not None:
                if device.node in where:
                    room[where[device.node]] += max(0, left)
                continue
            for i, node in enumerate(nodes):
                unlimited[i] = unlimited[i] or device.reachable(node)
        scale = reduce(gcd, [*demand, *room])
        most = sum(build.problem.classes[a].count * d for a, d in enumerate(demand)) // scale + 1
        row = [most if u else r // scale for r, u in zip(room, unlimited)]
        rows.append(DeviceRow(f"{DEVICE_ROW}capacity {'/'.join(capacity)}", row, [d // scale for d in demand],
                              unlimited))
    return rows


def _use(device: Device, shape: SubRequest, capacity: tuple[str, str]) -> int:
    """What one allocation of `shape` consumes of a shared device's `capacity` (0: a device not shared)."""
    amount = consumed(device, shape) if device.multiple else None
    return next((m for dm, n, m in amount or () if (dm, n) == capacity), 0)


def _counter_room(counters: Counters, counter: str, devices: list[Device], nodes: list[Node], where: dict[str, int],
                  taken: set[str]) -> tuple[list[int], list[bool]]:
    """Per node, what is free of `counter` in the counter sets the devices only it reaches consume; unlimited where
    a device several nodes reach consumes it."""
    sets: dict[int, set[tuple[str, str]]] = defaultdict(set)
    unlimited = [False] * len(nodes)
    for device in devices:
        used = {(device.pool_key, s) for s, n, _ in device.consumes if n == counter}
        if not used:
            continue
        if device.node is not None:
            if device.node in where:
                sets[where[device.node]] |= used
            continue
        for i, node in enumerate(nodes):
            unlimited[i] = unlimited[i] or device.reachable(node)
    free: dict[str, dict[tuple[str, str], int]] = {}
    room = [0] * len(nodes)
    for i, found in sets.items():
        for pool, counter_set in found:
            if pool not in free:
                free[pool] = counters.free(pool, taken)
            room[i] += max(0, free[pool].get((counter_set, counter), 0))
    return room, unlimited


def _cluster_limit(build: ProblemBuilder, name: str, room: list[int], per_class: list[int], unbounded: int) -> None:
    """The same row summed over the cluster, where every class asking for it asks alike (d devices a pod): at
    most (free devices // d) such pods in all. Implied by the per-node rows, but CP-SAT's bound sees it only so
    (GPU gangs: 6.5 gangs fit by the sum of the nodes' rows, 6 in fact; without it, the plan is optimal and
    unproven until the time limit)."""
    asked = {d for d in per_class if d}
    if len(asked) != 1 or unbounded in room:
        return
    (each,) = asked
    counted = tuple(a for a, d in enumerate(per_class) if d)
    most = sum(room) // each
    if most >= sum(build.problem.classes[a].count for a in counted):
        return
    whole = build.partitions.whole()
    for a in counted:
        build.problem.limits.append(Limit(whole, a, counted, {}, most, why=f"the cluster has {sum(room)} free {name}"))


def _reserve_order(allocator: Allocator, placements: list[tuple[Pod, Node]],
                   fence: Callable[[Pod], DeviceDomain | None], taken: set[str]) -> list[tuple[Pod, Node]]:
    """Pods allocating before those following their shared claims; among them, the pods with the fewest
    devices to choose from beside those `taken` first, and each taking the devices fewest pods could use (the rows
    hold every set of kinds to their devices, so a matching exists; first come, first served could miss it). A
    device allowing multiple allocations is a choice only where its free capacity takes the request: a whole GPU
    a share already uses is none for a pod asking for it whole."""
    claims = allocator.devices.claims
    choice: dict[str, set[str]] = {}
    for pod, node in placements:
        allocator.fence = fence(pod)
        subs = [sub for key in pod.dra.to_allocate for r in claims[key].requests for sub in r.alternatives]
        choice[pod.key] = {d.key for sub in subs for d in allocator.candidates(sub, node, taken) or ()}
    for keys in choice.values():
        for key in keys:
            allocator.contested[key] = allocator.contested.get(key, 0) + 1
    allocator.fence = None
    asked = {pod.key: _share_asked(pod, claims) for pod, _ in placements}
    return sorted(placements, key=lambda pn: (bool(pn[0].dra.follows), len(choice[pn[0].key]), -asked[pn[0].key]))


WHOLE = 1 << 62  # a request asking no capacity of a device: the whole device, larger than any share


def _share_asked(pod: Pod, claims: Mapping[str, ResourceClaim]) -> int:
    """How much of a device the pod's requests ask for at most (a whole device: WHOLE): on ties, larger shares are
    served first, as first-fit decreasing packs bins (shares of mixed sizes the batch's rows counted per node)."""
    return max((sum(amount for _, amount in sub.capacity) or WHOLE for key in pod.dra.to_allocate
                for r in claims[key].requests for sub in r.alternatives), default=0)


def _fence_of(cluster: Cluster, pod: Pod) -> str | None:
    """The device attribute the pod's gang keeps its members' devices in one value of (None: none)."""
    gang = cluster.gangs.get(pod.gang) if pod.gang is not None else None
    return None if gang is None else gang.device_within


def _fences(cluster: Cluster) -> Callable[[Pod], DeviceDomain | None]:
    """Each pod's gang's device domain (engine.devices.dra_domains), worked out once per attribute."""
    memo: dict = {}

    def fence(pod: Pod) -> DeviceDomain | None:
        attribute = _fence_of(cluster, pod)
        return None if attribute is None else device_domain(memo, cluster.devices, attribute)
    return fence


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


def _judged(build: ProblemBuilder) -> Iterator[tuple[int, ClassInfo]]:
    """The checked classes whose claims' selectors judged every device their nodes reach without an error (the
    others are refused with the error at Filter, and their selectors are not met again)."""
    return ((a, info) for a, info in build.checked() if not info.rejected.erred)


def _reached(allocator: Allocator, nodes: list[Node]) -> set[str]:
    """The keys of the devices some node of `nodes` reaches."""
    out = {d.key for node in nodes for d in allocator.pinned.get(node.name, ())}
    out.update(d.key for d in allocator.roaming if any(d.reachable(node) for node in nodes))
    return out


def _error_on(allocator: Allocator, device: Device, sub: SubRequest) -> CelError | None:
    """The CEL error meeting `sub`'s selectors (its class's, then its own) on `device`, if any."""
    from ..devices.cel import CelError
    try:
        allocator.serves(device, sub)
    except CelError as exc:
        return exc
    return None


def _serves(allocator: Allocator, device: Device, sub: SubRequest) -> bool:
    """`allocator.serves`, a selector's error taken as no: the batch-wide rows meet devices that no node of the
    classes asking reaches, where a selector was never judged (`DynamicResources.filter`)."""
    from ..devices.cel import CelError
    try:
        return allocator.serves(device, sub)
    except CelError:
        return False


def _emit_followers(build: ProblemBuilder) -> None:
    """A class following a shared claim goes only where a pod of the class allocating it goes (one node a
    domain), unless every device that could serve the claim is reachable from every node."""
    if not any(info.sample.dra.follows for info in build.classes):
        return
    leaders = {pod.key: a for a, info in enumerate(build.classes) if info.sample.dra.shared for pod in info.pods}
    allocator = Allocator(build.batch.cluster.devices)
    for a, info in _judged(build):
        for claim, leader in info.sample.dra.follows:
            if leader not in leaders or _anywhere(allocator, build.batch.cluster.devices.claims[claim]):
                continue
            build.problem.colocations.append(Colocation(
                build.partitions.each_node(), (a,), (leaders[leader],), seed_group=-1,
                why=f"shared ResourceClaim {claim} (allocated with pod {leader})"))
            build.followers.add(a)


def _anywhere(allocator: Allocator, claim: ResourceClaim) -> bool:
    """Every device that could serve the claim is reachable from every node (no allocation node selector)."""
    return all(d.node is None and d.node_terms is None for r in claim.requests for sub in r.alternatives
               for d in allocator.devices.devices if _serves(allocator, d, sub))


MAX_OVERLAPPING = 5  # kinds of device whose free devices overlap, all of whose unions get a row (2^k - 1 rows)


def _rows(shapes: list[SubRequest], free: dict[SubRequest, list[Device]]) -> list[tuple[SubRequest, ...]]:
    """The kinds of device each capacity row counts: each kind alone, and, where kinds share devices (an h100
    is both "an h100" and "a GPU of 40Gi or more"), every union of kinds that share (Hall's condition: pods
    asking for those kinds need as many distinct devices as the union has, so no device counts twice). A
    larger tangle of overlapping kinds gets its whole union only; Reserve settles what that leaves."""
    keys = {shape: {d.key for d in free[shape]} for shape in shapes}
    out: list[tuple[SubRequest, ...]] = [(shape,) for shape in shapes]
    for part in _overlapping(shapes, keys):
        if len(part) > MAX_OVERLAPPING:
            out.append(tuple(part))
            continue
        out += [group for k in range(2, len(part) + 1) for group in combinations(part, k)
                if len(set().union(*(keys[s] for s in group))) < sum(len(keys[s]) for s in group)]
    return out


def _overlapping(shapes: list[SubRequest], keys: dict[SubRequest, set[str]]) -> list[list[SubRequest]]:
    """The kinds in groups of those that share some device (transitively), groups of two or more."""
    groups: list[tuple[list[SubRequest], set[str]]] = []
    for shape in shapes:
        joined = [g for g in groups if g[1] & keys[shape]]
        merged = ([shape] + [s for g in joined for s in g[0]], keys[shape].union(*(g[1] for g in joined)))
        groups = [g for g in groups if all(g is not j for j in joined)] + [merged]
    return [sorted(g[0], key=shapes.index) for g in groups if len(g[0]) > 1]


def _room(devices: list[Device], nodes: list[Node], where: dict[str, int], unbounded: int, allocator: Allocator,
          taken: set[str], shapes: tuple[SubRequest, ...]) -> tuple[list[int], list[bool]]:
    """Per node: how many of `devices` only it reaches can be in use at once (partitionable devices: within their
    pools' shared counters; a device allowing multiple allocations: as many shares as its free capacity holds);
    unbounded where a device several nodes reach could serve (Reserve settles those), and which nodes those are."""
    pinned: dict[int, list[Device]] = defaultdict(list)
    multiple = [0] * len(nodes)
    shared = [False] * len(nodes)
    for device in devices:
        if device.node is not None and device.multiple:
            if device.node in where:
                multiple[where[device.node]] += max(
                    (shares_left(device, amount, allocator.used_shares(device, taken), unbounded)
                     for shape in shapes if (amount := consumed(device, shape)) is not None), default=0)
            continue
        if device.node is not None:
            if device.node in where:
                pinned[where[device.node]].append(device)
            continue
        for i, node in enumerate(nodes):
            if device.reachable(node):
                shared[i] = True
    room = [min(unbounded, multiple[i] + (allocator.counters.most(pinned[i], taken) if i in pinned else 0))
            for i in range(len(nodes))]
    return [unbounded if s else r for r, s in zip(room, shared)], shared


def _kind_name(shape: SubRequest, askers: list[str]) -> str:
    """A kind of device in words: its DeviceClass by name, and where the requests add selectors or tolerations,
    the first request asking for it by claim and request name (never its CEL)."""
    within = f" within device attribute {shape.name.removeprefix(FENCE)}" if shape.name else ""
    asked = " asking " + ", ".join(f"{_milli_shown(v)} {name}" for name, v in shape.capacity) if shape.capacity else ""
    if not (shape.selectors or shape.tolerations):
        return shape.device_class + asked + within
    more = f" and {len(askers) - 1} more" if len(askers) > 1 else ""
    return f"{shape.device_class}{asked} for {askers[0]}{more}{within}"


def _union_name(names: list[str]) -> str:
    """Kinds that share devices, in words: each once, at most two named (shares of many sizes would fill a line)."""
    unique = list(dict.fromkeys(names))
    if len(unique) <= 2:
        return " or ".join(unique)
    return f"{unique[0]}, {unique[1]} or {len(unique) - 2} more kind(s)"


def _milli_shown(amount: int) -> str:
    """A capacity request (milli-units) in Kubernetes' notation: the largest binary unit that divides it (memory),
    else whole units bare, else with the `m` suffix."""
    if amount % 1000:
        return f"{amount}m"
    value = amount // 1000
    unit = next((f"{value // 1024 ** k}{suffix}" for k, suffix in ((4, "Ti"), (3, "Gi"), (2, "Mi"), (1, "Ki"))
                 if value and value % 1024 ** k == 0), None)
    return unit or str(value)


FENCE = "within "  # a kind of device asked for by a gang kept in one value of a device attribute: its shape's name


KIND = DynamicResources()
