"""Consumable capacity (DRAConsumableCapacity, beta and on since 1.36): what a request consumes of a device. Pure.

A request may ask amounts of a device's capacities (`capacity.requests`); upstream's allocator (structured,
incubating: consumable_capacity.go) turns each into what the allocation consumes: a capacity the request does not
name consumes its policy's `default`, or all of it without a policy; a named amount is rounded up to the policy's
range (below `min`: `min`; else the next `min + n·step`) or to its next valid value; an amount the policy does
not allow (beyond `max`, off the steps, above every valid value) makes the device unfit, as does a request naming
a capacity the device lacks or more than the device has. A device with `allowMultipleAllocations` is shared:
its allocations (shares) together consume no capacity beyond its value; any other device is the claim's alone, and
the amounts only say whether it fits. Amounts are milli-units (the 1.37 fractional range arithmetic).
"""

from __future__ import annotations

from functools import lru_cache

from ..model.cluster import CapacityPolicy, Device, SubRequest

Consumed = tuple[tuple[str, str, int], ...]  # (domain, name, milli-units), sorted


def qualified(name: str, driver: str) -> tuple[str, str]:
    """A capacity's name as (domain, name): without a domain, the driver's."""
    domain, _, short = name.rpartition("/")
    return domain or driver, short


def consumed(device: Device, sub: SubRequest) -> Consumed | None:
    """What `sub` consumes of each of the device's capacities (upstream's calculateConsumedCapacity and
    violatesPolicy); None where the device cannot serve it at all. Worked out once per kind of device and request
    (a cluster's devices are of a few kinds, and the allocator asks for every device it tries)."""
    return _consumed(device.driver, device.capacity, device.policies, sub.capacity)


@lru_cache(maxsize=4096)
def _consumed(driver: str, capacities: tuple[tuple[str, str, int], ...],
              request_policies: tuple[tuple[str, str, CapacityPolicy], ...],
              asked: tuple[tuple[str, int], ...]) -> Consumed | None:
    capacity = {(domain, name): value for domain, name, value in capacities}
    wanted = {qualified(name, driver): milli for name, milli in asked}
    if any(key not in capacity for key in wanted):
        return None
    policies = {(domain, name): policy for domain, name, policy in request_policies}
    out = []
    for key, value in sorted(capacity.items()):
        policy = policies.get(key)
        amount = _amount(wanted.get(key), value, policy)
        if amount < 0 or amount > value or _violates(amount, policy):
            return None
        out.append((*key, amount))
    return tuple(out)


def _amount(requested: int | None, value: int, policy: CapacityPolicy | None) -> int:
    if requested is None:
        return policy.default if policy is not None and policy.default is not None else value
    if policy is None:
        return requested
    if policy.least is not None:
        if requested < policy.least or policy.step is None:
            return max(requested, policy.least)
        steps = -(-(requested - policy.least) // policy.step)
        return policy.least + steps * policy.step
    return next((v for v in policy.valid_values if requested <= v), requested)


def _violates(amount: int, policy: CapacityPolicy | None) -> bool:
    if policy is None or amount == policy.default:
        return False
    if policy.least is not None:
        return ((policy.most is not None and amount > policy.most)
                or (policy.step is not None and (amount - policy.least) % policy.step != 0))
    return bool(policy.valid_values) and amount not in policy.valid_values


def fits(device: Device, amount: Consumed, shares: list[Consumed]) -> bool:
    """`amount` beside the device's `shares` (allocated or being allocated) stays within every capacity."""
    value = {(domain, name): v for domain, name, v in device.capacity}
    used: dict[tuple[str, str], int] = {}
    for share in shares:
        for domain, name, milli in share:
            used[(domain, name)] = used.get((domain, name), 0) + milli
    return all(used.get((domain, name), 0) + milli <= value[(domain, name)] for domain, name, milli in amount)


def shares_left(device: Device, amount: Consumed, shares: list[Consumed], most: int) -> int:
    """How many more allocations consuming `amount` fit beside `shares` (at most `most`)."""
    left = {(domain, name): v for domain, name, v in device.capacity}
    for share in shares:
        for domain, name, milli in share:
            left[(domain, name)] -= milli
    counts = [left[(domain, name)] // milli for domain, name, milli in amount if milli > 0]
    return max(0, min([most, *counts]))


def quantity(milli: int) -> str:
    """Milli-units as a Kubernetes quantity."""
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"
