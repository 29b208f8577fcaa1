"""Time in the plan with DRA (issue 47, point 1): devices allocated to running pods free when those pods end, as
`nvidia.com/gpu` does. A running pod holds its GPUs through ResourceClaims allocated to it (status.allocation, its
name in status.reservedFor); once every pod a claim is reserved for has ended by its bound, upstream's resourceclaim
controller deallocates it, so at that time its devices, its share of a shared counter and its consumed capacity are
free again. Each case is asked with extended resources and with DRA devices of each shape (tests/dra_time_cases.py),
and the answers must agree."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dra_time_cases import NOON, SHAPES, at, gang_on_busy_nodes, half_and_half, nodes, running, two_devices, waiting
from engine.planning.planner import Options, TimeInputs, plan_batch
from engine.reading.load import build_cluster
from engine.time.timeline import seconds

CASE = Path(__file__).parent / "cases" / "dra-time-two-devices.yaml"


def plan_at(docs: list[dict], now: str = NOON, **options):
    cluster = build_cluster([(f"doc{i}", d) for i, d in enumerate(docs)])
    return plan_batch(cluster, options=Options(**{"time_limit": 5.0, "workers": 1, **options}),
                      time_inputs=TimeInputs(seconds(now)))


def starts(plan) -> dict[str, str]:
    """Each waiting pod's expected start: its reservation's or its estimate's (RFC 3339), or why there is none."""
    shown = plan.to_dict()
    out = {key: r["start"] for key, r in (shown.get("reservations") or {}).items()}
    for key, e in (shown.get("estimates") or {}).items():
        out[key] = e.get("start") or e["unknown"]
    return out


def test_dry_run_expects_the_pod_at_12_30_when_a_device_frees(tmp_path) -> None:
    """The issue's first case, as a user writes it (tests/cases/dra-time-two-devices.yaml): `dry-run --now 12:00`
    said "not estimated: it does not fit even once every running pod … has ended", with no reservation."""
    out = subprocess.run([sys.executable, "-m", "engine", "dry-run", "--cluster", str(CASE), "-q", "--now", NOON,
                          "-o", "json"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    shown = json.loads(out.stdout)
    assert shown["reservations"] == {"default/eval": {"node": "gpu-node", "start": at(12, 30), "for": "default/eval"}}
    assert any("expected to start on gpu-node at 2026-11-25T12:30:00Z" in why for why in shown["unschedulable"]["default/eval"])
    assert "not estimated" not in out.stdout


@pytest.mark.parametrize("shape", SHAPES)
def test_one_node_two_gpus_each_held_till_12_30(shape: str) -> None:
    got = plan_at(two_devices(shape))
    assert not got.assignments
    assert starts(got) == {"default/eval": at(12, 30)}
    (held,) = got.reservations
    assert [node for _, node in held.pods] == ["n0"]
    if shape != "extended":  # the device it starts on, which a running pod holds until then
        (claim,) = held.claims
        assert claim.key == "default/eval-gpu" and claim.allocated and claim.allocated[0].startswith("gpu.example.com/n0/")


@pytest.mark.parametrize("shape", ["partitionable", "consumable"])
def test_a_half_frees_with_its_pod_and_a_whole_gpu_with_both(shape: str) -> None:
    """One GPU in halves (partitions sharing its counters, or 20Gi shares of its 40Gi), held by pods ending at 12:30
    and 13:00: a half is free at 12:30; the whole GPU only at 13:00, when the counter (the capacity) is all free."""
    assert starts(plan_at(half_and_half(shape, half=True))) == {"default/eval": at(12, 30)}
    assert starts(plan_at(half_and_half(shape, half=False))) == {"default/eval": at(13, 0)}


def test_a_claim_still_reserved_for_a_pod_without_a_bound_never_frees() -> None:
    """A claim frees when its last consumer goes: one reserved for a pod with no bound, or for a consumer the
    snapshot does not know (here a PodGroup), stays allocated, and the waiting pod cannot be estimated."""
    docs = [*nodes(1, 1, "plain"), *running("a", "n0", 0, at(12, 30), "plain"), *waiting("eval", 1, "plain", 600, at(11, 50))]
    claim = next(d for d in docs if d["kind"] == "ResourceClaim" and d["metadata"]["name"] == "a-gpu")
    claim["status"]["reservedFor"].append({"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "a",
                                           "uid": "uid-group"})
    assert "does not fit even once" in starts(plan_at(docs))["default/eval"]
    claim["status"]["reservedFor"].pop()
    assert starts(plan_at(docs)) == {"default/eval": at(12, 30)}


@pytest.mark.parametrize("shape", SHAPES)
def test_a_gang_on_busy_nodes_is_reserved_at_13_00_and_ten_minute_pods_start_at_12_30(shape: str) -> None:
    """8 nodes × 8 GPUs, all busy; a v1beta1 gang of 8 × 2 GPUs is reserved at 13:00, when two GPUs a node are free,
    as with extended resources; the four 10-minute pods are expected at 12:30, when one GPU a node frees: they end
    before the gang's start, so the planner backfills them then (they were told 16:00)."""
    got = plan_at(gang_on_busy_nodes(shape))
    assert not got.assignments
    gang = next(r for r in got.reservations if r.holder == "default/train")
    assert gang.start == seconds(at(13, 0)) and sorted(n for _, n in gang.pods) == [f"n{i}" for i in range(8)]
    assert {k: v for k, v in starts(got).items() if k.startswith("default/quick-")} == {
        f"default/quick-{k}": at(12, 30) for k in range(4)}
    if shape != "extended":
        assert len(gang.claims) == 8 and all(len(c.allocated or ()) == 2 for c in gang.claims)


def test_extended_and_dra_reserve_alike() -> None:
    """The gang's reservation, node for node, is the same whatever serves the GPUs."""
    def reserved(shape: str) -> list[tuple[str, float, tuple]]:
        return sorted((r.holder, r.start, r.pods) for r in plan_at(gang_on_busy_nodes(shape)).reservations)
    assert reserved("plain") == reserved("extended") == reserved("partitionable") == reserved("consumable")


@pytest.mark.parametrize("shape", ["plain", "consumable"])
def test_pods_running_past_a_reservation_keep_off_its_devices(shape: str) -> None:
    """Backfill with devices: one node of four GPUs, two free now and two held till 12:20; a 4-GPU pod first in line
    is reserved there from 12:20, holding all four. A 10-minute pod may take a free GPU now (it ends by 12:10); a
    4-hour one may not (it would still run at 12:20), and says which reservation it keeps off."""
    docs = [*nodes(1, 4, shape), *running("a", "n0", 0, at(12, 20), shape), *running("b", "n0", 1, at(12, 20), shape),
            *waiting("big", 4, shape, 3600, at(9, 0)), *waiting("long", 1, shape, 4 * 3600, at(11, 0)),
            *waiting("short", 1, shape, 600, at(11, 30))]
    got = plan_at(docs)
    (held,) = [r for r in got.reservations if r.holder == "default/big"]
    assert held.start == seconds(at(12, 20))
    assert got.assignments == {"default/short": "n0"}
    assert any("reserved for default/big from 2026-11-25T12:20:00Z" in why for why in got.unschedulable["default/long"])
    short = got.details.reserved["default/short"]["DynamicResources"]
    (allocation,) = short.values()
    assert {d for _, d in allocation.devices} <= {"gpu.example.com/n0/gpu-2", "gpu.example.com/n0/gpu-3"}


def test_without_bounds_a_running_pod_holds_its_device_for_ever() -> None:
    docs = [*nodes(1, 1, "plain"), *running("a", "n0", 0, at(12, 30), "plain"), *waiting("eval", 1, "plain", 600, at(11, 50))]
    run = next(d for d in docs if d["kind"] == "Pod" and d["metadata"]["name"] == "a")
    del run["spec"]["activeDeadlineSeconds"]
    assert "does not fit even once" in starts(plan_at(docs))["default/eval"]


def test_a_pod_waiting_for_objects_is_not_told_it_does_not_fit_once_pods_end() -> None:
    """A pod whose ResourceClaim is not created yet (from a template) or missing, or whose gang lacks members, waits
    for objects, not for room: no running pod's end helps, so it is neither reserved for nor said not to fit."""
    from testkit.manifests import podgroup

    template = waiting("tmpl", 1, "plain", 600, at(11, 40))[0]
    template["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    missing = waiting("missing", 1, "plain", 600, at(11, 41))[0]  # (its claim is not in the snapshot)
    gang = [podgroup("g", 3), *(d for k in range(2) for d in waiting(
        f"g-{k}", 1, "plain", 600, at(11, 42), labels={"scheduling.x-k8s.io/pod-group": "g"}))]
    got = plan_at([*nodes(1, 1, "plain"), *running("a", "n0", 0, at(12, 30), "plain"), template, missing, *gang])
    assert not got.reservations
    told = starts(got)
    assert set(told) == {"default/tmpl", "default/missing", "default/g-0", "default/g-1"}
    assert all("not for running pods to end" in why and "does not fit" not in why for why in told.values())
    assert "ResourceClaims" in told["default/tmpl"] and "gang default/g" in told["default/g-0"]
