"""Partitionable devices (DRAPartitionableDevices, beta and on since 1.36): shared counters. Pure.

A pool publishes counter sets (`sharedCounters`, in any slice of the pool: upstream gathers them per pool) and its
devices say what they consume of them (`consumesCounters`): one physical GPU of 40Gi offered as a whole device
and as two halves, each consuming its memory from one set. Upstream's allocator (structured, incubating:
`checkAvailableCounters`) allocates a device only while every counter of its pool stays within its value, counting
the devices allocated already and those chosen in the same allocation; a pool naming a counter set twice, or a
device consuming a set or counter the pool does not have, is invalid and none of its devices is allocated.

`Counters` answers that for a set of devices in use (allocated ones and those being chosen: the allocator's
`taken`/`used` sets), and bounds how many devices of a kind can be in use at once for the batch model's rows.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from ..model.cluster import Device, Devices


@dataclass
class Counters:
    """Each pool's counter sets and the devices consuming them, over one snapshot's devices."""

    sets: dict[tuple[str, str], dict[str, int]]  # (pool key, counter set) -> counter -> milli-units
    invalid: dict[str, str]  # pool key -> why none of its devices is allocated
    consumers: dict[str, list[Device]] = field(default_factory=dict)  # pool key -> its devices consuming counters
    values: dict[str, list[tuple[str, str, int]]] = field(default_factory=dict)  # pool key -> (set, counter, value)

    @classmethod
    def of(cls, devices: Devices) -> Counters:
        out = cls(devices.counter_sets, dict(devices.invalid_pools))
        for pool, (_, count, seen) in devices.pools.items():
            if seen != count and pool not in out.invalid:  # upstream: "resource pool ... is currently being updated"
                out.invalid[pool] = f"incomplete: {seen} of its {count} ResourceSlices published"
        for (pool, counter_set), counters in devices.counter_sets.items():
            out.values.setdefault(pool, []).extend((counter_set, name, value) for name, value in counters.items())
        names: set[str] = set()
        for device in devices.devices:
            if device.key in names and device.pool_key not in out.invalid:  # upstream's validateDeviceNames
                out.invalid[device.pool_key] = f"duplicate device name {device.name}"
            names.add(device.key)
            if device.consumes:
                out.consumers.setdefault(device.pool_key, []).append(device)
                why = out._unknown(device)
                if why and device.pool_key not in out.invalid:
                    out.invalid[device.pool_key] = why
        return out

    def _unknown(self, device: Device) -> str:
        for counter_set, name, _ in device.consumes:
            found = self.sets.get((device.pool_key, counter_set))
            if found is None:
                return f"counter set {counter_set} not found"
            if name and name not in found:
                return f"counter {name} not found in counter set {counter_set}"
        return ""

    def usable(self, device: Device) -> bool:
        """Its pool is valid and complete (no device of an invalid or incomplete pool is allocated, consuming
        counters or not)."""
        return device.pool_key not in self.invalid

    def used(self, pool: str, in_use: Collection[str]) -> dict[tuple[str, str], int]:
        """What the devices of `in_use` consume of the pool's counters: (counter set, counter) -> milli-units."""
        out: dict[tuple[str, str], int] = {}
        for device in self.consumers.get(pool, ()):
            if device.key in in_use:
                for counter_set, name, milli in device.consumes:
                    out[(counter_set, name)] = out.get((counter_set, name), 0) + milli
        return out

    def fits(self, device: Device, in_use: Collection[str]) -> bool:
        """`device` may join the devices `in_use` (allocated, or chosen in this allocation): every counter of its
        pool stays within its value (upstream checks them all, so a pool overcommitted already takes no more)."""
        if not device.consumes:
            return True
        pool = device.pool_key
        used = self.used(pool, in_use)
        if device.key not in in_use:
            for counter_set, name, milli in device.consumes:
                used[(counter_set, name)] = used.get((counter_set, name), 0) + milli
        return all(used.get((counter_set, name), 0) <= value for counter_set, name, value in self.values.get(pool, ()))

    def share(self, device: Device) -> float:
        """The largest part of one of its pool's counters `device` consumes (0: none): of two devices that serve
        alike, the allocator takes the smaller partition first, leaving the counters to more pods."""
        return max((milli / value for counter_set, name, milli in device.consumes
                    if (value := self.sets.get((device.pool_key, counter_set), {}).get(name, 0)) > 0), default=0.0)

    def free(self, pool: str, in_use: Collection[str]) -> dict[tuple[str, str], int]:
        """What is left of each of the pool's counters beside the devices `in_use`."""
        used = self.used(pool, in_use)
        return {(counter_set, name): value - used.get((counter_set, name), 0)
                for counter_set, name, value in self.values.get(pool, ())}

    def most(self, devices: Iterable[Device], in_use: Collection[str]) -> int:
        """At most how many of `devices` (free ones) can be in use at once beside `in_use`: those consuming no
        counter each count; per pool, the others no more than each counter's smallest consumers fit in what is
        left of it (a bound, exact for devices of one counter)."""
        plain = 0
        per_pool: dict[str, list[Device]] = {}
        for device in devices:
            if device.consumes:
                per_pool.setdefault(device.pool_key, []).append(device)
            else:
                plain += 1
        return plain + sum(self._most_of_pool(pool, found, in_use) for pool, found in per_pool.items())

    def _most_of_pool(self, pool: str, devices: list[Device], in_use: Collection[str]) -> int:
        if pool in self.invalid:
            return 0
        most = len(devices)
        for counter, left in self.free(pool, in_use).items():
            costs = sorted(next((m for s, n, m in d.consumes if (s, n) == counter), 0) for d in devices)
            total, fit = 0, 0
            for cost in costs:
                total += cost
                if total > left:
                    break
                fit += 1
            most = min(most, fit)
        return most
