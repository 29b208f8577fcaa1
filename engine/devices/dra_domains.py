"""A DRA device attribute as a gang's domain (`gang … within device attribute "gpu.example.com/clique"`): every
member's devices of the drivers that publish the attribute carry one value of it (an NVLink clique, a fabric id
shared by GPUs on several nodes). Pure.

Which devices it holds: those of the drivers that publish the attribute on some device of the snapshot. A device of
such a driver without the attribute, or with an empty value, is in no domain: a member may not take it (as a node
with an empty topology label is in no domain). Devices of other drivers (a NIC that never publishes it) are not
held. A node belongs to one value (`node_value`): the one most of its free devices of those drivers carry (then most
devices, then the lowest value), so a gang's domain is a partition of the nodes like a label's; on a node whose
devices carry several values, a member takes only devices of the node's value (`allows`), the others serve pods
outside such gangs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..model.cluster import Device, Devices, Node
from .dra import taken_devices

_DOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def attribute_problem(attribute: str) -> str | None:
    """Why `attribute` is not a fully qualified device attribute name (upstream's matchAttribute validation:
    `domain/name`, the domain a DNS subdomain of at most 63 characters, the name a C identifier of at most 32),
    None when it is one."""
    domain, slash, name = attribute.rpartition("/")
    if not slash or not domain:
        return "must include a domain (a fully qualified name such as 'gpu.example.com/clique')"
    if len(domain) > 63 or not _DOMAIN.match(domain):
        return f"its domain {domain!r} must be a DNS subdomain of at most 63 characters"
    if len(name) > 32 or not _IDENTIFIER.match(name):
        return f"its name {name!r} must be a C identifier of at most 32 characters"
    return None


def value_of(device: Device, attribute: str) -> str:
    """The device's value of `attribute` (domain/name) as a domain's name ("" without one, or empty)."""
    domain, _, name = attribute.rpartition("/")
    found = next((v for d, n, v in device.attributes if d == domain and n == name), None)
    return "" if found is None else getattr(found, "text", None) or str(found)


@dataclass
class DeviceDomain:
    """One attribute's domains over one snapshot's devices (`taken`: the devices allocated already)."""

    attribute: str
    devices: Devices
    taken: frozenset[str] = frozenset()
    drivers: frozenset[str] = field(init=False)  # the drivers that publish the attribute
    _pinned: dict[str, list[Device]] = field(default_factory=dict)  # node name -> its devices of those drivers
    _roaming: list[Device] = field(default_factory=list)  # those devices several nodes may reach
    _nodes: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        domain, _, name = self.attribute.rpartition("/")
        self.drivers = frozenset(d.driver for d in self.devices.devices
                                 if any(dm == domain and n == name for dm, n, _ in d.attributes))
        for device in self.devices.devices:
            if self.held(device):
                if device.node is not None:
                    self._pinned.setdefault(device.node, []).append(device)
                else:
                    self._roaming.append(device)

    def held(self, device: Device) -> bool:
        """The device is of a driver that publishes the attribute: a member takes it only in its gang's value."""
        return device.driver in self.drivers

    def node_value(self, node: Node) -> str:
        """The value `node` belongs to ("": none, no device of those drivers on it carries one)."""
        if node.name not in self._nodes:
            counts: dict[str, list[int]] = {}
            near = self._pinned.get(node.name, []) + [d for d in self._roaming if d.reachable(node)]
            for device in near:
                if value := value_of(device, self.attribute):
                    count = counts.setdefault(value, [0, 0])
                    count[0] += device.key not in self.taken
                    count[1] += 1
            self._nodes[node.name] = min(counts, key=lambda v: (-counts[v][0], -counts[v][1], v), default="")
        return self._nodes[node.name]

    def allows(self, device: Device, node: Node) -> bool:
        """A member on `node` may take `device`: of a driver that does not publish the attribute, or carrying the
        node's value."""
        if not self.held(device):
            return True
        value = value_of(device, self.attribute)
        return bool(value) and value == self.node_value(node)

    def may_serve(self, device: Device, nodes: dict[str, Node]) -> bool:
        """`device` may serve a member on some node of `nodes` (by name): as `allows` on its own node, one
        several nodes reach if it carries a value (Reserve settles which node's)."""
        if not self.held(device):
            return True
        if device.node is None:
            return bool(value_of(device, self.attribute))
        node = nodes.get(device.node)
        return node is not None and self.allows(device, node)

    def values_held(self, keys: tuple[str, ...]) -> set[str]:
        """The values the devices `keys` (an allocation) carry, of those drivers ("" for one without a value)."""
        by_key = {d.key: d for d in self.devices.devices}
        return {value_of(by_key[k], self.attribute) for k in keys if k in by_key and self.held(by_key[k])}


def device_domain(memo: dict, devices: Devices, attribute: str) -> DeviceDomain:
    """`attribute`'s domains over `devices` (those allocated already taken), once per `memo` (a batch's)."""
    found = memo.setdefault(MEMO, {})
    if attribute not in found:
        found[attribute] = DeviceDomain(attribute, devices, frozenset(taken_devices(devices)))
    return found[attribute]


MEMO = "device domains"
