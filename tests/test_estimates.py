"""Estimates no worse than the plan's own backfill (issue 47, point 2): a waiting pod's estimate is the earliest start
the same planner gives it, stepped forward with every pod keeping its bound, backfill included.

The cases: pods told "the next cycle" while nothing frees for 30 minutes (the pods started now held no devices in
the sweep), and 10-minute pods promised "by 16:00" when the planner itself starts them at 12:30, before the gang's
13:00 reservation (the sweep counted the reservation's room as taken from the moment it was made). The property:
replaying the cluster from now, a cycle at every time a pod ends (each ending exactly at its bound, claims
deallocated as upstream's controller does), planning as the loop does beside the reservations it carries, every
pod with an estimate starts no later than it — or, where a reservation made since keeps it out, its reasons in that
cycle name it (the estimate could not know of it)."""
from __future__ import annotations

import copy
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dra_time_cases import NOON, SHAPES, at, gang_on_busy_nodes, nodes, running, three_for_two, waiting
from engine.loop.devices import allocation_status
from engine.planning.planner import Options, TimeInputs, plan_batch
from engine.reading.load import build_cluster
from engine.time.timeline import rfc3339, seconds
from test_dra_time import plan_at, starts

RESERVED = re.compile(r"(?:reserved for| and) (\S+) from ")  # holders a reason says the pod keeps off


@pytest.mark.parametrize("shape", SHAPES)
def test_a_pod_is_not_told_the_next_cycle_while_nothing_frees_for_30_minutes(shape: str) -> None:
    got = plan_at(three_for_two(shape))
    assert set(got.assignments) == {"default/job-0", "default/job-1"}
    assert starts(got) == {"default/job-2": at(12, 30)}
    assert not any("next cycle" in why for why in got.unschedulable["default/job-2"])
    assert not got.estimates["default/job-2"].next_cycle  # (the condition's start=next-cycle says the same)


# --- the replay -------------------------------------------------------------------------------------------------

def _bind(docs: list[dict], plan, t: float) -> None:
    """The plan's placements started at t: bound and running, their claims allocated (as the loop's PreBind writes
    them) and reserved for them."""
    by_name = {(d["kind"], d["metadata"].get("namespace", "default"), d["metadata"]["name"]): d for d in docs}
    for key, node_name in plan.assignments.items():
        ns, name = key.split("/")
        doc = by_name[("Pod", ns, name)]
        doc["spec"]["nodeName"] = node_name
        doc["status"] = {"phase": "Running", "startTime": rfc3339(t)}
        for claim_key, allocated in (plan.details.reserved.get(key, {}).get("DynamicResources") or {}).items():
            claim = by_name[("ResourceClaim", *claim_key.split("/"))]
            claim["status"] = {"allocation": allocation_status(allocated),
                               "reservedFor": [{"resource": "pods", "name": name, "uid": f"uid-{name}"}]}


def _end(docs: list[dict], t: float) -> list[dict]:
    """The cluster at t: pods whose bound has come are gone, and claims reserved only for them deallocated."""
    def done(d: dict) -> bool:
        deadline, started = d["spec"].get("activeDeadlineSeconds"), d.get("status", {}).get("startTime")
        return deadline is not None and started is not None and seconds(started) + deadline <= t
    gone = {d["metadata"]["name"] for d in docs if d["kind"] == "Pod" and done(d)}
    out = [d for d in docs if not (d["kind"] == "Pod" and d["metadata"]["name"] in gone)]
    for claim in (d for d in out if d["kind"] == "ResourceClaim"):
        users = [r["name"] for r in claim.get("status", {}).get("reservedFor", [])]
        if users and set(users) <= gone:
            claim["status"] = {}
    return out


def _next_end(docs: list[dict], t: float) -> float | None:
    ends = [seconds(d["status"]["startTime"]) + d["spec"]["activeDeadlineSeconds"] for d in docs
            if d["kind"] == "Pod" and d["spec"].get("nodeName") and d["spec"].get("activeDeadlineSeconds") is not None
            and d.get("status", {}).get("startTime")]
    later = [e for e in ends if e > t]
    return min(later, default=None)


def replay(docs: list[dict], first, now: float, until: float) -> tuple[dict[str, float], dict[str, list[str]]]:
    """Steps the clock from `now` to `until`, a cycle at each time a pod ends: when each pod started, and each
    pod's reasons in the cycles that left it out (by time, RFC 3339)."""
    docs = copy.deepcopy(docs)
    _bind(docs, first, now)
    started = dict.fromkeys(first.assignments, now)
    carried, why = first.reservations, {}
    t: float | None = now
    while (t := _next_end(docs, t)) is not None and t <= until:
        docs = _end(docs, t)
        cluster = build_cluster([(f"doc{i}", d) for i, d in enumerate(docs)])
        pending = {p.key for p in cluster.pending}
        kept = tuple(r for r in carried if all(k in pending for k, _ in r.pods))
        plan = plan_batch(cluster, options=Options(time_limit=5.0, workers=1),
                          time_inputs=TimeInputs(t, kept, carried=True, estimated={}))
        _bind(docs, plan, t)
        started.update(dict.fromkeys(plan.assignments, t))
        carried = plan.reservations
        for key, reasons in plan.unschedulable.items():
            why.setdefault(key, []).extend(f"{rfc3339(t)}: {r}" for r in reasons)
    return started, why


def assert_no_later_than_estimated(docs: list[dict], now: str = NOON) -> None:
    first = plan_at(docs, now)
    promised = {key: e.start for key, e in first.estimates.items() if e.start is not None}
    promised.update({key: r.start for r in first.reservations for key, _ in r.pods})
    if not promised:
        return
    started, why = replay(docs, first, seconds(now), max(promised.values()))
    made = {r.holder for r in first.reservations}
    for key, expected in promised.items():
        if started.get(key, float("inf")) <= expected:
            continue
        since = [w for w in why.get(key, []) if set(RESERVED.findall(w)) - made]  # a reservation made after
        assert since, (key, rfc3339(expected), rfc3339(started[key]) if key in started else None, why.get(key))


@pytest.mark.parametrize("shape", ["extended", "plain"])
def test_the_gang_case_replays_as_estimated(shape: str) -> None:
    assert_no_later_than_estimated(gang_on_busy_nodes(shape))


@st.composite
def timed_gpu_clusters(draw) -> list[dict]:
    """A few nodes of a few GPUs (served alike by `nvidia.com/gpu` or by DRA devices), each GPU busy till a time
    between 12:10 and 14:00 or free; pending: sometimes a gang of whole nodes (older, first in line) and a few 1- or
    2-GPU pods of 5 minutes to 3 hours. End times are few, so that the sweep plans at each."""
    shape = draw(st.sampled_from(SHAPES))
    count, gpus = draw(st.integers(1, 3)), draw(st.integers(2, 4))
    docs = nodes(count, gpus, shape)
    ends = draw(st.lists(st.sampled_from([at(12, 10), at(12, 30), at(13, 0), at(14, 0)]), min_size=1, max_size=3,
                         unique=True))
    for i in range(count):
        for k in range(gpus):
            end = draw(st.sampled_from([None, *ends]))
            if end is not None:
                docs += running(f"run-{i}-{k}", f"n{i}", k, end, shape)
    if draw(st.booleans()):
        docs.append({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                     "metadata": {"name": "big", "namespace": "default"}, "spec": {"minMember": count}})
        for k in range(count):
            docs += waiting(f"big-{k}", gpus, shape, 3600, at(9, 0),
                            labels={"scheduling.x-k8s.io/pod-group": "big"})
    for k in range(draw(st.integers(1, 5))):
        docs += waiting(f"small-{k}", draw(st.integers(1, 2)), shape, 60 * draw(st.sampled_from([5, 20, 60, 180])),
                        f"2026-11-25T11:{10 + k:02d}:00Z")
    return docs


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(timed_gpu_clusters())
def test_stepping_the_clock_to_an_estimate_starts_the_pod_by_then(docs) -> None:
    assert_no_later_than_estimated(docs)
