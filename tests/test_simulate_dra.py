"""`simulate` replays GPUs as DRA devices (issue 52): node labels, a ResourceSlice per node, one DeviceClass, a
ResourceClaim per pod made from its job's `claim`, and the allocations a started job's plan made kept in the world
until it ends, so later cycles see its devices (and the capacity its shares consume) as taken."""
from __future__ import annotations

import collections
from pathlib import Path

import pytest

from engine.time import openb
from engine.time import simulate as S
from engine.time.simulate import TraceError, replay, trace_of

CASES = Path(__file__).parent / "cases"
WHOLE = 1000 * 1000  # a device's 1000 milli of capacity, in the model's milli-units


def gpu_node(prefix: str) -> dict:
    return {"count": 1, "prefix": prefix, "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"},
            "labels": {"gpu.openb/model": "T4"},
            "devices": [{"name": "gpu-0", "attributes": {"model": {"string": "T4"}},
                         "capacity": {"milli": {"value": "1000"}}, "allowMultipleAllocations": True}]}


def job(name: str, arrival: float, milli: int | None = None, runtime: float = 100) -> dict:
    exactly: dict = {"deviceClassName": "gpu.openb", "count": 1}
    if milli is not None:
        exactly["capacity"] = {"requests": {"milli": str(milli)}}
    return {"name": name, "arrival": arrival, "runtime": runtime, "requests": {"cpu": "1"},
            "claim": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}


# two nodes of one GPU each; every job arrives while the earlier ones run, so a world that forgot a started job's
# allocation would hand its device out again: a second whole GPU job onto the first one's, shares past 1000 milli
TRACE = {"nodes": [gpu_node("a"), gpu_node("b")],
         "jobs": [job("whole-1", 0), job("share-1", 10, 600), job("whole-2", 20), job("share-2", 30, 600),
                  job("share-3", 40, 300), job("share-4", 150, 500)]}


def device_use(claims) -> tuple[dict[str, int], dict[str, int]]:
    """Per device: how many claims hold it whole, and the capacity shares consume."""
    whole: collections.Counter[str] = collections.Counter()
    shared: collections.Counter[str] = collections.Counter()
    for claim in claims:
        parts = {d for d, _ in claim.shares}
        whole.update(d for d in claim.allocated or () if d not in parts)
        for device, consumed in claim.shares:
            shared[device] += sum(milli for _, _, milli in consumed)
    return whole, shared


def checked_replays(monkeypatch, mode: str, keep: bool = True):
    """The replay, with the devices the running jobs' plans allocated checked at every cycle once its jobs have
    started (recorded as the plans made them; `keep` False: the world is not told, as before)."""
    seen: list[dict[str, int]] = []
    made: dict[str, tuple] = {}
    allocated, begin = S._allocated, S._World.begin

    def recording(models, reserved):
        made[models.job.name] = allocated(models, reserved)
        return made[models.job.name] if keep else ()

    def checking(self, started, t, allocated=None):
        begin(self, started, t, allocated)
        whole, shared = device_use(c for name in self.running for c in made.get(name, ()))
        assert all(n == 1 for n in whole.values()), f"t={t}: a device held whole twice: {whole}"
        assert not set(whole) & set(shared), f"t={t}: a device held whole is shared too: {whole}, {shared}"
        assert all(m <= WHOLE for m in shared.values()), f"t={t}: a device overcommitted: {shared}"
        seen.append(dict(shared))

    monkeypatch.setattr(S, "_allocated", recording)
    monkeypatch.setattr(S._World, "begin", checking)
    return replay(trace_of(TRACE), mode), seen


@pytest.mark.parametrize("mode", S.MODES)
def test_started_jobs_keep_their_devices_so_none_is_double_booked(monkeypatch, mode) -> None:
    run, seen = checked_replays(monkeypatch, mode)
    assert set(run.starts) == {j["name"] for j in TRACE["jobs"]}  # devices free again when their jobs end
    assert run.starts["whole-2"] >= 100 and run.starts["share-2"] >= 100  # both devices taken until a job ends
    assert any(m == 900 * 1000 for use in seen for m in use.values())  # 600 and 300 share a device


def test_without_keeping_the_allocations_devices_are_double_booked(monkeypatch) -> None:
    """The check above catches what the replay did before: a started job's claims forgotten."""
    with pytest.raises(AssertionError, match=r"held whole twice|shared too|overcommitted"):
        checked_replays(monkeypatch, "batch", keep=False)


def test_the_world_builds_labels_slices_a_device_class_and_a_claim_per_pod() -> None:
    trace = trace_of(TRACE)
    world = S._World.of(trace)
    assert world.base.nodes[0].labels["gpu.openb/model"] == "T4"
    assert len(world.base.devices.devices) == 2 and list(world.base.devices.classes) == ["gpu.openb"]
    models = S._models(trace.jobs[1])
    assert [c.name for c in models.claims] == ["share-1-0-claim"]
    assert models.pods[0].resource_claims == (("claim", "share-1-0-claim"),)


def test_the_converted_openb_sample_replays_end_to_end() -> None:
    nodes = openb.read_nodes(str(CASES / "openb-nodes.csv"))
    tasks = openb.read_tasks(str(CASES / "openb-tasks.csv"))
    trace = trace_of(openb.trace(nodes, tasks, "dra"))
    assert any(s.devices for s in trace.nodes) and any(j.claim for j in trace.jobs)
    for mode in S.MODES:
        assert set(replay(trace, mode).starts) == {t.name for t in tasks}
    whole = [t for t in tasks if not t.shared]  # extended resources: gpu_spec as a node affinity on the model label
    extended = trace_of(openb.trace(nodes, whole, "extended"))
    run = replay(extended, "batch")
    assert set(run.starts) == {t.name for t in whole} and any(j.affinity for j in extended.jobs)


def test_a_malformed_claim_or_devices_entry_is_refused_naming_it() -> None:
    with pytest.raises(TraceError, match=r"nodes\[0\]: devices must be a list"):
        trace_of({**TRACE, "nodes": [{**gpu_node("a"), "devices": "gpu-0"}]})
    with pytest.raises(TraceError, match="job 'x': claim must be a mapping"):
        trace_of({**TRACE, "jobs": [{**job("x", 0), "claim": "gpu"}]})


def test_with_time_a_waiting_job_is_promised_the_device_when_its_holder_reaches_its_bound() -> None:
    """batch-time: a kept claim is reserved for the running pod, so the plan sees it free at that pod's bound
    (engine.time.dra_time) and promises the device then, instead of holding it for ever."""
    bounded = [{**job("whole-1", 0), "limit": 100}, {**job("whole-2", 10), "limit": 100},
               {**job("share-1", 20, 500), "limit": 100}]
    run = replay(trace_of({"nodes": TRACE["nodes"][:1], "jobs": bounded}), "batch-time")
    assert run.promised == {"whole-2": 100.0, "share-1": 200.0} and not run.delayed()
    assert run.starts == {"whole-1": 0.0, "whole-2": 100.0, "share-1": 200.0}
