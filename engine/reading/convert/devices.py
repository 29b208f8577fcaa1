"""DRA objects (ResourceSlices, DeviceClasses, ResourceClaims, templates, DeviceTaintRules) into `model.Devices`."""

from __future__ import annotations

import json
from typing import Any

from ...model.cluster import (
    CapacityPolicy,
    Device,
    DeviceClass,
    DeviceRequest,
    Devices,
    ResourceClaim,
    SubRequest,
    Taint,
    Toleration,
    Version,
)
from ...model.quantity import QuantityError, to_milli
from .fields import as_bool, as_int, as_list, as_mapping, as_text, choice, optional_text, required, scalar_text, timestamp
from .pods import extended_owner
from .selectors import node_term


def add_dra_object(devices: Devices, kind: str, obj: dict[str, Any]) -> None:
    meta, spec = obj["metadata"], as_mapping(obj.get("spec"), "spec")
    name = as_text(meta["name"], "metadata.name")
    ns = as_text(meta.get("namespace") or "default", "metadata.namespace")
    if kind == "ResourceSlice":
        if _newest(devices, spec):
            devices.devices.extend(_slice_devices(spec))
            _shared_counters(devices, spec)
    elif kind == "DeviceClass":
        devices.classes[name] = DeviceClass(name, _cel_selectors(spec.get("selectors"), "spec.selectors"),
                                            spec.get("extendedResourceName"),
                                            tuple(_device_config(c, f"spec.config[{i}]")[1]
                                                  for i, c in enumerate(as_list(spec.get("config"), "spec.config"))),
                                            timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"))
    elif kind == "ResourceClaimTemplate":
        devices.templates.add(f"{ns}/{name}")
    elif kind == "DeviceTaintRule":
        _taint_rule(devices, spec)
    else:
        claim = _resource_claim(obj, ns, name)
        devices.claims[claim.key] = claim


def _newest(devices: Devices, spec: dict[str, Any]) -> bool:
    """Whether a slice counts: its pool's generation is the newest seen (upstream's allocator ignores slices of an
    older generation; a newer one replaces every slice of the pool seen so far). Counts the pool's slices, so that
    a pool short of its `resourceSliceCount` is known incomplete (engine.devices.dra_counters: none of its devices is
    allocated while its driver is still publishing it)."""
    driver = as_text(required(spec, "driver", "spec"), "spec.driver")
    pool = as_mapping(spec.get("pool"), "spec.pool")
    key = f"{driver}/{as_text(required(pool, 'name', 'spec.pool'), 'spec.pool.name')}"
    generation = as_int(pool.get("generation") or 0, "spec.pool.generation", 0, 2**63 - 1)
    count = as_int(pool.get("resourceSliceCount") or 1, "spec.pool.resourceSliceCount", 1)
    known = devices.pools.get(key)
    if known is not None and generation < known[0]:
        return False
    if known is not None and generation > known[0]:
        devices.devices[:] = [d for d in devices.devices if d.pool_key != key]
        for old in [k for k in devices.counter_sets if k[0] == key]:
            del devices.counter_sets[old]
        devices.invalid_pools.pop(key, None)
        known = None
    devices.pools[key] = (generation, known[1] if known else count, (known[2] if known else 0) + 1)
    return True


def _taint_rule(devices: Devices, spec: dict[str, Any]) -> None:
    """A DeviceTaintRule's taint for the devices its selector names (driver, pool, device; unset: any). A rule
    without `deviceSelector` matches no device (1.37.1+, resource.k8s.io/v1: the tracker skips it; 1.36 took it
    for every device)."""
    taint = _device_taint(required(spec, "taint", "spec"), "spec.taint")
    if spec.get("deviceSelector") is None:
        return
    selector = as_mapping(spec["deviceSelector"], "spec.deviceSelector")
    driver, pool, device = (optional_text(selector.get(k), f"spec.deviceSelector.{k}") for k in ("driver", "pool", "device"))
    devices.taint_rules.append(((driver, pool, device), taint))


def _counters(value: Any, what: str) -> dict[str, int]:
    """A map of counter name -> {value: quantity}, in milli-units."""
    out = {}
    for name, raw in as_mapping(value, what).items():
        quantity = required(as_mapping(raw, f"{what}.{name}"), "value", f"{what}.{name}")
        try:
            out[as_text(name, f"{what} key")] = to_milli(quantity)
        except QuantityError as exc:
            raise ValueError(f"{what}.{name}.value: {exc}") from None
    return out


def _shared_counters(devices: Devices, spec: dict[str, Any]) -> None:
    """A slice's sharedCounters: its pool's counter sets (any slice of the pool may hold them). A set named twice
    in one pool makes the pool invalid, as upstream's allocator finds it (its devices are not allocated)."""
    driver = as_text(required(spec, "driver", "spec"), "spec.driver")
    pool = as_text(required(as_mapping(spec.get("pool"), "spec.pool"), "name", "spec.pool"), "spec.pool.name")
    for i, raw in enumerate(as_list(spec.get("sharedCounters"), "spec.sharedCounters")):
        what = f"spec.sharedCounters[{i}]"
        counter_set = as_mapping(raw, what)
        name = as_text(required(counter_set, "name", what), f"{what}.name")
        key = (f"{driver}/{pool}", name)
        if key in devices.counter_sets:
            devices.invalid_pools[key[0]] = f"duplicate counter set name {name}"
        devices.counter_sets[key] = _counters(counter_set.get("counters"), f"{what}.counters")


def _consumes(d: dict[str, Any], what: str) -> tuple[tuple[str, str, int], ...]:
    """A device's consumesCounters: (counter set, counter, milli-units); a set it names without counters as
    (set, "", 0), so that its pool is still checked for the set."""
    out = []
    for j, raw in enumerate(as_list(d.get("consumesCounters"), f"{what}.consumesCounters")):
        where = f"{what}.consumesCounters[{j}]"
        use = as_mapping(raw, where)
        counter_set = as_text(required(use, "counterSet", where), f"{where}.counterSet")
        counters = _counters(use.get("counters"), f"{where}.counters")
        out += [(counter_set, name, milli) for name, milli in counters.items()] or [(counter_set, "", 0)]
    return tuple(sorted(out))


def _slice_devices(spec: dict[str, Any]) -> list[Device]:
    """A ResourceSlice's devices, each with where it is reachable (the slice's nodeName, nodeSelector or
    allNodes, or per device with perDeviceNodeSelection)."""
    driver = as_text(required(spec, "driver", "spec"), "spec.driver")
    pool = as_text(required(as_mapping(spec.get("pool"), "spec.pool"), "name", "spec.pool"), "spec.pool.name")
    out = []
    for i, raw in enumerate(as_list(spec.get("devices"), "spec.devices")):
        what = f"spec.devices[{i}]"
        d = as_mapping(raw, what)
        where = d if spec.get("perDeviceNodeSelection") else spec
        node = as_text(where["nodeName"], f"{what}.nodeName") if where.get("nodeName") else None
        selector = as_mapping(where.get("nodeSelector"), f"{what}.nodeSelector")
        terms = tuple(node_term(t, f"{what}.nodeSelector.nodeSelectorTerms[{j}]")
                      for j, t in enumerate(as_list(selector.get("nodeSelectorTerms"), f"{what}.nodeSelector"))) \
            if where.get("nodeSelector") else None
        out.append(Device(driver, pool, as_text(required(d, "name", what), f"{what}.name"),
                          _device_attributes(d, driver, what), _device_capacity(d, driver, what), node, terms,
                          tuple(_device_taint(t, f"{what}.taints[{j}]")
                                for j, t in enumerate(as_list(d.get("taints"), f"{what}.taints"))),
                          _consumes(d, what), as_bool(d.get("allowMultipleAllocations") or False,
                                                      f"{what}.allowMultipleAllocations"),
                          _policies(d, driver, what), *_binding(d, what)))
    return out


def _device_taint(raw: Any, what: str) -> Taint:
    """A DeviceTaint: key, value, effect (None, NoSchedule, NoExecute; an unknown effect is kept and ignored)."""
    t = as_mapping(raw, what)
    return Taint(as_text(required(t, "key", what), f"{what}.key"), scalar_text(t.get("value"), f"{what}.value"),
                 scalar_text(t.get("effect"), f"{what}.effect"))


def _device_tolerations(value: Any, what: str) -> tuple[Toleration, ...]:
    out = []
    for i, item in enumerate(as_list(value, what)):
        t = as_mapping(item, f"{what}[{i}]")
        op = scalar_text(t.get("operator"), f"{what}[{i}].operator") or "Equal"
        if op not in ("Equal", "Exists"):
            raise ValueError(f"{what}[{i}]: unknown operator {op!r} (Equal or Exists)")
        seconds = t.get("tolerationSeconds")
        out.append(Toleration(scalar_text(t.get("key"), f"{what}[{i}].key"), op,
                              scalar_text(t.get("value"), f"{what}[{i}].value"),
                              scalar_text(t.get("effect"), f"{what}[{i}].effect"),
                              None if seconds is None else as_int(seconds, f"{what}[{i}].tolerationSeconds")))
    return tuple(out)


def _qualified(key: str, driver: str) -> tuple[str, str]:
    domain, _, name = key.rpartition("/")
    return (domain or driver), name


def _device_attributes(d: dict[str, Any], driver: str, what: str) -> tuple[tuple[str, str, object], ...]:
    out: list[tuple[str, str, object]] = []
    for key, raw in as_mapping(d.get("attributes"), f"{what}.attributes").items():
        value = as_mapping(raw, f"{what}.attributes.{key}")
        found: object
        if "int" in value:
            found = as_int(value["int"], f"{what}.attributes.{key}.int", -(2**63), 2**63 - 1)
        elif "bool" in value:
            found = as_bool(value["bool"], f"{what}.attributes.{key}.bool")
        elif "version" in value:
            found = Version(as_text(value["version"], f"{what}.attributes.{key}.version"))
        else:
            found = as_text(value.get("string", ""), f"{what}.attributes.{key}.string")
        out.append((*_qualified(as_text(key, f"{what}.attributes key"), driver), found))
    return tuple(sorted(out, key=lambda a: (a[0], a[1])))


def _binding(d: dict[str, Any], what: str) -> tuple[tuple[str, ...], tuple[str, ...], bool]:
    """Device binding conditions (DRADeviceBindingConditions): bindingConditions, bindingFailureConditions,
    bindsToNode."""
    return (tuple(as_text(c, f"{what}.bindingConditions") for c in as_list(d.get("bindingConditions"),
                                                                         f"{what}.bindingConditions")),
            tuple(as_text(c, f"{what}.bindingFailureConditions") for c in as_list(d.get("bindingFailureConditions"),
                                                                                f"{what}.bindingFailureConditions")),
            as_bool(d.get("bindsToNode") or False, f"{what}.bindsToNode"))


def _milli(value: Any, what: str) -> int:
    try:
        return to_milli(value)
    except QuantityError as exc:
        raise ValueError(f"{what}: {exc}") from None


def _policies(d: dict[str, Any], driver: str, what: str) -> tuple[tuple[str, str, CapacityPolicy], ...]:
    """Each capacity's requestPolicy (consumable capacity): default, validValues or validRange (min, max, step)."""
    out = []
    for key, raw in as_mapping(d.get("capacity"), f"{what}.capacity").items():
        where = f"{what}.capacity.{key}.requestPolicy"
        policy = as_mapping(as_mapping(raw, f"{what}.capacity.{key}").get("requestPolicy"), where)
        if not policy:
            continue
        valid = as_mapping(policy.get("validRange"), f"{where}.validRange")
        bounds = {k: _milli(valid[k], f"{where}.validRange.{k}") if valid.get(k) is not None else None
                  for k in ("min", "max", "step")}
        if bounds["step"] is not None and bounds["step"] <= 0:
            raise ValueError(f"{where}.validRange.step: must be positive")
        out.append((*_qualified(as_text(key, f"{what}.capacity key"), driver), CapacityPolicy(
            _milli(policy["default"], f"{where}.default") if policy.get("default") is not None else None,
            tuple(sorted(_milli(v, f"{where}.validValues") for v in as_list(policy.get("validValues"),
                                                                            f"{where}.validValues"))),
            bounds["min"], bounds["max"], bounds["step"])))
    return tuple(sorted(out, key=lambda p: (p[0], p[1])))


def _device_capacity(d: dict[str, Any], driver: str, what: str) -> tuple[tuple[str, str, int], ...]:
    out = []
    for key, raw in as_mapping(d.get("capacity"), f"{what}.capacity").items():
        value = required(as_mapping(raw, f"{what}.capacity.{key}"), "value", f"{what}.capacity.{key}")
        try:
            milli = to_milli(value)
        except QuantityError as exc:
            raise ValueError(f"{what}.capacity.{key}.value: {exc}") from None
        out.append((*_qualified(as_text(key, f"{what}.capacity key"), driver), milli))
    return tuple(sorted(out))


def _cel_selectors(value: Any, what: str) -> tuple[str, ...]:
    out = []
    for i, item in enumerate(as_list(value, what)):
        cel = as_mapping(required(as_mapping(item, f"{what}[{i}]"), "cel", f"{what}[{i}]"), f"{what}[{i}].cel")
        out.append(as_text(required(cel, "expression", f"{what}[{i}].cel"), f"{what}[{i}].cel.expression"))
    return tuple(out)


def _sub_request(raw: dict[str, Any], name: str, what: str) -> SubRequest:
    mode = choice(raw.get("allocationMode") or "ExactCount", f"{what}.allocationMode", ("ExactCount", "All"))
    count = as_int(raw.get("count") or 1, f"{what}.count", 1)
    wanted = as_mapping(as_mapping(raw.get("capacity"), f"{what}.capacity").get("requests"), f"{what}.capacity.requests")
    return SubRequest(name, as_text(required(raw, "deviceClassName", what), f"{what}.deviceClassName"),
                      _cel_selectors(raw.get("selectors"), f"{what}.selectors"), count, mode == "All",
                      _device_tolerations(raw.get("tolerations"), f"{what}.tolerations"),
                      tuple(sorted((as_text(k, f"{what}.capacity.requests key"),
                                    _milli(v, f"{what}.capacity.requests.{k}")) for k, v in wanted.items())),
                      as_bool(raw.get("adminAccess") or False, f"{what}.adminAccess"))


def _device_config(raw: Any, what: str) -> tuple[tuple[str, ...], str]:
    """A DeviceClassConfiguration or DeviceClaimConfiguration: (the requests it names, its DeviceConfiguration
    (`opaque` driver parameters, passed through as they are) as JSON)."""
    c = as_mapping(raw, what)
    requests = tuple(as_text(r, f"{what}.requests") for r in as_list(c.get("requests"), f"{what}.requests"))
    return requests, json.dumps({k: v for k, v in c.items() if k != "requests"}, sort_keys=True)


def _consumer(ref: dict[str, Any]) -> str:
    """A status.reservedFor entry: a pod by its name, any other consumer (a PodGroup) as `resource.group/name`."""
    name = as_text(ref.get("name") or "", "status.reservedFor.name")
    resource, group = ref.get("resource") or "", ref.get("apiGroup") or ""
    return name if resource == "pods" and not group else f"{resource}.{group}/{name}"


def _resource_claim(obj: dict[str, Any], ns: str, name: str) -> ResourceClaim:
    spec, status = as_mapping(obj.get("spec"), "spec"), as_mapping(obj.get("status"), "status")
    devices = as_mapping(spec.get("devices"), "spec.devices")
    requests = []
    for i, raw in enumerate(as_list(devices.get("requests"), "spec.devices.requests")):
        what = f"spec.devices.requests[{i}]"
        r = as_mapping(raw, what)
        rname = as_text(required(r, "name", what), f"{what}.name")
        if r.get("exactly") is not None:
            alternatives: tuple[SubRequest, ...] = (_sub_request(as_mapping(r["exactly"], f"{what}.exactly"), rname,
                                                                 f"{what}.exactly"),)
        else:
            subs = as_list(r.get("firstAvailable"), f"{what}.firstAvailable")
            if not subs:
                raise ValueError(f"{what}: one of exactly and firstAvailable is required")
            alternatives = tuple(_sub_request(as_mapping(s, f"{what}.firstAvailable[{j}]"),
                                              f"{rname}/{as_text(as_mapping(s, what).get('name', j), what)}",
                                              f"{what}.firstAvailable[{j}]") for j, s in enumerate(subs))
        requests.append(DeviceRequest(rname, alternatives))
    constraints = []
    for i, raw in enumerate(as_list(devices.get("constraints"), "spec.devices.constraints")):
        c = as_mapping(raw, f"spec.devices.constraints[{i}]")
        if c.get("matchAttribute"):
            names = tuple(as_text(n, "request") for n in as_list(c.get("requests"), f"spec.devices.constraints[{i}].requests"))
            constraints.append((names, as_text(c["matchAttribute"], f"spec.devices.constraints[{i}].matchAttribute")))
    allocation = as_mapping(status.get("allocation"), "status.allocation")
    results = as_list(as_mapping(allocation.get("devices"), "status.allocation.devices").get("results"),
                    "status.allocation.devices.results")
    selector = as_mapping(allocation.get("nodeSelector"), "status.allocation.nodeSelector")
    shares = tuple((f"{r['driver']}/{r['pool']}/{r['device']}",
                    tuple(sorted((*_qualified(str(k), str(r["driver"])), _milli(v, "status.allocation.devices.results"
                                                                                    ".consumedCapacity"))
                                 for k, v in as_mapping(r.get("consumedCapacity"), "consumedCapacity").items())))
                   for r in (as_mapping(x, "result") for x in results) if r.get("shareID"))
    return ResourceClaim(
        ns, name, tuple(requests), tuple(constraints),
        tuple(f"{r['driver']}/{r['pool']}/{r['device']}" for r in (as_mapping(x, "result") for x in results))
        if status.get("allocation") is not None else None,
        tuple(node_term(t, "status.allocation.nodeSelector.nodeSelectorTerms") for t in
              as_list(selector.get("nodeSelectorTerms"), "status.allocation.nodeSelector")) if selector else None,
        tuple(_consumer(as_mapping(r, "status.reservedFor")) for r in as_list(status.get("reservedFor"), "status.reservedFor")),
        bool(obj["metadata"].get("deletionTimestamp")),
        tuple(_device_config(c, f"spec.devices.config[{i}]") for i, c in enumerate(as_list(devices.get("config"),
                                                                                        "spec.devices.config"))),
        extended_owner(obj["metadata"]), shares=shares,
        admin_results=tuple(f"{r['driver']}/{r['pool']}/{r['device']}" for r in (as_mapping(x, "result") for x in results)
                            if r.get("adminAccess") is True))
