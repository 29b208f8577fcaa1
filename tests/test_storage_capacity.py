"""Storage capacity (issue 28 point 3): a claim left to a CSI driver that tracks capacity (CSIDriver
spec.storageCapacity) goes only where one of the driver's CSIStorageCapacity reports holds it (upstream's
VolumeBinding capacity check, "node(s) did not have enough free storage"), and StorageCapacityScoring (beta and on
in Kubernetes 1.37) prefers the node whose storage the pod's claims would use least: free CSI capacity for
provisioned claims, the matched PVs' size for static ones."""

from __future__ import annotations

import pytest

from engine.kinds.volume_binding import capacity_points
from engine.model.cluster import CapacityReport, ClaimUse, LabelSelector, Node, Requirement
from engine.reading.convert.fields import InputError
from engine.reading.load import build_cluster
from runner import run
from testkit.checker import check_plan
from testkit.manifests import HOSTNAME_KEY, claim, csi_driver, mounts, node, pod, storage_capacity, storage_class, volume

DRIVER = "csi.example.com"
GI = 1024**3


def provisioned(*extra: dict, tracked: bool = True) -> list[dict]:
    """Three nodes, a WaitForFirstConsumer class provisioned by DRIVER, a 10Gi claim and its pod."""
    return [node("n1"), node("n2"), node("n3"), storage_class("fast", provisioner=DRIVER), csi_driver(DRIVER, tracked),
            claim("data", size="10Gi", storage_class="fast"), pod("db", volumes=mounts("data")), *extra]


def planned(docs: list[dict]):
    plan = run(docs)
    assert check_plan(docs, plan.assignments) == []
    return plan


def test_a_tracked_claim_goes_only_where_a_report_holds_it() -> None:
    docs = provisioned(storage_capacity("c1", "fast", "5Gi", node="n1"), storage_capacity("c2", "fast", "50Gi", node="n2"),
                       storage_capacity("other-class", "slow", "50Gi", node="n3"))
    assert planned(docs).assignments == {"default/db": "n2"}


def test_no_report_big_enough_leaves_the_pod_out_in_upstream_s_words() -> None:
    docs = provisioned(storage_capacity("c1", "fast", "5Gi", node="n1"), storage_capacity("c2", "fast", "50Gi"))
    plan = planned(docs)  # c2 has no nodeTopology: it is on no node
    assert plan.unschedulable["default/db"][0] == "0/3 nodes are available: 3 node(s) did not have enough free storage."


def test_the_maximum_volume_size_limits_one_volume_before_the_capacity_does() -> None:
    docs = provisioned(storage_capacity("c1", "fast", "100Gi", node="n1", maximum_volume_size="8Gi"),
                       storage_capacity("c2", "fast", "20Gi", node="n2", maximum_volume_size="12Gi"))
    assert planned(docs).assignments == {"default/db": "n2"}


def test_a_driver_that_does_not_track_capacity_is_not_checked() -> None:
    docs = provisioned(storage_capacity("c1", "fast", "1Gi", node="n1"), tracked=False)
    assert run(docs).assignments["default/db"] in {"n1", "n2", "n3"}


def test_the_node_with_the_most_free_capacity_is_preferred() -> None:
    docs = provisioned(storage_capacity("c1", "fast", "20Gi", node="n1"), storage_capacity("c2", "fast", "200Gi", node="n2"),
                       storage_capacity("c3", "fast", "40Gi", node="n3"))
    assert planned(docs).assignments == {"default/db": "n2"}


def test_static_bindings_prefer_the_node_whose_volume_the_claim_fills_least() -> None:
    docs = [node("n1"), node("n2"), storage_class("local"), volume("small", size="12Gi", node="n1"),
            volume("big", size="100Gi", node="n2"), claim("data", size="10Gi"), pod("db", volumes=mounts("data"))]
    assert planned(docs).assignments == {"default/db": "n2"}


def _use(request: int, *reports: CapacityReport, storage_class: str = "fast") -> ClaimUse:
    return ClaimUse(storage_class, request, frozenset({"ReadWriteOnce"}), False, None, DRIVER, None, reports)


def _report(name: str, capacity: int, where: str = "n1", storage_class: str = "fast") -> CapacityReport:
    return CapacityReport(f"default/{name}", storage_class, LabelSelector((Requirement(HOSTNAME_KEY, "In", (where,)),)),
                          capacity, None)


def test_points_follow_the_default_shape_per_class_averaged() -> None:
    n1 = Node("n1", {HOSTNAME_KEY: "n1"}, {"pods": 110})
    quarter = _use(10 * GI, _report("a", 40 * GI))
    assert capacity_points((quarter,), [], n1) == 75
    assert capacity_points((_use(40 * GI, _report("a", 40 * GI)),), [], n1) == 0
    other = _use(3 * GI, _report("b", 10 * GI, storage_class="slow"), storage_class="slow")
    assert capacity_points((quarter, other), [], n1) == 73  # (75 + 70) / 2, rounded half up
    untracked = ClaimUse("fast", GI, frozenset({"ReadWriteOnce"}), False, None, DRIVER, None, None)
    assert capacity_points((untracked,), [], n1) == 0  # nothing known of its size


def test_a_malformed_report_refuses_it_by_name() -> None:
    bad = storage_capacity("c1", "fast", "lots", node="n1")
    with pytest.raises(InputError, match=r"(?s)CSIStorageCapacity default/c1.*capacity"):
        build_cluster([("test", bad)], "policy-scheduler")
