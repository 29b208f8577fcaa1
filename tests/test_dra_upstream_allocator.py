"""Our allocator (engine.devices.dra.Allocator) against upstream's allocator tests, case by case: each row is a test of
k8s.io/dynamic-resource-allocation v0.37.2 `structured/internal/allocatortesting/allocator_testing.go` (the cases
all three allocators share), transcribed with the same slices, classes, claims and devices allocated already,
and the result upstream expects: per claim, the (request, driver/pool/device) allocated, or None where upstream
allocates nothing (no result, or an error such as "invalid resource pools were encountered": both leave the pod
unschedulable on the node). The rows cover what we implement of 1.37: partitionable devices (shared counters,
per-device node selection), consumable capacity (shared devices, request policies), admin access, device binding
conditions (copied into the results), device taints (the request's tolerations copied into each result),
prioritized lists and constraints meeting them, the depth-first search that undoes a choice spoiling a later
request or claim, and pools as their newest complete generation of slices. Where upstream expects a consumedCapacity, the row checks ours too."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from engine.devices.dra import Allocator, allocation_results, node_selector, taken_devices
from engine.devices.dra_capacity import quantity
from engine.loop.devices import allocation_status
from engine.reading.load import build_cluster

DRIVER_A, DRIVER_B = "driver-a", "driver-b"
NODE1, NODE2 = "node-1", "node-2"
PER_DEVICE, ALL_NODES = "perDevice", "allNodes"
TAINT_NONE = {"key": "taint-key", "value": "taint-value", "effect": "None"}
TAINT_NO_SCHEDULE = {"key": "taint-key", "value": "taint-value", "effect": "NoSchedule"}
TAINT_NO_EXECUTE = {"key": "taint-key", "value": "taint-value-2", "effect": "NoExecute"}
TOLERATE_NO_SCHEDULE = {"operator": "Exists", "key": "taint-key", "effect": "NoSchedule"}
TOLERATE_NO_EXECUTE = {"operator": "Equal", "key": "taint-key", "value": "taint-value-2", "effect": "NoExecute"}


def memory_at_least(size: str, driver: str = DRIVER_A) -> str:
    return f'device.capacity["{driver}"].memory.compareTo(quantity("{size}")) >= 0'


def dev(name: str, consumes: dict[str, dict[str, str]] | None = None, from_counters: bool = True,
        attributes: dict[str, Any] | None = None, taints: tuple[dict, ...] = (), node: Any = None) -> dict:
    """upstream's device(name, capacity, attributes).withDeviceCounterConsumption(...).withTaints(...)
    .withNodeSelection(node): `fromCounters` makes the capacity what it consumes."""
    out: dict[str, Any] = {"name": name}
    if consumes:
        out["consumesCounters"] = [{"counterSet": s, "counters": {c: {"value": v} for c, v in counters.items()}}
                                   for s, counters in consumes.items()]
        if from_counters:
            out["capacity"] = {c: {"value": v} for counters in consumes.values() for c, v in counters.items()}
    if attributes:
        out["attributes"] = {k: {"string": v} for k, v in attributes.items()}
    if taints:
        out["taints"] = list(taints)
    if node is not None:
        out.update(_where(node))
    return out


def _where(node: Any) -> dict:
    if node == ALL_NODES:
        return {"allNodes": True}
    if node == PER_DEVICE:
        return {"perDeviceNodeSelection": True}
    if isinstance(node, dict):
        return {"nodeSelector": node}
    return {"nodeName": node}


def region_selector(region: str) -> dict:
    return {"nodeSelectorTerms": [{"matchExpressions": [{"key": "region", "operator": "In", "values": [region]}]}]}


def slice_(name: str, node: Any, pool: str, driver: str = DRIVER_A, devices: tuple[dict, ...] = (),
           counter_sets: dict[str, dict[str, str]] | None = None, count: int | None = None,
           generation: int = 1) -> dict:
    """upstream's slice(...): `count` is the pool's resourceSliceCount (None: as many slices of the pool and
    generation as the row has, as upstream's rows write resourcePool(pool, n))."""
    spec: dict[str, Any] = {"driver": driver, "pool": {"name": pool, "generation": generation,
                                                       **({} if count is None else {"resourceSliceCount": count})},
                            **_where(node)}
    if devices:
        spec["devices"] = list(devices)
    if counter_sets is not None:
        spec["sharedCounters"] = [{"name": s, "counters": {c: {"value": v} for c, v in counters.items()}}
                                  for s, counters in counter_sets.items()]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name}, "spec": spec}


def request(name: str, cls: str = "class-a", count: int = 1, selectors: tuple[str, ...] = (),
            tolerations: tuple[dict, ...] = (), all_devices: bool = False) -> dict:
    exactly: dict[str, Any] = {"deviceClassName": cls}
    exactly.update({"allocationMode": "All"} if all_devices else {"count": count})
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    if tolerations:
        exactly["tolerations"] = list(tolerations)
    return {"name": name, "exactly": exactly}


def prioritized(name: str, *subs: dict) -> dict:
    """requestWithPrioritizedList: each sub is a `request(...)` whose `exactly` becomes a firstAvailable entry."""
    return {"name": name, "firstAvailable": [{"name": s["name"], **s["exactly"]} for s in subs]}


def claim(name: str, *requests: dict, match_attribute: str | None = None,
          constraints: tuple[dict, ...] = ()) -> dict:
    devices: dict[str, Any] = {"requests": list(requests)}
    if match_attribute:
        devices["constraints"] = [{"matchAttribute": match_attribute}]
    if constraints:
        devices["constraints"] = list(constraints)
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "default"}, "spec": {"devices": devices}}


@dataclass
class Case:
    slices: list[dict]
    claims: list[dict]
    expect: list[list[tuple[str, str]]] | None  # per claim: (request, driver/pool/device); None: nothing allocated
    classes: tuple[str, ...] = (DRIVER_A,)  # class-a serves driver-a, class-b driver-b
    allocated: list[str] = field(default_factory=list)  # device keys allocated already
    node: str = NODE1
    selector: dict | None = None  # the allocation's node selector, where the row checks it
    amounts: list[list[str]] | None = None  # per claim, each result's consumedCapacity of capacity-0 (shares)
    binding: list[tuple[str, tuple[str, ...], tuple[str, ...]]] | None = None  # the first claim's binding conditions
    shares: dict[str, str | None] = field(default_factory=dict)  # allocated shares: device key -> capacity-0 used


def counters(**values: str) -> dict[str, str]:
    return dict(values)


CS1, CS2 = "counter-set-1", "counter-set-2"
POOL1, POOL2 = "pool-1", "pool-2"


def _a(pool: str, device: str, driver: str = DRIVER_A) -> str:
    return f"{driver}/{pool}/{device}"


CASES: dict[str, Case] = {
    "partitionable-devices-single-device": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(dev("device-1", {CS1: {"memory": "4Gi"}}, from_counters=False),)),
         slice_("slice-2", NODE1, POOL1, counter_sets={CS1: {"memory": "8Gi"}})],
        [claim("claim-0", request("req-0"))], [[("req-0", _a(POOL1, "device-1"))]]),
    "partitionable-devices-counter-quantities-are-not-modified": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(dev("device-1", {CS1: {"c": "9000000000000000000"}}, False),
                                                   dev("device-2", {CS1: {"c": "1"}}, False))),
         slice_("slice-2", NODE1, POOL1, counter_sets={CS1: {"c": "10000000000000000000"}})],
        [claim("claim-0", request("req-0"))], [[("req-0", _a(POOL1, "device-2"))]],
        allocated=[_a(POOL1, "device-1")]),
    "partitionable-devices-counter-cache-scoped-by-pool-ID": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(dev("device-1", {CS1: {"c": "1"}}, False),)),
         slice_("slice-2", NODE1, POOL1, counter_sets={CS1: {"c": "1"}}),
         slice_("slice-3", NODE1, POOL1, DRIVER_B, devices=(dev("device-2", {CS1: {"c": "2"}}, False),)),
         slice_("slice-4", NODE1, POOL1, DRIVER_B, counter_sets={CS1: {"c": "2"}})],
        [claim("claim-0", request("req-0")), claim("claim-1", request("req-1", "class-b"))],
        [[("req-0", _a(POOL1, "device-1"))], [("req-1", _a(POOL1, "device-2", DRIVER_B))]],
        classes=(DRIVER_A, DRIVER_B)),
    "partitionable-devices-counter-cache-not-crossed-between-driver-schemas": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(dev("device-1", {CS1: {"c": "1"}}, False),)),
         slice_("slice-2", NODE1, POOL1, counter_sets={CS1: {"c": "1"}}),
         slice_("slice-3", NODE1, POOL1, DRIVER_B, devices=(dev("device-2", {CS2: {"d": "2"}}, False),)),
         slice_("slice-4", NODE1, POOL1, DRIVER_B, counter_sets={CS2: {"d": "1"}})],
        [claim("claim-0", request("req-0")), claim("claim-1", request("req-1", "class-b"))], None,
        classes=(DRIVER_A, DRIVER_B)),
    "partitionable-devices-taint-releases-counter": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(dev("device-1", {CS1: {"c": "1"}}, False, taints=(TAINT_NO_SCHEDULE,)),
                                                   dev("device-2", {CS1: {"c": "1"}}, False))),
         slice_("slice-2", NODE1, POOL1, counter_sets={CS1: {"c": "1"}})],
        [claim("claim-0", request("req-0"))], [[("req-0", _a(POOL1, "device-2"))]]),
    "partitionable-devices-constraint-releases-counter": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(
            dev("device-1", {CS1: {"c": "1"}}, False, {"stringAttribute": "red"}),
            dev("device-2", {CS1: {"c": "1"}}, False, {"stringAttribute": "blue"}),
            dev("device-3", {CS1: {"c": "1"}}, False, {"stringAttribute": "blue"}))),
         slice_("slice-2", NODE1, POOL1, counter_sets={CS1: {"c": "2"}})],
        [claim("claim-0", request("req-0", count=2), match_attribute=f"{DRIVER_A}/stringAttribute")],
        [[("req-0", _a(POOL1, "device-2")), ("req-0", _a(POOL1, "device-3"))]]),
    "partitionable-devices-prioritized-list": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(dev("device-1", {CS1: {"memory": "4Gi"}}),
                                                   dev("device-2", {CS1: {"memory": "6Gi"}}),
                                                   dev("device-3", {CS1: {"memory": "4Gi"}}))),
         slice_("slice-2", NODE1, POOL1, counter_sets={CS1: {"memory": "8Gi"}})],
        [claim("claim-0", request("req-0"), prioritized("req-1", request("subReq-0", selectors=(memory_at_least("6Gi"),)),
                                                        request("subReq-1", selectors=(memory_at_least("4Gi"),))))],
        [[("req-0", _a(POOL1, "device-1")), ("req-1/subReq-1", _a(POOL1, "device-3"))]]),
    "partitionable-devices-multiple-devices": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(dev("device-1", {CS1: {"memory": "4Gi"}}),
                                                   dev("device-2", {CS1: {"memory": "6Gi"}}),
                                                   dev("device-3", {CS1: {"memory": "4Gi"}}))),
         slice_("slice-2", NODE1, POOL1, counter_sets={CS1: {"memory": "8Gi"}})],
        [claim("claim-0", request("req-0"), request("req-1"))],
        [[("req-0", _a(POOL1, "device-1")), ("req-1", _a(POOL1, "device-3"))]]),
    "partitionable-devices-multiple-capacity-pools": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(
            dev("device-1", {CS1: {"memory": "4Gi"}, CS2: {"cpus": "4"}}),
            dev("device-2", {CS1: {"memory": "6Gi"}, CS2: {"cpus": "6"}}),
            dev("device-3", {CS1: {"memory": "4Gi"}, CS2: {"cpus": "4"}}))),
         slice_("slice-2", NODE1, POOL1, counter_sets={CS1: {"memory": "18Gi"}, CS2: {"cpus": "8"}})],
        [claim("claim-0", request("req-0"), prioritized("req-1", request("subReq-0", selectors=(memory_at_least("6Gi"),)),
                                                        request("subReq-1", selectors=(memory_at_least("4Gi"),))))],
        [[("req-0", _a(POOL1, "device-1")), ("req-1/subReq-1", _a(POOL1, "device-3"))]]),
    "partitionable-devices-multiple-counters": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(
            dev("device-1", {CS1: {"memory": "4Gi", "cpus": "6"}, CS2: {"cpus": "4", "memory": "2Gi"}}, False),
            dev("device-2", {CS1: {"memory": "6Gi", "cpus": "4"}, CS2: {"cpus": "6", "memory": "6Gi"}}, False),
            dev("device-3", {CS1: {"memory": "4Gi", "cpus": "4"}, CS2: {"cpus": "4", "memory": "4Gi"}}, False))),
         slice_("slice-2", NODE1, POOL1, counter_sets={CS1: {"cpus": "8", "memory": "18Gi"},
                                                       CS2: {"cpus": "12", "memory": "18Gi"}})],
        [claim("claim-0", request("req-0"), request("req-1"))],
        [[("req-0", _a(POOL1, "device-2")), ("req-1", _a(POOL1, "device-3"))]]),
    "partitionable-devices-multiple-pools": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(dev("device-1", {CS1: {"cpus": "6", "memory": "4Gi"}}, False),
                                                   dev("device-2", {CS1: {"cpus": "4", "memory": "6Gi"}}, False),
                                                   dev("device-3", {CS1: {"cpus": "4", "memory": "4Gi"}}, False))),
         slice_("slice-2", NODE1, POOL1, counter_sets={CS1: {"cpus": "8", "memory": "18Gi"}}),
         slice_("slice-3", NODE1, POOL2, devices=(dev("device-1", {CS1: {"cpus": "6", "memory": "4Gi"}}, False),
                                                   dev("device-2", {CS1: {"cpus": "1", "memory": "7Gi"}}, False),
                                                   dev("device-3", {CS1: {"cpus": "1", "memory": "7Gi"}}, False))),
         slice_("slice-4", NODE1, POOL2, counter_sets={CS1: {"cpus": "8", "memory": "18Gi"}})],
        [claim("claim-0", request("req-0"), request("req-1"))],
        [[("req-0", _a(POOL2, "device-2")), ("req-1", _a(POOL2, "device-3"))]],
        allocated=[_a(POOL1, "device-2"), _a(POOL1, "device-3"), _a(POOL2, "device-1")]),
    "partitionable-devices-unused-counters-in-counter-set": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(dev("device-1", {CS1: {"memory": "5Gi"}}, False),
                                                   dev("device-2", {CS1: {"memory": "4Gi"}}, False),
                                                   dev("device-3", {CS1: {"memory": "4Gi"}}, False))),
         slice_("slice-2", NODE1, POOL1, counter_sets={CS1: {"memory": "8Gi", "unused": "1Gi"}})],
        [claim("claim-0", request("req-0", count=2))],
        [[("req-0", _a(POOL1, "device-2")), ("req-0", _a(POOL1, "device-3"))]]),
    "partitionable-devices-no-capacity-available": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(dev("device-1", {CS1: {"memory": "4Gi"}}),
                                                   dev("device-2", {CS1: {"memory": "16Gi"}}))),
         slice_("slice-2", NODE1, POOL1, counter_sets={CS1: {"memory": "18Gi"}})],
        [claim("claim-0", request("req-0"))], None, allocated=[_a(POOL1, "device-2")]),
    "partitionable-devices-overallocated-capacity-pool": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(dev("device-1", {CS1: {"memory": "4Gi"}}),
                                                   dev("device-2", {CS1: {"memory": "20Gi"}}))),
         slice_("slice-2", NODE1, POOL1, counter_sets={CS1: {"memory": "18Gi"}})],
        [claim("claim-0", request("req-0"))], None, allocated=[_a(POOL1, "device-2")]),
    "partitionable-devices-per-device-node-selection-nodename": Case(
        [slice_("slice-1", PER_DEVICE, POOL1, devices=(dev("device-1", {CS1: {"memory": "4Gi"}}, node=NODE1),
                                                        dev("device-2", {CS1: {"memory": "6Gi"}}, node=NODE2))),
         slice_("slice-2", PER_DEVICE, POOL1, counter_sets={CS1: {"memory": "18Gi"}})],
        [claim("claim-0", prioritized("req-0", request("subReq-0", selectors=(memory_at_least("6Gi"),)),
                                      request("subReq-1", selectors=(memory_at_least("4Gi"),))))],
        [[("req-0/subReq-1", _a(POOL1, "device-1"))]],
        selector={"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                                          "values": [NODE1]}]}]}),
    "partitionable-devices-per-device-node-selection-node-selector": Case(
        [slice_("slice-1", PER_DEVICE, POOL1, devices=(
            dev("device-1", {CS1: {"memory": "4Gi"}}, node=region_selector("region-1")),)),
         slice_("slice-2", PER_DEVICE, POOL1, counter_sets={CS1: {"memory": "18Gi"}})],
        [claim("claim-0", request("req-0"))], [[("req-0", _a(POOL1, "device-1"))]],
        selector=region_selector("region-1")),
    "partitionable-devices-per-device-node-selection-node-selector-multiple-devices": Case(
        [slice_("slice-1", PER_DEVICE, POOL1, devices=(
            dev("device-1", {CS1: {"memory": "4Gi"}}, node=region_selector("region-1")),
            dev("device-2", {CS1: {"memory": "4Gi"}}, node=NODE1),
            dev("device-3", {CS1: {"memory": "4Gi"}}, node=ALL_NODES))),
         slice_("slice-2", PER_DEVICE, POOL1, counter_sets={CS1: {"memory": "18Gi"}}),
         slice_("slice-3", NODE1, POOL2, DRIVER_B, devices=tuple(dev(f"device-{i}", {CS2: {"memory": "4Gi"}})
                                                                 for i in (1, 2, 3))),
         slice_("slice-4", NODE1, POOL2, DRIVER_B, counter_sets={CS2: {"memory": "12Gi"}})],
        [claim("claim-0", request("req-0", count=3), request("req-1", "class-b", count=3))],
        [[*(("req-0", _a(POOL1, f"device-{i}")) for i in (1, 2, 3)),
          *(("req-1", _a(POOL2, f"device-{i}", DRIVER_B)) for i in (1, 2, 3))]],
        classes=(DRIVER_A, DRIVER_B),
        selector={"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                                          "values": [NODE1]}]}]}),
    "all-devices-with-consumed-counters": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(dev("device-1", {CS1: {"memory": "4Gi"}}, False),)),
         slice_("slice-2", NODE1, POOL1, counter_sets={CS1: {"memory": "8Gi"}})],
        [claim("claim-0", request("req-0", all_devices=True))], [[("req-0", _a(POOL1, "device-1"))]]),
    # upstream: the error "invalid resource pools were encountered" (no device of the pool is allocated)
    "partitionable-devices-same-counter-set-name-in-different-resource-slices": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(dev("device-1"),)),
         slice_("slice-2", NODE1, POOL1, counter_sets={CS1: {}}),
         slice_("slice-3", NODE1, POOL1, devices=(dev("device-2"),)),
         slice_("slice-4", NODE1, POOL1, counter_sets={CS1: {}})],
        [claim("claim-0", request("req-0"))], None),
    "partitionable-devices-device-counter-consumption-references-unknown-counter-set": Case(
        [slice_("slice-1", NODE1, POOL1, devices=({"name": "device-1", "consumesCounters": [{"counterSet": CS2}]},)),
         slice_("slice-2", NODE1, POOL1, counter_sets={CS1: {}})],
        [claim("claim-0", request("req-0"))], None),
    "partitionable-devices-device-counter-consumption-references-unknown-counter-in-counter-set": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(dev("device-1", {CS1: {"memory": "8Gi"}}, False),)),
         slice_("slice-2", NODE1, POOL1, counter_sets={CS1: {"other-memory": "8Gi"}})],
        [claim("claim-0", request("req-0"))], None),
    "partitionable-devices-device-counter-consumption-references-counter-set-in-other-pool": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(dev("device-1", {CS1: {"memory": "8Gi"}}, False),)),
         slice_("slice-2", NODE1, POOL2, counter_sets={CS1: {"memory": "8Gi"}})],
        [claim("claim-0", request("req-0"))], None),
    "partitionable-devices-devices-on-different-nodes-consume-same-counter-set": Case(
        [slice_("slice-1", NODE1, POOL1, counter_sets={CS1: {"memory": "8Gi"}}),
         slice_("slice-2", NODE1, POOL1, devices=(dev("device-1", {CS1: {"memory": "6Gi"}}),
                                                   dev("device-2", {CS1: {"memory": "2Gi"}}))),
         slice_("slice-3", NODE2, POOL1, devices=(dev("device-3", {CS1: {"memory": "6Gi"}}, False),))],
        [claim("claim-0", prioritized("req-0", request("subReq-0", selectors=(memory_at_least("6Gi"),)),
                                      request("subReq-1", selectors=(memory_at_least("2Gi"),))))],
        [[("req-0/subReq-1", _a(POOL1, "device-2"))]], allocated=[_a(POOL1, "device-3")]),
    "partitionable-devices-devices-consume-counter-set-in-different-nodes": Case(
        [slice_("slice-1", NODE1, POOL1, counter_sets={CS1: {"memory": "8Gi"}}),
         slice_("slice-2", NODE1, POOL1, devices=(dev("device-1", {CS1: {"memory": "6Gi"}}),)),
         slice_("slice-3", NODE2, POOL1, devices=(dev("device-2", {CS1: {"memory": "6Gi"}}),
                                                   dev("device-3", {CS1: {"memory": "2Gi"}})))],
        [claim("claim-0", request("req-0"))], [[("req-0", _a(POOL1, "device-3"))]],
        allocated=[_a(POOL1, "device-1")], node=NODE2),
    "partitionable-devices-validation-error-on-non-targeting-slice": Case(
        [slice_("slice-1", NODE1, POOL1, counter_sets={CS1: {"memory": "8Gi"}}),
         slice_("slice-2", NODE1, POOL1, devices=(dev("device-1", {CS1: {"memory": "6Gi"}}),)),
         slice_("slice-3", NODE2, POOL1, devices=(dev("device-3", {CS2: {"memory": "6Gi"}}, False),))],
        [claim("claim-0", request("req-0"))], None),
    "different-resourceslices-in-pool-can-target-different-nodes": Case(
        [slice_("slice-1", NODE2, POOL1, devices=(dev("device-1"),)),
         slice_("slice-2", NODE1, POOL1, devices=(dev("device-2"),))],
        [claim("claim-0", request("req-0"))], [[("req-0", _a(POOL1, "device-2"))]]),
    "tainted-two-devices": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(dev("device-1", taints=(TAINT_NO_SCHEDULE,)),
                                                   dev("device-2", taints=(TAINT_NO_EXECUTE,))))],
        [claim("claim-0", request("req-0"))], None),
    "tainted-one-device-two-taints": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(dev("device-1", taints=(TAINT_NO_SCHEDULE, TAINT_NO_EXECUTE)),))],
        [claim("claim-0", request("req-0"))], None),
    "tainted-two-devices-tolerated": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(dev("device-1", taints=(TAINT_NO_SCHEDULE,)),
                                                   dev("device-2", taints=(TAINT_NO_EXECUTE,))))],
        [claim("claim-0", request("req-0", tolerations=(TOLERATE_NO_EXECUTE,)))], [[("req-0", _a(POOL1, "device-2"))]]),
    "tainted-two-devices-prioritized-list-tolerated": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(dev("device-1", taints=(TAINT_NO_SCHEDULE,)),
                                                   dev("device-2", taints=(TAINT_NO_EXECUTE,))))],
        [claim("claim-0", prioritized("req-0", request("subReq-0"),
                                      request("subReq-1", tolerations=(TOLERATE_NO_EXECUTE,))))],
        [[("req-0/subReq-1", _a(POOL1, "device-2"))]]),
    "tainted-no-effect": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(dev("device-1", taints=(TAINT_NONE,)),))],
        [claim("claim-0", request("req-0"))], [[("req-0", _a(POOL1, "device-1"))]]),
    "tainted-one-device-two-taints-both-tolerated": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(dev("device-1", taints=(TAINT_NO_SCHEDULE, TAINT_NO_EXECUTE)),))],
        [claim("claim-0", request("req-0", tolerations=(TOLERATE_NO_SCHEDULE, TOLERATE_NO_EXECUTE)))],
        [[("req-0", _a(POOL1, "device-1"))]]),
    "tainted-prioritized-list": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(dev("device-1", taints=(TAINT_NO_SCHEDULE,)),))],
        [claim("claim-0", prioritized("req-0", request("subReq-0", "class-b"), request("subReq-1")))], None,
        classes=(DRIVER_A, DRIVER_B)),
    "tainted-all-devices-single": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(dev("device-1", taints=(TAINT_NO_SCHEDULE,)),))],
        [claim("claim-0", request("req-0", all_devices=True))], None),
}


def shared(name: str, capacity: str | None = None, policy: str | None = None, valid: tuple[str, ...] = (),
           attributes: dict[str, Any] | None = None, capacity_name: str = "capacity-0") -> dict:
    """device(name, ...).withAllowMultipleAllocations(), with capacity-0 of `capacity`; `policy`: "range"
    (withCapacityRequestPolicyRange: default 2, min 2, step 2, max 4) or "values" (withCapacityRequestPolicyValidValues:
    default `valid[0]`, validValues `valid`)."""
    out = dev(name, attributes=attributes)
    out["allowMultipleAllocations"] = True
    if capacity is not None:
        cap: dict[str, Any] = {"value": capacity}
        if policy == "range":
            cap["requestPolicy"] = {"default": "2", "validRange": {"min": "2", "step": "2", "max": "4"}}
        elif policy == "values":
            cap["requestPolicy"] = {"default": valid[0], "validValues": list(valid)}
        out["capacity"] = {capacity_name: cap}
    return out


def wants(req: dict, amount: str) -> dict:
    """withCapacityRequest: `amount` of capacity-0."""
    body = req.get("exactly", req)
    body["capacity"] = {"requests": {"capacity-0": amount}}
    return req


MULTI = ("multi",)  # classWithAllowMultipleAllocations(class-a, driver-a, true)
CAPACITY_CASES: dict[str, Case] = {
    "consumable-capacity-multi-allocatable-device-with-missing-capacity-request": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(shared("device-1", "1", capacity_name="capacity-1"),))],
        [claim("claim-0", wants(request("req-0"), "1"))], None),
    "consumable-capacity-multi-allocatable-device-without-capacity-without-capacity-request": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(shared("device-1"),))],
        [claim("claim-0", request("req-0")), claim("claim-1", request("req-0"))],
        [[("req-0", _a(POOL1, "device-1"))], [("req-0", _a(POOL1, "device-1"))]], classes=MULTI),
    "consumable-capacity-multi-allocatable-device-without-policy-without-capacity-request": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(shared("device-1", "1"), shared("device-2", "1")))],
        [claim("claim-0", request("req-0")), claim("claim-1", request("req-0"))],
        [[("req-0", _a(POOL1, "device-1"))], [("req-0", _a(POOL1, "device-2"))]], classes=MULTI,
        amounts=[["1"], ["1"]]),
    "consumable-capacity-multi-allocatable-device-without-policy-without-capacity-request-block": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(shared("device-1", "2"),))],
        [claim("claim-0", request("req-0")), claim("claim-1", request("req-0"))], None, classes=MULTI),
    "consumable-capacity-multi-allocatable-device-without-policy-with-capacity-request": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(shared("device-1", "2"),))],
        [claim("claim-0", wants(request("req-0"), "1")), claim("claim-1", wants(request("req-0"), "1"))],
        [[("req-0", _a(POOL1, "device-1"))], [("req-0", _a(POOL1, "device-1"))]], classes=MULTI, amounts=[["1"], ["1"]]),
    "consumable-capacity-multi-allocatable-device-with-policy-without-capacity-request": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(shared("device-1", "4", "range"),))],
        [claim("claim-0", request("req-0")), claim("claim-1", request("req-0"))],
        [[("req-0", _a(POOL1, "device-1"))], [("req-0", _a(POOL1, "device-1"))]], classes=MULTI, amounts=[["2"], ["2"]]),
    "consumable-capacity-multi-allocatable-device-with-zero-request-policy": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(shared("device-1", "1", "values", ("0",)),))],
        [claim("claim-0", request("req-0")), claim("claim-1", request("req-0"))],
        [[("req-0", _a(POOL1, "device-1"))], [("req-0", _a(POOL1, "device-1"))]], classes=MULTI, amounts=[["0"], ["0"]]),
    "consumable-capacity-multi-allocatable-device-violates-zero-request-policy": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(shared("device-1", "1", "values", ("0",)),))],
        [claim("claim-0", wants(request("req-0"), "1"))], None, classes=MULTI),
    "consumable-capacity-multi-allocatable-device-with-range-policy-with-capacity-request": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(shared("device-1", "4", "range"),))],
        [claim("claim-0", wants(request("req-0"), "1")), claim("claim-1", wants(request("req-0"), "1"))],
        [[("req-0", _a(POOL1, "device-1"))], [("req-0", _a(POOL1, "device-1"))]], classes=MULTI, amounts=[["2"], ["2"]]),
    "consumable-capacity-multi-allocatable-device-with-range-policy-step": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(shared("device-1", "4", "range"),))],
        [claim("claim-0", wants(request("req-0"), "3"))], [[("req-0", _a(POOL1, "device-1"))]], classes=MULTI, amounts=[["4"]]),
    "consumable-capacity-multi-allocatable-device-with-valid-values-policy": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(shared("device-1", "4", "values", ("1", "2")),))],
        [claim("claim-0", wants(request("req-0"), "2"))], [[("req-0", _a(POOL1, "device-1"))]], classes=MULTI, amounts=[["2"]]),
    "consumable-capacity-multi-allocatable-device-with-exceeded-consumable-capacity-request": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(shared("device-1", "2", "range"),))],
        [claim("claim-0", wants(request("req-0"), "1")), claim("claim-1", wants(request("req-0"), "2"))], None,
        classes=MULTI),
    "consumable-capacity-multi-allocatable-device-with-request-over-max-sharing-policy": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(shared("device-1", "10", "range"),))],
        [claim("claim-0", wants(request("req-0"), "6"))], None, classes=MULTI),
    "consumable-capacity-with-multi-allocatable-device-backtrack": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(
            shared("device-2", "2", "range", attributes={"stringAttribute": "stringAttributeValue1"}),
            shared("device-1", "4", "range", attributes={"stringAttribute": "stringAttributeValue2"})))],
        [claim("claim-0", wants(request("req-0"), "2"), wants(request("req-1"), "2"),
               match_attribute=f"{DRIVER_A}/stringAttribute"),
         claim("claim-1", wants(request("req-0"), "2"))],
        [[("req-0", _a(POOL1, "device-1")), ("req-1", _a(POOL1, "device-1"))], [("req-0", _a(POOL1, "device-2"))]], amounts=[["2", "2"], ["2"]]),
    "consumable-capacity-multi-allocatable-device-with-subrequest": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(shared("device-1", "2", "range"),))],
        [claim("claim-0", prioritized("req-0", wants(request("subReq-0"), "4"), wants(request("subReq-1"), "2"),
                                      request("subReq-1")))],
        [[("req-0/subReq-1", _a(POOL1, "device-1"))]], classes=MULTI, amounts=[["2"]]),
    "consumable-capacity-multi-allocatable-device-allocation-mode-all-filter-out-no-capacity": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(shared("device-1", "2"), shared("device-2")))],
        [claim("claim-0", wants(request("req-0", all_devices=True), "2"))], [[("req-0", _a(POOL1, "device-1"))]],
        classes=MULTI, amounts=[["2"]]),
    "consumable-capacity-multi-allocatable-device-allocation-mode-all-filter-out-insufficient-capacity": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(shared("device-1", "2"), shared("device-2", "1")))],
        [claim("claim-0", wants(request("req-0", all_devices=True), "2"))], [[("req-0", _a(POOL1, "device-1"))]],
        classes=MULTI, amounts=[["2"]]),
    "consumable-capacity-multi-allocatable-device-allocation-mode-all-allocating-sufficient": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(shared("device-1", "2"), shared("device-2", "1")))],
        [claim("claim-0", wants(request("req-0"), "1"), wants(request("req-1", all_devices=True), "1"))],
        [[("req-0", _a(POOL1, "device-1")), ("req-1", _a(POOL1, "device-1")), ("req-1", _a(POOL1, "device-2"))]],
        amounts=[["1", "1", "1"]]),
    "consumable-capacity-multi-allocatable-device-allocation-mode-all-allocating-insufficient": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(shared("device-1", "1"), shared("device-2", "1")))],
        [claim("claim-0", wants(request("req-0"), "1"), wants(request("req-1", all_devices=True), "1"))], None),
    "consumable-capacity-dedicated-device-with-consumable-capacity-request": Case(
        [slice_("slice-1", NODE1, POOL1, devices=({"name": "device-1", "capacity": {"capacity-0": {"value": "1"}}},))],
        [claim("claim-0", wants(request("req-0"), "1"))], [[("req-0", _a(POOL1, "device-1"))]], classes=("single",),
        amounts=[[]]),
    "consumable-capacity-requests-are-not-modified": Case(
        [slice_("slice-1", NODE1, POOL1, devices=({"name": "device-1", "allowMultipleAllocations": True, "capacity": {
            "capacity-0": {"value": "1000000000000000000002", "requestPolicy": {
                "default": "1000000000000000000000", "validRange": {"min": "2"}}}}},))],
        [claim("claim-0", wants(request("req-0"), "2"), wants(request("req-1"), "1000000000000000000000"))],
        [[("req-0", _a(POOL1, "device-1")), ("req-1", _a(POOL1, "device-1"))]],
        amounts=[["2", "1000000000000000000000"]]),
    "consumable-capacity-multi-allocatable-device-allocation-mode-all-in-use-sufficient": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(shared("device-1", "2"), shared("device-2", "1")))],
        [claim("claim-0", wants(request("req-0", all_devices=True), "1"))],
        [[("req-0", _a(POOL1, "device-1")), ("req-0", _a(POOL1, "device-2"))]], shares={_a(POOL1, "device-1"): "1"}),
    "consumable-capacity-multi-allocatable-device-allocation-mode-all-in-use-insufficient": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(shared("device-1", "1"), shared("device-2", "1")))],
        [claim("claim-0", wants(request("req-0", all_devices=True), "1"))], None, shares={_a(POOL1, "device-1"): "1"}),
    "consumable-capacity-multi-allocatable-device-with-allocated-capacity-use-remaining": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(shared("device-1", "4", "range"),))],
        [claim("claim-0", wants(request("req-0"), "2"))], [[("req-0", _a(POOL1, "device-1"))]], classes=MULTI,
        shares={_a(POOL1, "device-1"): "2"}, amounts=[["2"]]),
    "consumable-capacity-multi-allocatable-device-with-allocated-capacity-next-device": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(shared("device-1", "2", "range"), shared("device-2", "2", "range")))],
        [claim("claim-0", wants(request("req-0"), "2"))], [[("req-0", _a(POOL1, "device-2"))]], classes=MULTI,
        shares={_a(POOL1, "device-1"): "2"}, amounts=[["2"]]),
    "consumable-capacity-multi-allocatable-device-with-no-available-consumable-capacity": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(shared("device-1", "2", "range"),))],
        [claim("claim-0", wants(request("req-0"), "2"))], None, classes=MULTI, shares={_a(POOL1, "device-1"): "2"}),
    "allow-multiple-allocations-with-partitionable-device": Case(
        [slice_("slice-1", NODE1, POOL1, devices=tuple({**dev(f"device-{i}", {CS1: {"memory": m}}), "allowMultipleAllocations": True}
                                                       for i, m in ((1, "4Gi"), (2, "6Gi"), (3, "4Gi")))),
         slice_("slice-2", NODE1, POOL1, counter_sets={CS1: {"memory": "8Gi"}})],
        [claim("claim-0", request("req-0"), prioritized("req-1", request("subReq-0", selectors=(memory_at_least("6Gi"),)),
                                                        request("subReq-1", selectors=(memory_at_least("4Gi"),))))],
        [[("req-0", _a(POOL1, "device-1")), ("req-1/subReq-1", _a(POOL1, "device-3"))]], classes=MULTI),
    "allow-multiple-allocations-with-shared-device-counter-cross-cycle": Case(
        [slice_("slice-1", NODE1, POOL1, devices=tuple(
            {**dev(f"device-{i}", {CS1: {"capacity-0": "1"}}, attributes={"mode": mode}), "allowMultipleAllocations": True}
            for i, mode in ((1, "a"), (2, "b")))),
         slice_("slice-2", NODE1, POOL1, counter_sets={CS1: {"capacity-0": "1"}})],
        [claim("claim-0", wants(request("req-0", selectors=(f'device.attributes["{DRIVER_A}"].mode == "b"',)), "1"))],
        None, classes=MULTI, shares={_a(POOL1, "device-1"): "1"}),
    "partitionable-consumable-capacity-shared-device-counter-not-recharged": Case(
        [slice_("slice-1", NODE1, POOL1, devices=({**dev("device-1", {CS1: {"c": "1"}}, False),
                                                    "allowMultipleAllocations": True},)),
         slice_("slice-2", NODE1, POOL1, counter_sets={CS1: {"c": "1"}})],
        [claim("claim-0", request("req-0"))], [[("req-0", _a(POOL1, "device-1"))]], shares={_a(POOL1, "device-1"): None}),
    "allow-multiple-allocations-exclude-multi-allocatable-device-by-class-selector": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(shared("device-1", "1"),))],
        [claim("claim-0", wants(request("req-0"), "1"))], None, classes=("single",)),
    "allow-multiple-allocations-not-allocate-multi-allocatable-device-which-already-dedicated": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(shared("device-1", "2", "range"),))],
        [claim("claim-0", wants(request("req-0"), "1"))], None, classes=MULTI, allocated=[_a(POOL1, "device-1")]),
}
CASES.update(CAPACITY_CASES)


def admin(req: dict, all_devices: bool = False) -> dict:
    """Exactly.AdminAccess = true (and AllocationMode All)."""
    req["exactly"]["adminAccess"] = True
    if all_devices:
        req["exactly"].pop("count", None)
        req["exactly"]["allocationMode"] = "All"
    return req


TWO = (dev("device-1"), dev("device-2"))
ADMIN_CASES: dict[str, Case] = {
    "admin-access-enabled": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(dev("device-1"),))], [claim("claim-0", admin(request("req-0")))],
        [[("req-0", _a(POOL1, "device-1"))]], allocated=[_a(POOL1, "device-1"), _a(POOL1, "device-2")]),
    "all-devices-some-allocated-admin-access": Case(
        [slice_("slice-1", NODE1, POOL1, devices=TWO)], [claim("claim-0", admin(request("req-0"), all_devices=True))],
        [[("req-0", _a(POOL1, "device-1")), ("req-0", _a(POOL1, "device-2"))]], allocated=[_a(POOL1, "device-1")]),
    "all-devices-some-allocating-admin-access": Case(
        [slice_("slice-1", NODE1, POOL1, devices=TWO)],
        [claim("claim-0", admin(request("req-0")), admin(request("req-1"), all_devices=True))], None),
    "count-devices-some-allocated-admin-access": Case(
        [slice_("slice-1", NODE1, POOL1, devices=TWO)], [claim("claim-0", admin(request("req-0", count=2)))],
        [[("req-0", _a(POOL1, "device-1")), ("req-0", _a(POOL1, "device-2"))]], allocated=[_a(POOL1, "device-1")]),
    "separate-claims-share-device-admin-access": Case(
        [slice_("slice-1", NODE1, POOL1, devices=TWO)],
        [claim("claim-0", admin(request("req-0"))), claim("claim-1", admin(request("req-0")))],
        [[("req-0", _a(POOL1, "device-1"))], [("req-0", _a(POOL1, "device-1"))]]),
    "admin-access-claims-device-allocating-for-non-admin-access": Case(
        [slice_("slice-1", NODE1, POOL1, devices=TWO)],
        [claim("claim-0", request("req-0")), claim("claim-1", admin(request("req-0")))],
        [[("req-0", _a(POOL1, "device-1"))], [("req-0", _a(POOL1, "device-1"))]]),
    "tainted-admin-access": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(dev("device-1", taints=(TAINT_NO_SCHEDULE,)),))],
        [claim("claim-0", admin(request("req-0")))], None, allocated=[_a(POOL1, "device-1"), _a(POOL1, "device-2")]),
}
CASES.update(ADMIN_CASES)


def cond(device: dict, conditions: list[str], failures: list[str]) -> dict:
    """withBindingConditions(conditions, failures)."""
    return {**device, "bindingConditions": conditions, "bindingFailureConditions": failures}


def _b(device: str, conditions: str, failures: str) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    return _a(POOL1, device), (conditions,), (failures,)


BINDING_CASES: dict[str, Case] = {
    "device-binding-conditions": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(cond(dev("device-1"), ["IsPrepare"], ["BindingFailed"]),))],
        [claim("claim-0", request("req-0"))], [[("req-0", _a(POOL1, "device-1"))]],
        binding=[_b("device-1", "IsPrepare", "BindingFailed")]),
    "binding-conditions-multiple-devices": Case(
        [slice_("slice-1", NODE1, POOL1, devices=tuple(cond(dev(f"device-{i}"), [f"IsPrepare{s}"], [f"BindingFailed{s}"])
                                                       for i, s in ((1, ""), (2, "2"), (3, "3"))))],
        [claim("claim-0", request("req-0", count=2), request("req-1"))],
        [[("req-0", _a(POOL1, "device-1")), ("req-0", _a(POOL1, "device-2")), ("req-1", _a(POOL1, "device-3"))]],
        binding=[_b("device-1", "IsPrepare", "BindingFailed"), _b("device-2", "IsPrepare2", "BindingFailed2"),
                 _b("device-3", "IsPrepare3", "BindingFailed3")]),
    "binding-conditions-with-and-without": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(dev("device-1"), cond(dev("device-2"), ["IsPrepare"], ["BindingFailed"])))],
        [claim("claim-0", request("req-0"), request("req-1"))],
        [[("req-0", _a(POOL1, "device-1")), ("req-1", _a(POOL1, "device-2"))]],
        binding=[_b("device-2", "IsPrepare", "BindingFailed")]),
    "partitionable-devices-with-binding-conditions": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(cond(dev("device-1", {CS1: {"memory": "4Gi"}}), ["IsPrepare"],
                                                        ["BindingFailed"]),)),
         slice_("slice-2", NODE1, POOL1, counter_sets={CS1: {"memory": "8Gi"}})],
        [claim("claim-0", request("req-0"))], [[("req-0", _a(POOL1, "device-1"))]],
        binding=[_b("device-1", "IsPrepare", "BindingFailed")]),
    "partitionable-devices-with-binding-conditions-multiple": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(
            cond(dev("device-1", {CS1: {"memory": "4Gi"}}), ["IsPrepare"], ["BindingFailed"]),
            cond(dev("device-2", {CS1: {"memory": "4Gi"}}), ["IsPrepare2"], ["BindingFailed2"]))),
         slice_("slice-2", NODE1, POOL1, counter_sets={CS1: {"memory": "8Gi"}})],
        [claim("claim-0", request("req-0", count=2))],
        [[("req-0", _a(POOL1, "device-1")), ("req-0", _a(POOL1, "device-2"))]],
        binding=[_b("device-1", "IsPrepare", "BindingFailed"), _b("device-2", "IsPrepare2", "BindingFailed2")]),
    "partitionable-devices-with-binding-conditions-some-devices-no-conditions": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(
            cond(dev("device-1", {CS1: {"memory": "2Gi"}}), ["IsPrepare"], ["BindingFailed"]),
            dev("device-2", {CS1: {"memory": "2Gi"}}),
            cond(dev("device-3", {CS1: {"memory": "4Gi"}}), ["IsReady"], ["BindingTimeout"]))),
         slice_("slice-2", NODE1, POOL1, counter_sets={CS1: {"memory": "8Gi"}})],
        [claim("claim-0", request("req-0", count=3))],
        [[("req-0", _a(POOL1, f"device-{i}")) for i in (1, 2, 3)]],
        binding=[_b("device-1", "IsPrepare", "BindingFailed"), _b("device-3", "IsReady", "BindingTimeout")]),
}
CASES.update(BINDING_CASES)


def sized(name: str, memory: str) -> dict:
    """device(name, {"memory": memory}, nil)."""
    return {"name": name, "capacity": {"memory": {"value": memory}}}


def versioned(name: str, version: str, string: str) -> dict:
    """A device with a version attribute `driverVersion` and a string attribute `stringAttribute`."""
    return {"name": name, "attributes": {"driverVersion": {"version": version}, "stringAttribute": {"string": string}}}


# Upstream's allocator searches depth first over claims, requests and devices: a first choice that spoils a later
# request (or a later claim of the pod) is undone and the next one tried.
BACKTRACK_CASES: dict[str, Case] = {
    "small-and-large-backtrack-requests": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(sized("device-2", "2Gi"), sized("device-1", "1Gi")))],
        [claim("claim-0", request("req-0", selectors=(memory_at_least("1Gi"),)),
               request("req-1", selectors=(memory_at_least("2Gi"),)))],
        [[("req-0", _a(POOL1, "device-1")), ("req-1", _a(POOL1, "device-2"))]]),
    "small-and-large-backtrack-claims": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(sized("device-2", "2Gi"), sized("device-1", "1Gi")))],
        [claim("claim-0", request("req-0", selectors=(memory_at_least("1Gi"),))),
         claim("claim-1", request("req-1", selectors=(memory_at_least("2Gi"),)))],
        [[("req-0", _a(POOL1, "device-1"))], [("req-1", _a(POOL1, "device-2"))]]),
    "with-constraint-for-request-retry": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(versioned("device-1", "1.0.0", "a"),
                                                   versioned("device-2", "2.0.0", "b"),
                                                   versioned("device-3", "3.0.0", "b")))],
        [claim("claim-0", request("req-0"), request("req-1"),
               constraints=({"requests": ["req-0"], "matchAttribute": f"{DRIVER_A}/driverVersion"},
                            {"matchAttribute": f"{DRIVER_A}/stringAttribute"}))],
        [[("req-0", _a(POOL1, "device-2")), ("req-1", _a(POOL1, "device-3"))]]),
    "check-combinations-with-backtracking": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(dev("device-1", attributes={"type": "X"}),
                                                   dev("device-2", attributes={"type": "Y"}),
                                                   dev("device-3", attributes={"type": "Y"})))],
        [claim("claim-0", request("req-1", count=2),
               request("req-2", selectors=(f'device.attributes["{DRIVER_A}"].type == "X"',)))],
        [[("req-1", _a(POOL1, "device-2")), ("req-1", _a(POOL1, "device-3")), ("req-2", _a(POOL1, "device-1"))]]),
}
CASES.update(BACKTRACK_CASES)

# A pool is what its newest generation of slices says, once all `resourceSliceCount` of them are published: older
# generations are ignored, an incomplete pool allocates nothing ("all" fails), a device named twice in a pool makes
# it invalid.
POOL_CASES: dict[str, Case] = {
    "obsolete-slice": Case(
        [slice_("slice-1-obsolete", NODE1, POOL1, devices=(dev("device-1"),), count=2),
         slice_("slice-1-newer", NODE1, POOL1, devices=(dev("device-2"),), count=2, generation=2)],  # (one name
        # upstream, two objects here: a snapshot cannot hold one name twice)
        [claim("claim-0", request("req-0"))], None),
    "duplicate-slice": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(dev("device-1"),), count=2),
         slice_("slice-1-2", NODE1, POOL1, devices=(dev("device-1"),), count=2)],
        [claim("claim-0", request("req-0"))], None),
    "all-devices-of-the-incomplete-pool": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(dev("device-1"),), count=2)],
        [claim("claim-0", request("req-0", all_devices=True))], None),
    "no-allocation-from-incomplete-pools": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(dev("device-1"),), count=2)],
        [claim("claim-0", request("req-0"))], None),
    # ours, beside upstream's: the newer generation replaces the older one, whichever order they come in
    "newer-generation-replaces-older": Case(
        [slice_("slice-old", NODE1, POOL1, devices=(dev("device-1"),)),
         slice_("slice-new", NODE1, POOL1, devices=(dev("device-2"),), generation=2)],
        [claim("claim-0", request("req-0"))], [[("req-0", _a(POOL1, "device-2"))]]),
    "older-generation-after-newer-ignored": Case(
        [slice_("slice-new", NODE1, POOL1, devices=(dev("device-2", attributes={"type": "Y"}),), generation=2),
         slice_("slice-old", NODE1, POOL1, devices=(dev("device-1", attributes={"type": "X"}),))],
        [claim("claim-0", request("req-0", selectors=(f'device.attributes["{DRIVER_A}"].type == "X"',)))], None),
    "complete-pool-other-incomplete-all-fails": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(dev("device-1"),)),
         slice_("slice-2", NODE1, POOL2, devices=(dev("device-1"),), count=2)],
        [claim("claim-0", request("req-0", all_devices=True))], None),
    "complete-pool-other-incomplete-count": Case(
        [slice_("slice-1", NODE1, POOL1, devices=(dev("device-1"),)),
         slice_("slice-2", NODE1, POOL2, devices=(dev("device-1"),), count=2)],
        [claim("claim-0", request("req-0"))], [[("req-0", _a(POOL1, "device-1"))]]),
}
CASES.update(POOL_CASES)


def _docs(case: Case) -> list[dict]:
    nodes = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": n, "labels": {"region": r}},
              "status": {"allocatable": {"cpu": "8", "memory": "8Gi", "pods": "110"}}}
             for n, r in ((NODE1, "region-1"), (NODE2, "region-2"))]
    classes = [{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": f"class-{d[-1]}"},
                "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{d}"'}}]}} for d in case.classes
               if d not in ("multi", "single")]
    for flag, allowed in (("multi", "true"), ("single", "false")):  # classWithAllowMultipleAllocations
        if flag in case.classes:
            classes.append({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "class-a"},
                            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER_A}" && '
                                                                          f"device.allowMultipleAllocations == {allowed}"}}]}})
    held = []
    for i, key in enumerate(case.allocated):
        driver, pool, device = key.split("/")
        held.append({**claim(f"allocated-{i}", request("req")), "status": {"allocation": {"devices": {"results": [
            {"request": "req", "driver": driver, "pool": pool, "device": device}]}}}})
    for i, (key, amount) in enumerate(case.shares.items()):
        driver, pool, device = key.split("/")
        held.append({**claim(f"share-{i}", request("req")), "status": {"allocation": {"devices": {"results": [
            {"request": "req", "driver": driver, "pool": pool, "device": device,
             "shareID": f"aaaaaaaa-aaaa-aaaa-aaaa-{i:012d}",
             **({"consumedCapacity": {"capacity-0": amount}} if amount else {})}]}}}})
    return [*nodes, *classes, *_counted(case.slices), *case.claims, *held]


def _counted(slices: list[dict]) -> list[dict]:
    """Each slice with its pool's resourceSliceCount: as written, else how many slices the pool has in its
    generation."""
    def pool(s: dict) -> tuple:
        return s["spec"]["driver"], s["spec"]["pool"]["name"], s["spec"]["pool"]["generation"]
    sizes: dict[tuple, int] = {}
    for s in slices:
        sizes[pool(s)] = sizes.get(pool(s), 0) + 1
    return [s if "resourceSliceCount" in s["spec"]["pool"] else
            {**s, "spec": {**s["spec"], "pool": {**s["spec"]["pool"], "resourceSliceCount": sizes[pool(s)]}}}
            for s in slices]


@pytest.mark.parametrize("name", list(CASES))
def test_upstream_allocator_case(name: str) -> None:
    case = CASES[name]
    cluster = build_cluster([(f"doc{i}", d) for i, d in enumerate(_docs(case))])
    node = next(n for n in cluster.nodes if n.name == case.node)
    allocator = Allocator(cluster.devices)
    claims = [cluster.devices.claims[f"default/{c['metadata']['name']}"] for c in case.claims]
    got = allocator.allocate(claims, node, taken_devices(cluster.devices))
    if case.expect is None:
        assert got is None
        return
    assert got is not None
    assert [sorted(got[c.key]) for c in claims] == [sorted(e) for e in case.expect]
    if case.amounts is not None:
        shown = [[quantity(m) for r, d in got[c.key] for _, n, m in allocator.share_of(c.key, r, d) or ()
                  if n == "capacity-0"] for c in claims]
        assert shown == case.amounts
    results = allocation_results(allocator, got, node.name)
    for doc, c in zip(case.claims, claims):  # each result carries its request's device tolerations, as upstream's
        written = {r["name"]: r["exactly"].get("tolerations", []) for r in doc["spec"]["devices"]["requests"]
                   if "exactly" in r}
        written.update({f"{r['name']}/{s['name']}": s.get("tolerations", []) for r in doc["spec"]["devices"]["requests"]
                        for s in r.get("firstAvailable", ())})
        shown = allocation_status(results[c.key])["devices"]["results"]
        assert [r.get("tolerations", []) for r in shown] == [written[r["request"]] for r in shown]
    if case.binding is not None:
        assert sorted(results[claims[0].key].binding) == case.binding
    if case.selector is not None:
        by_key = {d.key: d for d in cluster.devices.devices}
        assert node_selector([by_key[d] for _, d in got[claims[0].key]]) == case.selector


def test_request_tolerations_are_copied_into_the_allocation_as_written() -> None:
    """DeviceRequestAllocationResult.tolerations: the request's tolerations when the device got allocated,
    tolerationSeconds included; a request without tolerations gets none."""
    tolerate = {"operator": "Exists", "key": "taint-key", "effect": "NoExecute", "tolerationSeconds": 300}
    case = Case([slice_("slice-1", NODE1, POOL1, devices=(dev("device-1", taints=(TAINT_NO_EXECUTE,)), dev("device-2")))],
                [claim("claim-0", request("req-0", tolerations=(tolerate,)), request("req-1"))], None)
    cluster = build_cluster([(f"doc{i}", d) for i, d in enumerate(_docs(case))])
    allocator = Allocator(cluster.devices)
    claims = [cluster.devices.claims["default/claim-0"]]
    got = allocator.allocate(claims, next(n for n in cluster.nodes if n.name == NODE1), set())
    assert got is not None
    shown = allocation_status(allocation_results(allocator, got, NODE1)["default/claim-0"])["devices"]["results"]
    assert {r["request"]: (r["device"], r.get("tolerations")) for r in shown} == {
        "req-0": ("device-1", [tolerate]), "req-1": ("device-2", None)}
