"""The planner's answers about later times (engine/time/timed_plan.py), and what keeps time cheap in a busy cluster.

Each piece here is a shortcut the plan with time takes so that it costs a loop cycle little at 50,000 running pods
(bench/time_cost.py); each test would fail if the shortcut changed an answer: the index at a later time made from
arrays equals the one made pod by pod; capacity alone never refuses what a plan places; a carried reservation is
kept only while it holds and nothing earlier could; estimates are swept again only every ESTIMATE_EVERY; rows and
class splits only where a reservation can bind.
"""

from __future__ import annotations

import threading
from dataclasses import replace

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.kinds import filter_node
from engine.kinds.context import Batch, ClassSpec
from engine.kinds.reservations import KIND
from engine.loop.cache import ClusterCache
from engine.loop.plan_stage import EARLIER_EVERY, ESTIMATE_EVERY, PlanStage
from engine.loop.profile import Profile, Settings
from engine.loop.store import Store
from engine.model.cluster import Cluster, Moment, Reservation
from engine.model.ir import Rules
from engine.model.tables import PodColumns
from engine.model.view import View
from engine.planning.compile import compile_cluster
from engine.planning.planner import Options, TimeInputs, plan_batch
from engine.reading.load import build_cluster
from engine.time.timed_plan import FutureRoom
from engine.time.timeline import fits, reserve, seconds
from test_timeline import GPU, NOON, at, gpu_pod, plan, running, snapshot, timed_clusters

NOW = seconds(NOON)
assert NOW is not None
CARRIED = Options(time_limit=5.0, workers=1)  # the loop's (its reservations carried: TimeInputs.carried)


def cluster_of(docs: list[dict]) -> Cluster:
    return build_cluster([(f"doc{i}", d) for i, d in enumerate(docs)])


def later(cluster: Cluster) -> FutureRoom:
    return FutureRoom.of(cluster, NOW, View.of(cluster.nodes, cluster.bound), None, 2.0, 0)


def carried(*held: Reservation) -> TimeInputs:
    """The loop's time inputs at noon: `held` carried from the last cycle."""
    return TimeInputs(NOW, held, carried=True)


# --- the view at a later time ------------------------------------------------------------------------------------

@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(timed_clusters(), st.integers(0, 400))
def test_the_view_at_a_later_time_is_the_one_made_pod_by_pod(docs, minutes) -> None:
    cluster = cluster_of(docs)
    room = later(cluster)
    t = seconds(NOON) + 60 * minutes
    added = tuple(replace(p, node_name=cluster.nodes[k % len(cluster.nodes)].name)
                  for k, p in enumerate(cluster.pending[:3]))
    view = room.base.without(room.ends <= t, added).settled()
    gone = [p for p, e in zip(room.base.pods, room.ends) if e <= t]
    slow = View.of(cluster.nodes, [p for p in room.base.pods if p not in gone] + list(added))
    assert [p.key for p in view.pods] == [p.key for p in slow.pods] and view.placed() == slow.placed()
    np.testing.assert_array_equal(view.usage.used, slow.usage.used)
    np.testing.assert_array_equal(view.usage.requested, slow.usage.requested)
    every = range(len(view.nodes))
    assert [view.ports_on(i) for i in every] == [slow.ports_on(i) for i in every]
    assert view.anti_terms() == slow.anti_terms()
    # the view's own columns and node positions (its later questions read them) are the ones read afresh
    kept, fresh = view.table.pod_columns(), PodColumns.of(slow.pods, slow.usage.names)
    for column in ("amounts", "named", "starts", "runtimes"):
        np.testing.assert_array_equal(getattr(kept, column)[:kept.size], getattr(fresh, column))
    np.testing.assert_array_equal(view.node_array(), np.asarray([i for i, _ in slow.placed()], dtype=np.int64))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(timed_clusters(), st.integers(0, 400))
def test_capacity_alone_never_refuses_what_a_plan_places(docs, minutes) -> None:
    cluster = cluster_of(docs)
    room = later(cluster)
    t = seconds(NOON) + 60 * minutes
    for unit in ([p for p in cluster.pending if p.gang], [p for p in cluster.pending if not p.gang][:4]):
        if unit and len(room.place(t, (), unit).where) == len(unit):
            assert room.enough(t, (), unit)


def test_capacity_alone_refuses_a_gang_before_its_room_frees() -> None:
    cluster, _ = plan()
    room = later(cluster)
    gang = [p for p in cluster.pending if p.gang]
    assert not room.enough(seconds(at(12, 10)), (), gang)  # n1 is whole at 12:10, n2 not until 12:20
    assert room.enough(seconds(at(12, 20)), (), gang) and fits(room, seconds(at(12, 20)), (), gang) is not None


# --- a carried reservation -----------------------------------------------------------------------------------------

def gang_of(cluster: Cluster) -> tuple:
    return tuple(p for p in cluster.pending if p.gang)


def test_a_carried_reservation_is_kept_while_it_holds_and_moves_when_the_cluster_changes() -> None:
    cluster, got = plan()
    held = got.reservations[0]
    assert (held.holder, held.start) == ("default/train", seconds(at(12, 20)))
    keys = [p.key for p in gang_of(cluster)]
    now = seconds(NOON)

    same = reserve(cluster, keys, now, later(cluster), prior=(held,))
    assert same == (held,)  # kept as it was: no search

    moved = replace(held, pods=tuple((k, "n3") for k, _ in held.pods))  # as if made when n3 and n4 were to free first
    kept = reserve(cluster, keys, now, later(cluster), prior=(moved,))
    assert kept == (moved,)  # its room there still holds at its start and nothing earlier than 12:20 could take it

    late = replace(held, start=seconds(at(14, 0)), pods=(("default/train-0", "n3"), ("default/train-1", "n4")),
                   need=(("n3", ((GPU, 8),)), ("n4", ((GPU, 8),))))
    (again,) = reserve(cluster, keys, now, later(cluster), prior=(late,))
    assert again.start == seconds(at(12, 20))  # the gang could start earlier (pods ended, say): it moves earlier
    assert reserve(cluster, keys, now, later(cluster), prior=(late,), earlier=False) == (late,)  # unless not asked

    taken = cluster_of(snapshot() + [running("other", "n2", at(23, 0))])  # another scheduler's pod on n2, till 23:00
    (after,) = reserve(taken, keys, now, later(taken), prior=(held,))
    assert after != held and after.start == seconds(at(14, 0))  # its room is gone: it moves later


# --- estimates swept again only every ESTIMATE_EVERY -------------------------------------------------------------

def stage_of(docs: list[dict]) -> tuple[Store, PlanStage, list[float]]:
    """A plan stage over a store of `docs`, its clock at noon (the list's one value: tests move it)."""
    store = Store()
    cache = ClusterCache(store.assumptions)
    store.subscribe(lambda change: cache.apply(change.kind, change.old, change.new))
    for doc in docs:
        doc["metadata"].setdefault("uid", doc["metadata"]["name"])
        store.apply(doc["kind"], "ADDED", doc)
    clock = [seconds(NOON)]
    stage = PlanStage("policy-scheduler", Settings((Profile("policy-scheduler"),)), store, cache, threading.Lock(),
                      wall=lambda: clock[0])
    return store, stage, clock


def test_the_plan_stage_sweeps_estimates_again_only_every_estimate_every() -> None:
    _, stage, clock = stage_of(snapshot() + [gpu_pod("later-0", deadline=4 * 3600, created=NOON)])
    stage.plan(["default/train-0", "default/train-1"], Rules())  # reserved: n1 and n2 from 12:20
    clock[0] += 1
    first = stage.plan([f"default/long-{k}" for k in range(4)], Rules())
    assert set(first.result.plan.estimates) == {f"default/long-{k}" for k in (1, 2, 3)}  # (long-0: reserved)
    clock[0] += 1
    second = stage.plan(["default/long-1", "default/later-0"], Rules())
    assert second.result.plan.estimates == {"default/long-1": first.result.plan.estimates["default/long-1"]}
    assert "default/later-0" in second.result.plan.unschedulable  # it waits, without an estimate until the next sweep
    clock[0] += ESTIMATE_EVERY
    third = stage.plan(["default/later-0"], Rules())
    assert third.result.plan.estimates["default/later-0"].start is not None


def test_the_plan_stage_asks_whether_a_reservation_moves_earlier_only_every_earlier_every() -> None:
    """n2's pods end before their bounds: the gang could start once n1's end, at 12:10. A cycle within
    EARLIER_EVERY of the last look keeps its reservation from 12:20 (still free then); the next look moves it."""
    docs = snapshot()
    store, stage, clock = stage_of(docs)
    gang = ["default/train-0", "default/train-1"]
    assert [r.start for r in stage.plan(gang, Rules()).result.plan.reservations] == [seconds(at(12, 20))]
    for doc in docs:
        if doc["kind"] == "Pod" and doc["spec"].get("nodeName") == "n2":
            store.apply("Pod", "DELETED", doc)
    clock[0] += 1
    assert [r.start for r in stage.plan(gang, Rules()).result.plan.reservations] == [seconds(at(12, 20))]
    clock[0] += EARLIER_EVERY
    assert [r.start for r in stage.plan(gang, Rules()).result.plan.reservations] == [seconds(at(12, 10))]


# --- rows and class splits only where a reservation can bind ------------------------------------------------------

def test_runtimes_split_classes_only_where_a_reservation_can_bind() -> None:
    """Six 1-GPU pods ending 12:01 … 12:06. A reservation from 12:03 of a node with no GPU free now (n2) binds
    nothing: no row, and the pods stay one class. One of n1, where 4 GPUs are free now but its 4 running pods still
    run at 12:03, keeps pods running past 12:03 off n1: two classes, and only those ending by then start there."""
    pods = [gpu_pod(f"p-{k}", deadline=60 * (k + 1), created=NOON) for k in range(6)]
    batch = cluster_of([d for d in snapshot() if d["kind"] != "Pod" or d["spec"].get("nodeName")] + pods)

    def held(where: str) -> Reservation:
        return Reservation("default/x", (("default/x", where),), seconds(at(12, 3)), ((where, ((GPU, 8),)),))
    assert len(compile_cluster(batch, moment=Moment(NOW)).classes) == 1
    assert len(compile_cluster(batch, moment=Moment(NOW, (held("n2"),))).classes) == 1
    assert len(compile_cluster(batch, moment=Moment(NOW, (held("n1"),))).classes) == 2
    assert len(plan_batch(batch, options=CARRIED, time_inputs=carried()).assignments) == 4  # n1's 4 free GPUs, to any
    placed = plan_batch(batch, options=CARRIED, time_inputs=carried(held("n1"))).assignments
    assert placed == {f"default/p-{k}": "n1" for k in range(3)}


def reserved_on_n1(gpus: int, *pods: dict) -> tuple[Cluster, Moment]:
    """The snapshot's running pods, `pods` pending, and n1 (4 GPUs free now, its 4 running pods there till 12:10)
    held from 12:03 for `gpus` GPUs: what is left there at 12:03 is 4 - gpus."""
    cluster = cluster_of([d for d in snapshot() if d["kind"] != "Pod" or d["spec"].get("nodeName")] + list(pods))
    return cluster, Moment(NOW, (
        Reservation("default/x", (("default/x", "n1"),), seconds(at(12, 3)), (("n1", ((GPU, gpus),)),)),))


ROW = f"{GPU} reserved for default/x from 2026-11-25T12:03:00Z"


def test_holders_of_reservations_go_first_among_their_priority() -> None:
    """n1: 4 GPUs free now, its 4 running pods there till 12:10. `a` then `b` hold 2 GPUs of n1 each, from 12:03 and
    12:02, so pods running past their starts may take 2 of the 4 beside either: `b` counts against `a`'s room, the
    younger pods against both. A plan may place three; the holders are two of them (they come first in line, though
    a younger pod's class asks more of the rows and the largest go first)."""
    pods = [gpu_pod(name, deadline=4 * 3600, created=created)
            for name, created in (("a", at(10, 0)), ("b", at(10, 30)), *((f"young-{k}", at(11, 30)) for k in range(4)))]
    cluster = cluster_of([d for d in snapshot() if d["kind"] != "Pod" or d["spec"].get("nodeName")] + pods)
    held = tuple(Reservation(f"default/{h}", ((f"default/{h}", "n1"),), seconds(at(12, m)), (("n1", ((GPU, 2),)),))
                 for h, m in (("a", 3), ("b", 2)))
    got = plan_batch(cluster, options=CARRIED, time_inputs=carried(*held)).assignments
    assert len(got) == 3 and {"default/a", "default/b"} <= set(got)


def test_two_reservations_starting_together_on_one_node_leave_room_for_both() -> None:
    """n1: 4 GPUs free now, its 4 running pods there till 12:10; `a` and `b` each hold 2 of its GPUs from 12:03 (all
    4 that are free then). A pod running past 12:03 would break one of them: the room `b` keeps is what is left
    beside `a`'s too, so a 4-hour pod takes none of it, a 2-minute one may."""
    cluster = cluster_of([d for d in snapshot() if d["kind"] != "Pod" or d["spec"].get("nodeName")]
                         + [gpu_pod("long", deadline=4 * 3600, created=NOON), gpu_pod("quick", deadline=120, created=NOON)])
    held = tuple(Reservation(f"default/{h}", ((f"default/{h}", "n1"),), seconds(at(12, 3)), (("n1", ((GPU, 2),)),))
                 for h in ("a", "b"))
    got = plan_batch(cluster, options=CARRIED, time_inputs=carried(*held))
    assert got.assignments == {"default/quick": "n1"}
    assert any(f"reserved for default/b from {at(12, 3)}" in why for why in got.unschedulable["default/long"])


def test_room_that_frees_early_goes_to_the_head_of_the_line_not_to_a_younger_reservation() -> None:
    """In line: `old` holds n2 from 12:20, then `young` holds n1 whole from 12:10. n1 has 4 GPUs free now. `old`
    may take them (room that frees before any bound says goes to the head of the line, as it would were `young`
    not reserved), `young` too (its own); `later`, behind both and running past 12:10, may not."""
    pods = [gpu_pod(name, deadline=4 * 3600, created=created)
            for name, created in (("old", at(10, 0)), ("young", at(11, 0)), ("later", at(11, 30)))]
    cluster = cluster_of([d for d in snapshot() if d["kind"] != "Pod" or d["spec"].get("nodeName")] + pods)
    got = plan_batch(cluster, options=CARRIED, time_inputs=carried(
        Reservation("default/old", (("default/old", "n2"),), seconds(at(12, 20)), (("n2", ((GPU, 1),)),)),
        Reservation("default/young", (("default/young", "n1"),), seconds(at(12, 10)), (("n1", ((GPU, 8),)),))))
    assert got.assignments == {"default/old": "n1", "default/young": "n1"}
    assert any(f"Insufficient {GPU} reserved for default/young" in why for why in got.unschedulable["default/later"])


def test_a_reservation_leaving_nothing_filters_its_nodes_and_one_leaving_some_makes_a_row() -> None:
    """Held whole (nothing left at its start), n1 is filtered out for pods running past the start: no row in the
    solver's problem, and the reason names the reservation. Held for 2 of its 4 free GPUs, 2 are left: a row lets
    at most two 1-GPU pods running past the start on n1, and a 3-GPU one is filtered out there."""
    long = [gpu_pod(f"long-{k}", deadline=4 * 3600, created=NOON) for k in range(4)]
    whole, held = reserved_on_n1(8, *long)
    assert not [r for r in compile_cluster(whole, moment=held).problem.resources if "reserved for" in r]
    got = plan_batch(whole, options=CARRIED, time_inputs=carried(*held.reservations))
    assert not got.assignments
    assert all(any(f"Insufficient {ROW}" in why for why in got.unschedulable[f"default/long-{k}"]) for k in range(4))

    some, held = reserved_on_n1(2, *long, gpu_pod("wide", gpus=3, deadline=4 * 3600, created=NOON))
    assert ROW in compile_cluster(some, moment=held).problem.resources
    got = plan_batch(some, options=CARRIED, time_inputs=carried(*held.reservations))
    assert len(got.assignments) == 2 and set(got.assignments.values()) == {"n1"}
    assert any(f"Insufficient {ROW}" in why for why in got.unschedulable["default/wide"])


def test_preemption_asks_the_reservation_what_an_eviction_frees_at_its_start() -> None:
    """n1 held from 12:03 for the 4 GPUs its running pods leave then: a pod running past it is refused there; once one
    of n1's pods running at 12:03 is evicted (upstream's RemovePod), one GPU is left at the start and a 1-GPU pod is
    not; a pod arriving there that also runs past the start takes that GPU again, one that ends before it does not.
    (Held for all 8, n1 would be 4 short at 12:03: one eviction leaves it 3 short, and no pod running past it fits.)"""
    cluster, held = reserved_on_n1(4, gpu_pod("long", deadline=4 * 3600, created=NOON))
    view = View.of(cluster.nodes, cluster.bound)
    spec = ClassSpec(0, cluster.pending[0], ())
    n1 = view.positions()["n1"]
    victim = next(p for p in cluster.bound if p.node_name == "n1")
    late = replace(cluster.pending[0], name="late", node_name="n1")
    early = replace(late, name="early", runtime=60)

    def refused(on: View, where: Cluster = cluster, moment: Moment = held) -> bool:
        return filter_node(spec, Batch.alone_on(where, on, moment), n1, (KIND,)) is not None

    assert refused(view)
    assert not refused(view.moved(removed=[victim]))
    assert refused(view.moved(removed=[victim], added=[late]))
    assert not refused(view.moved(removed=[victim], added=[early]))
    # a pod that ends before 12:03 gives nothing back by leaving: held for 5, n1 has 8 - 3 (running then) - 5 = 0
    ending = replace(victim, runtime=60)
    five, held5 = reserved_on_n1(5, gpu_pod("long", deadline=4 * 3600, created=NOON))
    short = replace(five, bound=[ending if p.key == victim.key else p for p in five.bound])
    assert refused(View.of(short.nodes, short.bound), short, held5)
    assert refused(View.of(short.nodes, short.bound).moved(removed=[ending]), short, held5)
    whole, held8 = reserved_on_n1(8, gpu_pod("long", deadline=4 * 3600, created=NOON))
    on_whole = View.of(whole.nodes, whole.bound)
    assert refused(on_whole.moved(removed=[victim]), whole, held8)


def test_a_promise_made_keeps_its_place_before_older_units_of_its_priority() -> None:
    """Reserved while long-0 was not in line, long-1 keeps its reservation (the second the defaults allow) when
    long-0, older and of the same priority, is back in line; the gang, of a higher priority, still comes first."""
    cluster, _ = plan()
    now = seconds(NOON)
    line = [p.key for p in cluster.pending]
    gang, first = reserve(cluster, [k for k in line if k != "default/long-0"], now, later(cluster))
    assert (gang.holder, first.holder) == ("default/train", "default/long-1")
    again = reserve(cluster, line, now, later(cluster), prior=(gang, first))
    assert [r.holder for r in again] == ["default/train", "default/long-1"]
    assert [r.holder for r in reserve(cluster, line, now, later(cluster))] == ["default/train", "default/long-0"]


def test_a_carried_reservation_counts_under_its_own_reserve_statement() -> None:
    """`reserve at most 1` over the 4-hour pods: long-1's reservation, carried from the last cycle (its pods not in
    this batch), fills that count, so long-0 gets none; it used to count under the defaults (its pods unknown)."""
    cluster, _ = plan()
    now = seconds(NOON)

    def limits(pod):
        return ("policy/long", 1, 7 * 24 * 3600) if pod.name.startswith("long-") else None
    first = ["default/train-0", "default/train-1", "default/long-1"]
    made = reserve(cluster, first, now, later(cluster), limits)
    assert [(r.holder, r.scope) for r in made] == [("default/train", ""), ("default/long-1", "policy/long")]
    rest = replace(cluster, pending=[p for p in cluster.pending if p.key not in first])
    got = reserve(rest, [p.key for p in rest.pending], now, later(rest), limits, kept=made)
    assert got[:2] == made and "default/long-0" not in {r.holder for r in got}  # its statement's one is held
