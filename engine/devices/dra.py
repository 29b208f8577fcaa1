"""Dynamic Resource Allocation (resource.k8s.io/v1): which devices a pod's claims may get, and where. Pure.

Upstream's DynamicResources plugin allocates a pod's unallocated claims on each candidate node with the
structured allocator: a request takes `count` devices (or all of them) that satisfy its DeviceClass's and its
own CEL selectors, among devices reachable from the node and allocated to no other claim; `firstAvailable`
tries alternatives in order; `matchAttribute` makes the devices of the named requests agree on an attribute.
Here `Selectors` compiles each CEL expression once and judges each device once per snapshot, in Kubernetes'
environment for DRA selectors (engine.devices.cel, on Google's CEL runtime); a selector's error is raised, not taken
for "no"; `allocate` is the allocator for one pod's claims on one node; `pod_claims` says what each pending pod's
claims mean, once per snapshot (engine.reading.resolve puts it on the snapshot's copy of the pod).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from enum import IntEnum
from typing import TYPE_CHECKING, Any

from ..model.cluster import (
    DEVICE_CLASS_PREFIX,
    EXTENDED_CLAIM,
    Cluster,
    Device,
    DeviceClass,
    DeviceRequest,
    Devices,
    ExtendedRequest,
    Node,
    Pod,
    PodClaims,
    ResourceClaim,
    SubRequest,
    Taint,
    Toleration,
)
from ..model.queue_order import queue_order
from .dra_capacity import Consumed, consumed
from .dra_capacity import fits as capacity_fits
from .dra_counters import Counters

if TYPE_CHECKING:
    from .dra_domains import DeviceDomain

Allocation = dict[str, tuple[tuple[str, str], ...]]  # claim key -> ((request name, device key), ...)


@dataclass
class Selectors:
    """CEL selectors compiled once per expression and judged once per (device, expression), as Kubernetes
    evaluates them (engine.devices.cel). A device matches when every expression is true, judged in order up to the first
    false; an expression that does not compile, or fails on a device (a missing attribute, a non-bool result), is
    not a "no": `matches` raises it (engine.devices.cel.CompileError / EvaluationError, placed at its index), as upstream's
    allocator fails the claim rather than skip the device, and the caller words it (`CelError.words`). engine.devices.cel is
    imported on the first expression: snapshots without DRA never pay it."""

    programs: dict[str, Any] = field(default_factory=dict)  # expression -> engine.devices.cel.Program, or its CompileError
    verdicts: dict[tuple[str, str], Any] = field(default_factory=dict)  # (device, expression) -> bool or the error
    activations: dict[str, Any] = field(default_factory=dict)  # device key -> engine.devices.cel.device(device)

    def compile(self, expression: str) -> Any:
        """The compiled selector (engine.devices.cel.Program); raises engine.devices.cel.CompileError, remembered per
        expression."""
        if expression not in self.programs:
            from . import cel
            try:
                self.programs[expression] = cel.compile(expression)
            except cel.CompileError as exc:
                self.programs[expression] = exc
        found = self.programs[expression]
        if isinstance(found, BaseException):
            raise found
        return found

    def matches(self, device: Device, expressions: Iterable[str], device_class: str | None = None) -> bool:
        """Whether every expression selects `device` (upstream's selectorsMatch). Raises engine.devices.cel.CelError for
        the first expression that errs before one is false, placed: its index in `expressions`, its text and the
        DeviceClass it belongs to (None for a claim's own selectors)."""
        for index, expression in enumerate(expressions):
            verdict = self._one(device, expression)
            if not isinstance(verdict, bool):
                raise verdict.at(index, expression, device_class)
            if not verdict:
                return False
        return True

    def _one(self, device: Device, expression: str) -> Any:
        key = (device.key, expression)
        if key not in self.verdicts:
            from . import cel
            try:
                program = self.compile(expression)
                if device.key not in self.activations:
                    self.activations[device.key] = cel.device(device)
                self.verdicts[key] = program.matches(self.activations[device.key])
            except cel.CelError as exc:
                self.verdicts[key] = exc
        return self.verdicts[key]


class Shortfall(IntEnum):
    """Where a request's devices on a node ran short, in the order the allocator narrows them down (later: closer to
    fitting). Upstream's allocator says only that the claims cannot all be allocated; these tell the causes apart."""

    CLASS = 0  # too few devices of its DeviceClass reachable from the node
    SELECTORS = 1  # too few of those match the request's own selectors
    CAPACITY = 2  # too few of those have the capacity it asks for
    TAINTS = 3  # too few of those without a NoSchedule/NoExecute taint it does not tolerate
    IN_USE = 4  # too few of those free: the others are allocated to other claims (or their shared counters are)


@dataclass(frozen=True, slots=True)
class Unmet:
    """A request that cannot be met on a node even alone: the alternative whose devices got furthest, and whether
    some (too few) got past its shortfall or none did."""

    request: str  # the request's name, or request/subrequest (upstream's qualified name)
    device_class: str
    shortfall: Shortfall
    some: bool
    count: int = 1
    all: bool = False  # allocationMode All: every device it selects, none of them in use


@dataclass
class Allocator:
    """Upstream's structured allocator for one node at a time, over one snapshot's devices and classes."""

    devices: Devices
    selectors: Selectors = field(default_factory=Selectors)
    pinned: dict[str, list[Device]] = field(init=False)  # node name -> the devices only it reaches
    roaming: list[Device] = field(init=False)  # devices several nodes (a selector, or all) may reach
    contested: dict[str, int] = field(default_factory=dict)  # device key -> how many pods could use it: least first
    preferred: frozenset[str] = frozenset()  # devices tried first (those a reservation holds for the pod allocating)
    fence: DeviceDomain | None = None  # a gang's device attribute: on each node, only devices of the node's value
    counters: Counters = field(init=False)  # partitionable devices' shared counters
    # consumable capacity: each share of a device allowing multiple allocations, by its token in `taken`
    amounts: dict[str, Consumed] = field(default_factory=dict)  # share token -> what it consumes
    shares: dict[str, dict[str, None]] = field(default_factory=dict)  # device key -> its share tokens
    by_key: dict[str, Device] = field(init=False)
    # engine.kinds.dynamic_resources: each node's state (devices alike but for names) per set of taken devices (by id,
    # the set kept with it so that its id is never another's)
    alike: dict[int, tuple[set[str], dict[str, tuple | None]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.counters = Counters.of(self.devices)
        self.pinned, self.roaming = {}, []
        self.by_key = {d.key: d for d in self.devices.devices}
        for d in self.devices.devices:
            if d.node is not None:
                self.pinned.setdefault(d.node, []).append(d)
            else:
                self.roaming.append(d)
        for claim in self.devices.claims.values():
            if claim.allocated is not None:
                for i, (key, amount) in enumerate(claim.shares):
                    self.record_share(share_token(key, f"{claim.key}#{i}"), key, amount)

    def record_share(self, token: str, key: str, amount: Consumed) -> None:
        """One share of device `key`, standing as `token` in a set of taken devices, consumes `amount`."""
        self.amounts[token] = amount
        self.shares.setdefault(key, {})[token] = None

    def used_shares(self, device: Device, taken: set[str]) -> list[Consumed]:
        """What the device's shares in `taken` consume."""
        return [self.amounts[t] for t in self.shares.get(device.key, ()) if t in taken]

    def free(self, device: Device, sub: SubRequest, taken: set[str]) -> bool:
        """`device` may serve `sub` beside `taken`: not taken (a device allowing multiple allocations: with room
        for what `sub` consumes beside its shares), within its pool's counters, and fit for the capacity asked."""
        if sub.admin and not device.multiple:  # admin access: in use or not, once per claim
            return share_token(device.key, ADMIN) not in taken and self.counters.fits(device, taken)
        if device.multiple:
            amount = consumed(device, sub)
            shares = self.used_shares(device, taken)
            if device.key in taken and not shares:  # allocated whole (a result without a shareID): dedicated
                return False
            return amount is not None and capacity_fits(device, amount, shares) and self.counters.fits(device, taken)
        return (device.key not in taken and self.counters.fits(device, taken)
                and (not sub.capacity or consumed(device, sub) is not None))

    def left_after(self, device: Device, sub: SubRequest, taken: set[str]) -> int:
        """What of its capacities a device allowing multiple allocations has left once `sub`'s share is taken
        beside `taken`, summed (milli-units); 0 for any other device."""
        if not device.multiple or (amount := consumed(device, sub)) is None:
            return 0
        used = sum(m for share in self.used_shares(device, taken) for _, _, m in share)
        return sum(v for _, _, v in device.capacity) - used - sum(m for _, _, m in amount)

    def held(self, claim: str, picked: Iterable[tuple[str, str]], subs: dict[str, SubRequest]) -> set[str]:
        """What `picked` (request, device key) of `claim` adds to `taken`: each device's key, and for a device
        allowing multiple allocations a share token (what it consumes recorded)."""
        out = set()
        for request, key in picked:
            if subs[request].admin:  # held by no one: only the claim itself does not take the device twice
                out.add(share_token(key, ADMIN))
                continue
            out.add(key)
            device = self.by_key[key]
            if device.multiple and (amount := consumed(device, subs[request])) is not None:
                token = share_token(key, f"{claim}/{request}")
                self.record_share(token, key, amount)
                out.add(token)
        return out

    def share_of(self, claim: str, request: str, key: str) -> Consumed | None:
        """What the share `claim`'s `request` got of the device consumes (None: not a share)."""
        return self.amounts.get(share_token(key, f"{claim}/{request}"))

    def reaches(self, node: Node) -> bool:
        """Whether any device could serve a pod on `node` (nodes without one are rejected without allocating)."""
        if self.fence is not None:
            return bool(self.near(node))
        return node.name in self.pinned or any(d.reachable(node) for d in self.roaming)

    def candidates(self, sub: SubRequest, node: Node, taken: set[str]) -> list[Device] | None:
        """Free devices reachable from `node` that `sub` may take, each within its pool's counters beside `taken`
        (None: its DeviceClass does not exist)."""
        if sub.device_class not in self.devices.classes:
            return None
        return [d for d in self.near(node) if self.free(d, sub, taken) and self.serves(d, sub)]

    def near(self, node: Node) -> list[Device]:
        """The devices reachable from `node` (with a `fence`: those a gang's member there may take)."""
        found = self.pinned.get(node.name, []) + [d for d in self.roaming if d.reachable(node)]
        fence = self.fence
        return found if fence is None else [d for d in found if fence.allows(d, node)]

    def serves(self, device: Device, sub: SubRequest) -> bool:
        """`device` is of `sub`'s class, satisfies its selectors and the class's, has no taint it does not
        tolerate (NoSchedule, NoExecute), and its pool is valid (engine.devices.dra_counters)."""
        cls = self.devices.classes.get(sub.device_class)
        return (cls is not None and self.counters.usable(device) and not device.untolerated(sub.tolerations)
                and self.selectors.matches(device, cls.selectors, cls.name)
                and self.selectors.matches(device, sub.selectors))

    def unmet(self, claims: list[ResourceClaim], node: Node, taken: set[str]) -> Unmet | None:
        """The first request of `claims` (in order) that cannot be met on `node` beside `taken` even alone, told by
        the alternative that got furthest (the first such); None when each could be met alone (the claims fail only
        together: counts across requests, matchAttribute, shared counters)."""
        for claim in claims:
            for request in claim.requests:
                found = [self._unmet(sub, node, taken) for sub in request.alternatives]
                if all(f is not None for f in found):
                    return max((f for f in found if f is not None), key=lambda f: f.shortfall)
        return None

    def _unmet(self, sub: SubRequest, node: Node, taken: set[str]) -> Unmet | None:
        """How far `sub`'s devices on `node` get (None: far enough to be met alone)."""
        cls = self.devices.classes.get(sub.device_class)
        need = 1 if sub.all else sub.count
        stages: list[tuple[Shortfall, Callable[[Device], bool]]] = [
            (Shortfall.CLASS, lambda d: cls is not None and self.counters.usable(d)
             and self._selects(d, cls.selectors, cls.name)),
            (Shortfall.SELECTORS, lambda d: self._selects(d, sub.selectors)),
            (Shortfall.CAPACITY, lambda d: not (d.multiple or sub.capacity) or consumed(d, sub) is not None),
            (Shortfall.TAINTS, lambda d: not d.untolerated(sub.tolerations)),
            (Shortfall.IN_USE, lambda d: self.free(d, sub, taken))]
        left = self.near(node)
        for stage, keep in stages:
            kept = [d for d in left if keep(d)]
            if len(kept) < need or (sub.all and stage is Shortfall.IN_USE and len(kept) < len(left)):
                return Unmet(sub.name, sub.device_class, stage, bool(kept), sub.count, sub.all)
            left = kept
        return None

    def _selects(self, device: Device, expressions: tuple[str, ...], device_class: str | None = None) -> bool:
        """`selectors.matches`, an error taken as no (the filter reports selector errors before asking why not)."""
        from .cel import CelError
        try:
            return self.selectors.matches(device, expressions, device_class)
        except CelError:
            return False

    def invalid_near(self, node: Node) -> bool:
        """Some device reachable from `node` is in a pool upstream's allocator finds invalid (engine.devices.dra_counters)."""
        return any(not self.counters.usable(d) for d in self.near(node))

    def allocate(self, claims: list[ResourceClaim], node: Node, taken: set[str]) -> Allocation | None:
        """Devices for every request of every claim on `node`, none of them in `taken` (which gains them);
        None when the claims cannot all be met there (and `taken` is left as it was). Depth first over claims,
        requests and devices, as upstream's allocator: where one choice spoils a later request's or claim's,
        the earlier one's other choices are tried (PICK_STEPS steps at most)."""
        found = next(self._claims(claims, node, taken, [PICK_STEPS]), None)
        if found is None:
            return None
        out, mine = found
        taken.update(mine)
        return out

    def _claims(self, claims: list[ResourceClaim], node: Node, taken: set[str],
                budget: list[int]) -> Iterator[tuple[Allocation, set[str]]]:
        """Ways to meet every claim beside `taken`: (allocation, what it adds to `taken`), first found first."""
        if not claims:
            yield {}, set()
            return
        claim, rest = claims[0], claims[1:]
        for tried, got in enumerate(self._claim(claim, node, taken, budget)):
            mine = {t for t in self.held(claim.key, got, _subs(claim)) if not t.endswith(f"#{ADMIN}")}
            for after, more in self._claims(rest, node, taken | mine, budget):
                yield {claim.key: got, **after}, mine | more
            # choices only take devices away: if a later claim cannot be met even alone, no other choice helps
            if budget[0] <= 0 or (tried == 0 and not all(
                    next(self._claim(c, node, taken, budget), None) is not None for c in rest)):
                return

    def _claim(self, claim: ResourceClaim, node: Node, taken: set[str],
               budget: list[int]) -> Iterator[tuple[tuple[str, str], ...]]:
        """Ways to meet one claim: each request's alternatives in order, its devices agreeing on every
        matchAttribute (tried per value of the attribute)."""
        every = [q.name for q in claim.requests]
        bound: dict[str, set[str]] = {}  # attribute -> the requests that must agree on it
        for requests, attribute in claim.match_attributes:
            bound.setdefault(attribute, set()).update(requests or every)
        for values in self._attribute_choices(claim, node, taken):
            agree = [{a: v for a, v in values.items() if request.name in bound[a]} for request in claim.requests]
            for found in self._requests(claim, list(zip(claim.requests, agree)), node, set(taken), budget):
                yield tuple(found)
            if budget[0] <= 0:
                return

    def _requests(self, claim: ResourceClaim, requests: list[tuple[DeviceRequest, dict[str, object]]], node: Node,
                  used: set[str], budget: list[int]) -> Iterator[list[tuple[str, str]]]:
        if not requests:
            yield []
            return
        (request, agree), rest = requests[0], requests[1:]
        for tried, got in enumerate(self._request(request.alternatives, node, used, agree, budget)):
            for after in self._requests(claim, rest, node, used | self.held(claim.key, got, _subs(claim)), budget):
                yield got + after
            if budget[0] <= 0 or (tried == 0 and not all(
                    next(self._requests(claim, [r], node, used, budget), None) is not None for r in rest)):
                return

    def _attribute_choices(self, claim: ResourceClaim, node: Node, taken: set[str]) -> list[dict[str, object]]:
        """The attribute values to try for the claim's matchAttribute constraints ([{}] without any)."""
        choices: list[dict[str, object]] = [{}]
        for _, attribute in claim.match_attributes:
            domain, _, name = attribute.rpartition("/")
            seen = {_attribute(d, domain, name) for r in claim.requests for sub in r.alternatives
                    for d in self.candidates(sub, node, taken) or ()} - {None}
            choices = [{**c, attribute: v} for c in choices for v in sorted(seen, key=str)]
        return choices

    def _request(self, alternatives: tuple[SubRequest, ...], node: Node, used: set[str], agree: dict[str, object],
                 budget: list[int]) -> Iterator[list[tuple[str, str]]]:
        """The ways to serve one request, best first: its alternatives in order, and for each the devices
        (those `preferred`, then those contested by the fewest pods, then the smallest partitions, then of devices
        allowing multiple allocations the one the share leaves least free (best fit: idle ones are kept for
        requests that take a device whole), first)."""
        for sub in alternatives:
            found = sorted((d for d in self.candidates(sub, node, used) or ()
                            if all(_attribute(d, *a.rpartition("/")[::2]) == v for a, v in agree.items())),
                           key=lambda d: (bool(d.binding_conditions), d.key not in self.preferred,
                                          self.contested.get(d.key, 0),
                                          self.counters.share(d), self.left_after(d, sub, used)))
            if sub.all:  # every matching device, none of them taken, their counters all met at once, and no pool
                # the node reaches invalid or still being published (upstream cannot know what "all" is then)
                if (found and len(found) == len(self.candidates(sub, node, set()) or ())
                        and all(self.counters.usable(d) for d in self.near(node))):
                    for _ in self._picks(found, len(found), used, budget):
                        yield [(sub.name, d.key) for d in found]
                        break
            elif len(found) >= sub.count:
                for chosen in self._picks(found, sub.count, used, budget):
                    yield [(sub.name, d.key) for d in chosen]

    def _picks(self, found: list[Device], count: int, used: set[str], budget: list[int]) -> Iterator[list[Device]]:
        """Sets of `count` of `found`, in their order (the first `count` first), whose shared counters hold together
        beside `used`: depth first, each device tried spending one step of the budget."""
        chosen: list[Device] = []
        counted = any(d.consumes for d in found)

        def extend(start: int, in_use: set[str]) -> Iterator[list[Device]]:
            if len(chosen) == count:
                yield list(chosen)
                return
            for i in range(start, len(found) - (count - len(chosen)) + 1):
                budget[0] -= 1
                if budget[0] < 0:
                    return
                if not counted or self.counters.fits(found[i], in_use):
                    chosen.append(found[i])
                    yield from extend(i + 1, in_use | {found[i].key} if counted else in_use)
                    chosen.pop()

        yield from extend(0, set(used) if counted else used)


def share_token(key: str, owner: str) -> str:
    """How one share of a device allowing multiple allocations stands in a set of taken devices."""
    return f"{key}#{owner}"


def _subs(claim: ResourceClaim) -> dict[str, SubRequest]:
    return {sub.name: sub for request in claim.requests for sub in request.alternatives}


ADMIN = "admin"  # the share token's owner for a device an admin-access request of the claim being allocated took
PICK_STEPS = 10_000  # devices tried for one claim among partitionable devices before giving up


@dataclass(frozen=True, slots=True)
class ClaimAllocation:
    """What Reserve gives one claim, as upstream's allocator writes it into `status.allocation`: each request's
    devices, the nodes they are usable from (a node selector, None: every node) and the class's and the
    claim's configuration for the requests served."""

    devices: tuple[tuple[str, str], ...]  # (request, or request/subrequest, device key)
    node_selector: dict[str, Any] | None  # status.allocation.nodeSelector, in the API's form
    config: tuple[dict[str, Any], ...] = ()  # status.allocation.devices.config
    create: dict[str, Any] | None = None  # a pod's extended-resource claim not created yet: its spec
    mappings: tuple[tuple[str, str, str], ...] = ()  # then which request serves which container's resource
    shares: tuple[tuple[str, str, Consumed], ...] = ()  # (request, device key, consumedCapacity): shared devices
    admin: tuple[str, ...] = ()  # the requests (or subrequests) served with admin access
    binding: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = ()
    # devices with binding conditions: (device key, bindingConditions, bindingFailureConditions)
    tolerations: tuple[tuple[str, tuple[Toleration, ...]], ...] = ()  # (request served, its device tolerations)


def allocation_results(allocator: Allocator, allocation: Allocation, node: str) -> dict[str, ClaimAllocation]:
    """Each allocated claim's status.allocation content on `node` (upstream's allocator: devices, node selector,
    config, what each share of a device allowing multiple allocations consumes, the devices' binding conditions)."""
    devices = allocator.devices
    out = {}
    for key, picked in allocation.items():
        claim = devices.claims[key]
        chosen = [allocator.by_key[d] for _, d in picked]
        shares = tuple((r, d, amount) for r, d in picked if (amount := allocator.share_of(key, r, d)) is not None)
        binding = tuple((d.key, d.binding_conditions, d.binding_failure_conditions) for d in chosen
                        if d.binding_conditions)
        subs = _subs(claim)
        out[key] = ClaimAllocation(picked, node_selector(chosen, node),
                                   allocation_config(claim, devices.classes, {r for r, _ in picked}),
                                   _spec(claim) if claim.name.startswith(EXTENDED_CLAIM) else None, claim.mappings,
                                   shares, tuple(r for r, _ in picked if subs[r].admin), binding,
                                   tuple((r, subs[r].tolerations) for r in dict.fromkeys(r for r, _ in picked)
                                         if subs[r].tolerations))
    return out


def _spec(claim: ResourceClaim) -> dict[str, Any]:
    """The spec of a claim made here (extended resources: `exactly` requests, no selectors)."""
    return {"devices": {"requests": [
        {"name": r.name, "exactly": {"deviceClassName": sub.device_class, "allocationMode": "ExactCount",
                                     "count": sub.count}} for r in claim.requests for sub in r.alternatives]}}


def node_selector(chosen: list[Device], node: str | None = None) -> dict[str, Any] | None:
    """Upstream's createNodeSelector: a device on one node pins the allocation to that node, and so does one
    that binds to the node it is allocated for (`bindsToNode`, pinned to `node`); otherwise the devices'
    one-term selectors ANDed into one term; devices every node reaches add nothing (None: anywhere)."""
    def pin(name: str) -> dict[str, Any]:
        return {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [name]}]}]}

    fields: list[dict[str, Any]] = []
    expressions: list[dict[str, Any]] = []
    for device in chosen:
        if device.node is not None:
            return pin(device.node)
        if device.binds_to_node and node is not None:
            return pin(node)
        for term in device.node_terms or ():
            for requirement, into in [(r, fields) for r in term.fields] + [(r, expressions) for r in term.expressions]:
                item = {"key": requirement.key, "operator": requirement.operator, "values": list(requirement.values)}
                if item not in into:
                    into.append(item)
    merged = {k: v for k, v in (("matchExpressions", expressions), ("matchFields", fields)) if v}
    return {"nodeSelectorTerms": [merged]} if merged else None


def allocation_config(claim: ResourceClaim, classes: dict[str, DeviceClass], served: set[str]) -> tuple[dict[str, Any], ...]:
    """status.allocation.devices.config as upstream's allocator fills it: each class's config once (source
    FromClass) naming every request it serves, then the claim's (FromClaim) for the requests, or the chosen
    firstAvailable subrequests, they name (a config naming no request applies to all)."""
    out: list[dict[str, Any]] = []
    per_class: dict[str, list[dict[str, Any]]] = {}
    chosen: dict[str, str] = {}  # request -> the name the served alternative goes by
    for request in claim.requests:
        sub = next((a for a in request.alternatives if a.name in served), None)
        cls = classes.get(sub.device_class) if sub is not None else None
        if sub is None or cls is None:
            continue
        chosen[request.name] = sub.name
        if cls.name in per_class:
            for entry in per_class[cls.name]:
                entry["requests"].append(sub.name)
            continue
        per_class[cls.name] = [{"source": "FromClass", "requests": [sub.name], **json.loads(c)} for c in cls.config]
        out += per_class[cls.name]
    for requests, config in claim.config:
        body = json.loads(config)
        if not requests:
            out.append({"source": "FromClaim", **body})
            continue
        for request in claim.requests:  # upstream appends once per request (or chosen subrequest) it names
            if request.name in requests or (chosen.get(request.name) in requests and chosen[request.name] != request.name):
                out.append({"source": "FromClaim", "requests": list(requests), **body})
    return tuple(out)


def _attribute(device: Device, domain: str, name: str) -> object | None:
    return next((v for d, n, v in device.attributes if n == name and (d == domain or not domain)), None)


def pod_claims(pending: list[Pod], claims: dict[str, ResourceClaim],
               namespaces: dict[str, dict[str, str]] | None = None) -> dict[str, PodClaims]:
    """What each pending pod's ResourceClaims mean (pod key -> facts; pods without claims left out): blocked
    (why), the claims it allocates, the nodes its allocated claims are usable on, and the unallocated claims it
    shares with other pending pods. Such a claim is allocated once, by the first of its pods in queue order
    (engine.model.queue_order: the highest priority, then the oldest) that is not blocked otherwise; the others follow
    that allocation in the same batch (on nodes that reach its devices). Run after `extended_claims`: extended
    resources served by DeviceClasses are claims too."""
    queue = queue_order(p for p in pending if p.resource_claims)
    found = {pod.key: _pod_claims(pod, claims, namespaces or {}) for pod in queue}
    users: dict[str, list[str]] = {}
    for pod in queue:
        if not found[pod.key].blocked:
            for key in found[pod.key].to_allocate:
                users.setdefault(key, []).append(pod.key)
    shared = {key: pods for key, pods in users.items() if len(pods) > 1}
    for pod in queue:
        dra = found[pod.key]
        mine = tuple(k for k in dra.to_allocate if k in shared)
        if mine:
            follows = tuple((k, shared[k][0]) for k in mine if shared[k][0] != pod.key)
            led = {k for k, _ in follows}
            found[pod.key] = replace(dra, to_allocate=tuple(k for k in dra.to_allocate if k not in led),
                                     follows=follows, shared=mine,
                                     shapes=tuple(_shape(claims[k]) for k in dra.to_allocate if k not in led))
    return found


def tainted(devices: Devices) -> list[Device]:
    """The devices with what DeviceTaintRules add to them (driver, pool, device; unset: any): a new list, the
    snapshot's own devices untouched."""
    if not devices.taint_rules:
        return devices.devices
    def taints(d: Device) -> tuple[Taint, ...]:
        return tuple(taint for (driver, pool, name), taint in devices.taint_rules
                     if driver in (None, d.driver) and pool in (None, d.pool) and name in (None, d.name))
    return [replace(d, taints=d.taints + extra) if (extra := taints(d)) else d for d in devices.devices]


def extended_classes(devices: Devices) -> dict[str, str]:
    """Extended resource name -> the DeviceClass serving it (upstream's ExtendedResourceCache): each class's
    implicit deviceclass.resource.kubernetes.io/<name>, and its spec.extendedResourceName (the newest class,
    then the lowest name, when two name the same)."""
    out = {DEVICE_CLASS_PREFIX + name: name for name in devices.classes}
    by_name = sorted(devices.classes.values(), key=lambda c: c.name, reverse=True)
    for cls in sorted(by_name, key=lambda c: c.created):  # the last one written wins
        if cls.extended_resource:
            out[cls.extended_resource] = cls.name
    return out


def extended_claims(cluster: Cluster) -> tuple[list[Pod], dict[str, ResourceClaim]]:
    """DRAExtendedResource: a pending pod's extended resources that no node advertises in allocatable but a
    DeviceClass serves are asked of devices of that class, through one claim per pod (upstream's special claim:
    a request per container, `container-<i>-request-<j>`), its own from an earlier cycle if the cluster has it;
    NodeResourcesFit no longer counts them. A resource some node advertises stays the device plugin's. Returns
    the pending pods (such a pod as a copy without those requests, naming its claim) and the claims with the
    new ones (the cluster's own untouched)."""
    devices = cluster.devices
    wanted = [p for p in cluster.pending if p.extended]
    if not wanted or not devices.classes:
        return cluster.pending, devices.claims
    serving = extended_classes(devices)
    advertised = {r for n in cluster.nodes for r, v in n.allocatable.items() if v > 0}
    existing = {(c.namespace, c.extended_owner): c for c in devices.claims.values() if c.extended_owner}
    claims, changed = dict(devices.claims), {}
    for pod in wanted:
        served = [e for e in pod.extended if e.resource in serving and e.resource not in advertised]
        if not served:
            continue
        claim = existing.get((pod.namespace, pod.name)) or _extended_claim(pod, served, serving)
        claims[claim.key] = claim
        gone = {e.resource for e in served}
        changed[pod.key] = replace(pod, requests={r: v for r, v in pod.requests.items() if r not in gone},
                                   resource_claims=(*pod.resource_claims, (EXTENDED_CLAIM, claim.name)))
    if not changed:
        return cluster.pending, devices.claims
    return [changed.get(p.key, p) for p in cluster.pending], claims


def _extended_claim(pod: Pod, served: list[ExtendedRequest], serving: dict[str, str]) -> ResourceClaim:
    """The claim upstream's DynamicResources makes for a pod's extended resources (in memory until PreBind
    creates it): one request per container and resource, sorted by name, and which request serves what."""
    requests = sorted((f"container-{e.container}-request-{e.position}", serving[e.resource], e.count) for e in served)
    mappings = tuple((e.container_name, e.resource, f"container-{e.container}-request-{e.position}") for e in served)
    return ResourceClaim(pod.namespace, f"{EXTENDED_CLAIM}{pod.name}",
                         tuple(DeviceRequest(name, (SubRequest(name, cls, (), count),)) for name, cls, count in requests),
                         extended_owner=pod.name, mappings=mappings)


def _shape(claim: ResourceClaim) -> tuple:
    return claim.requests, claim.match_attributes


def _pod_claims(pod: Pod, claims: dict[str, ResourceClaim], namespaces: dict[str, dict[str, str]]) -> PodClaims:
    mine: list[ResourceClaim] = []
    terms = []
    for pod_claim, name in pod.resource_claims:
        if name is None:
            return PodClaims(blocked=f'pod "{pod.key}": ResourceClaim not created yet (spec.resourceClaims '
                                     f'{pod_claim!r} from a template)')
        if name == "":
            continue  # intentionally not created: nothing to allocate
        claim = claims.get(f"{pod.namespace}/{name}")
        if claim is None:
            return PodClaims(blocked=f'resourceclaim.resource.k8s.io "{name}" not found')
        if claim.deleting:
            return PodClaims(blocked=f'resourceclaim "{name}" is being deleted')
        if _admin_refused(claim, namespaces):
            return PodClaims(blocked=f'resourceclaim "{name}": admin access to devices requires the '
                                     f'`{ADMIN_ACCESS_LABEL}: true` label on the containing namespace')
        if claim.allocated is not None:
            if claim.allocation_terms is not None:
                terms.append(claim.allocation_terms)
            continue
        mine.append(claim)
    return PodClaims(to_allocate=tuple(c.key for c in mine), allocated_terms=tuple(terms),
                     shapes=tuple(_shape(c) for c in mine))


ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"  # a namespace whose claims may ask for admin access


def _admin_refused(claim: ResourceClaim, namespaces: dict[str, dict[str, str]]) -> bool:
    """A claim asking for admin access in a namespace the snapshot has, without the label the apiserver demands
    (its admission refuses such a claim; a snapshot may still hold one). A namespace the snapshot lacks: allowed."""
    labels = namespaces.get(claim.namespace)
    return (labels is not None and labels.get(ADMIN_ACCESS_LABEL) != "true"
            and any(sub.admin for request in claim.requests for sub in request.alternatives))


def taken_devices(devices: Devices) -> set[str]:
    """Devices allocated to some claim already: no other claim gets them, unless they allow multiple allocations
    (their shares are here too, by token: `Allocator` knows what each consumes)."""
    out: set[str] = set()
    for claim in devices.claims.values():
        if claim.allocated:
            out.update(k for k in claim.allocated if k not in claim.admin_results)
            out.update(share_token(key, f"{claim.key}#{i}") for i, (key, _) in enumerate(claim.shares))
    return out


def claim_shapes(pod: Pod) -> tuple:
    """What a pod's claims ask, without their names: pods whose claims (one per pod, from one template) ask
    alike share a class; the sample pod's claims stand for all of theirs. Claims shared in the batch are named:
    their pods form classes of their own (the solver keeps followers with their claim's allocating pod)."""
    dra = pod.dra
    return (dra.blocked, dra.allocated_terms, dra.shapes, dra.shared, dra.follows) if pod.resource_claims else ()


def device_signature(device: Device) -> str:
    """A kind of device by its attributes (`gpu.openb/model=V100`): what tells nodes apart where a measure takes a
    node's devices alike (engine.kinds.fragmentation names a shape's allowed models by these)."""
    return ",".join(f"{domain}/{name}={value}" for domain, name, value in sorted(device.attributes, key=str))


def signatures_of(values: Iterable[str], attribute: str) -> frozenset[str]:
    """The signatures of devices whose one attribute `attribute` (domain/name) has one of `values`: how a trace's
    allowed GPU models (openb's `gpu_spec`) name the devices its tasks may use."""
    return frozenset(f"{attribute}={value}" for value in values)
