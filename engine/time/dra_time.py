"""DRA in time (engine.time.timeline): when running pods' devices free, and what pods started later hold. Pure.

A running pod holds its devices through its ResourceClaims' allocations, not through its requests: upstream's
resourceclaim controller takes a pod out of a claim's `status.reservedFor` once the pod is done and deallocates the
claim when no consumer is left (a claim made from a template for the pod is deleted with it). So at a later time a
claim frees when every pod it is reserved for has ended by its bound, as `nvidia.com/gpu` frees with the pod
requesting it. A pod the plan starts later (a reservation's, an estimate's) holds the devices its plan's Reserve
gave it: its claims as they would be allocated then.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from ..devices.dra import Allocator, ClaimAllocation, share_token, taken_devices
from ..devices.dra_capacity import fits as capacity_fits
from ..model.cluster import Devices, Pod, ResourceClaim

DEVICES = "DynamicResources"  # the kind whose Reserve records a placed pod's allocations (Plan.details.reserved[pod])
NEVER = float("inf")


def claim_ends(devices: Devices, ends: Mapping[str, float], pending: Iterable[Pod]) -> dict[str, float]:
    """When each allocated claim is deallocated (claim key -> seconds): once the last pod in its status.reservedFor
    has ended (`ends`: running pod key -> its end, inf without a bound). Left out, so held for ever: claims
    reserved for no one (upstream deallocates only when the last consumer goes), for a consumer that is not a
    running pod the snapshot has (a PodGroup, a pod it lacks), and claims a pending pod uses (it will share them)."""
    used = {f"{p.namespace}/{name}" for p in pending for _, name in p.resource_claims if name}
    out: dict[str, float] = {}
    for key, claim in devices.claims.items():
        if claim.allocated is None or not claim.reserved_for or key in used:
            continue
        found = [ends.get(f"{claim.namespace}/{name}", NEVER) for name in claim.reserved_for]
        if max(found) < NEVER:
            out[key] = max(found)
    return out


def later_devices(devices: Devices, freed: Iterable[str], held: Iterable[ResourceClaim]) -> Devices:
    """The snapshot's devices at a later time: the `freed` claims deallocated, the `held` ones (pods started by then,
    as their plans allocated them) in; the snapshot's own untouched."""
    claims = dict(devices.claims)
    for key in freed:
        claims[key] = replace(claims[key], allocated=None, allocation_terms=None, reserved_for=(), shares=(),
                              admin_results=())
    for claim in held:
        claims[claim.key] = claim
    return replace(devices, claims=claims)


def allocated(claim: ResourceClaim, got: ClaimAllocation, users: tuple[str, ...]) -> ResourceClaim:
    """`claim` as Reserve's allocation leaves it (status.allocation), reserved for the pods named `users`."""
    return replace(claim, allocated=tuple(d for _, d in got.devices), allocation_terms=None, reserved_for=users,
                   shares=tuple((d, amount) for _, d, amount in got.shares),
                   admin_results=tuple(d for r, d in got.devices if r in got.admin))


def placed_claims(claims: Mapping[str, ResourceClaim], reserved: Mapping[str, Mapping[str, object]],
                  pod: Pod) -> tuple[ResourceClaim, ...]:
    """The claims a placed pod allocated, as its plan's Reserve allocated them (`reserved`: Plan.details.reserved)."""
    got = reserved.get(pod.key, {}).get(DEVICES)
    if not isinstance(got, dict):
        return ()
    return tuple(allocated(claims[key], a, (pod.name,)) for key, a in got.items() if key in claims)


def still_free(devices: Devices, claims: Sequence[ResourceClaim]) -> bool:
    """Whether the devices `claims` are allocated are free beside the claims allocated in `devices`: none another
    claim holds (one allowing multiple allocations: with room for the share beside the others), every pool's
    shared counters within their values."""
    allocator = Allocator(devices)
    taken = taken_devices(devices)
    for claim in claims:
        shared = {d for d, _ in claim.shares}
        for key in claim.allocated or ():
            if key not in allocator.by_key:
                return False
            if key not in shared and key not in claim.admin_results:
                if key in taken:
                    return False
                taken.add(key)
        for i, (key, amount) in enumerate(claim.shares):
            device = allocator.by_key[key]
            if not capacity_fits(device, amount, allocator.used_shares(device, taken)):
                return False
            token = share_token(key, f"{claim.key}@later#{i}")
            allocator.record_share(token, key, amount)
            taken.update((key, token))
    pools = {allocator.by_key[key].pool_key for claim in claims for key in claim.allocated or ()}
    return all(left >= 0 for pool in pools for left in allocator.counters.free(pool, taken).values())
