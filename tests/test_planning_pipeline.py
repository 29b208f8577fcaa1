"""The planning pipeline in plain sight (issue 48, point 5): place → reserve in time → preempt, over one frozen
`PlanningContext`, isolation around the whole of it; the time a batch is planned at, and what the loop carries from
cycle to cycle, one input beside a frozen `Cluster` (`TimeInputs`, `Moment`), never written on it.
"""

from __future__ import annotations

import dataclasses

import pytest

import engine.planning.planner as planner
from engine.model.cluster import Cluster, Moment, Reservation
from engine.model.ir import Rules
from engine.planning.planner import Options, PlanningContext, TimeInputs, plan_batch
from engine.reading.load import build_cluster
from engine.time.timeline import seconds
from test_timed_plan import stage_of
from test_timeline import GPU, NOON, at, gpu_pod, snapshot
from testkit.manifests import node, priority_class

NOW = seconds(NOON)
OPTIONS = Options(time_limit=5.0, workers=1)


def cluster_of(docs: list[dict]) -> Cluster:
    return build_cluster([(f"doc{i}", d) for i, d in enumerate(docs)])


def spy(monkeypatch, name: str, seen: list) -> None:
    """Record each call of the planner's stage `name` (its name, context and arguments) and run it."""
    real = getattr(planner, name)

    def stage(context: PlanningContext, *plans):
        seen.append((name, context, plans))
        out = real(context, *plans)
        seen.append((f"{name} done", context, (out,)))
        return out
    monkeypatch.setattr(planner, name, stage)


def test_the_pipeline_runs_place_then_reserve_then_preempt_each_on_the_plan_before() -> None:
    seen: list = []
    with pytest.MonkeyPatch.context() as monkeypatch:
        for name in ("place", "reserve", "preempt"):
            spy(monkeypatch, name, seen)
        got = plan_batch(cluster_of(snapshot()), options=OPTIONS, time_inputs=TimeInputs(NOW))
    assert [name for name, _, _ in seen] == ["place", "place done", "reserve", "reserve done", "preempt",
                                             "preempt done"]
    (placed,), (handed_to_reserve,) = seen[1][2], seen[2][2]
    (reserved,), (handed_to_preempt,) = seen[3][2], seen[4][2]
    assert handed_to_reserve is placed and handed_to_preempt is reserved and seen[5][2][0] is got
    contexts = {id(context) for _, context, _ in seen}
    assert len(contexts) == 1  # one context, read by every stage
    assert got.reservations and not placed.reservations  # time came in with the reserve stage


def test_isolation_wraps_the_whole_pipeline_not_only_the_first_plan(monkeypatch) -> None:
    """A stage after `place` raising for one pod's sake refuses that pod alone: isolation narrows the whole pipeline
    (each probe runs every stage), and the rest is planned in the same call."""
    real = planner.reserve

    def reserve(context: PlanningContext, plan):
        if any(p.name == "long-2" for p in context.cluster.pending):
            raise RuntimeError("reserve failed for long-2")
        return real(context, plan)
    monkeypatch.setattr(planner, "reserve", reserve)
    got = plan_batch(cluster_of(snapshot()), options=OPTIONS, time_inputs=TimeInputs(NOW))
    assert [f.pods for f in got.details.failures] == [("default/long-2",)]
    assert "reserve failed for long-2" in got.unschedulable["default/long-2"][0]
    assert {f"default/short-{k}" for k in range(4)} <= set(got.assignments)  # the rest, planned with time as ever
    assert [r.holder for r in got.reservations][:1] == ["default/train"]


def test_a_cluster_is_frozen_and_carries_no_time() -> None:
    cluster = cluster_of(snapshot())
    with pytest.raises(dataclasses.FrozenInstanceError):
        cluster.pending = []  # type: ignore[misc]
    with pytest.raises((AttributeError, TypeError)):  # not a field: (3.11's slots raise TypeError)
        cluster.now = NOW  # type: ignore[attr-defined]
    assert not {"now", "reservations"} & {f.name for f in dataclasses.fields(Cluster)}


def test_the_dry_run_plans_once_now_then_again_beside_the_reservations_it_worked_out() -> None:
    """Not carried: `place` plans at now beside nothing, `reserve` makes the reservations and plans the batch again
    beside them (the plan returned is that one)."""
    seen: list = []
    with pytest.MonkeyPatch.context() as monkeypatch:
        spy(monkeypatch, "reserve", seen)
        got = plan_batch(cluster_of(snapshot()), options=OPTIONS, time_inputs=TimeInputs(NOW))
    (first,) = seen[0][2]
    assert first.details.compiled.moment == Moment(NOW)
    assert got.reservations and got.details.compiled.moment == Moment(NOW, got.reservations)


def test_the_loops_carried_reservations_reach_place_and_reserve_through_its_time_inputs(monkeypatch) -> None:
    """The loop's second cycle: the gang's reservation, made by the first, is in the time inputs `reserve` reads
    (carried, at the stage's clock, with the sweep's estimates fresh), and the batch was placed beside it; dropped
    on the way, the 4-hour pods would take n1 and the reservation would not be kept as it was."""
    _, stage, clock = stage_of(snapshot())
    stage.plan(["default/train-0", "default/train-1"], Rules())
    (held,) = stage.reservations
    seen: list = []
    spy(monkeypatch, "reserve", seen)
    clock[0] += 1
    rest = stage.plan([f"default/{kind}-{k}" for kind in ("long", "short") for k in range(4)], Rules())
    (_, context, (placed,)), *_ = seen
    inputs = context.time_inputs
    assert (inputs.now, inputs.reservations, inputs.carried, inputs.ask_earlier) == (clock[0], (held,), True, False)
    assert placed.details.compiled.moment == Moment(clock[0], (held,))
    assert sorted(p.key for p in rest.placements) == [f"default/short-{k}" for k in range(4)]
    assert stage.reservations[0] == held


def test_preemption_plans_beside_the_carried_reservations(monkeypatch) -> None:
    """The preempt stage is handed the moment `place` planned at: its re-plans and filters keep a carried
    reservation's room."""
    docs = [node("n1", cpu="32", **{GPU: "8"}), priority_class("high", 100)]
    docs += [gpu_pod(f"low-{k}", node_name="n1", started=at(11, 0), deadline=3 * 3600) for k in range(8)]
    docs += [gpu_pod("urgent", created=NOON, deadline=600, priorityClassName="high")]
    held = Reservation("default/other", (("default/other", "n1"),), seconds(at(13, 0)), (("n1", ((GPU, 8),)),))
    asked: list = []
    real = planner.preempt_for

    def preempt_for(cluster, plan, rules, settings, *rest):
        asked.append(settings.moment)
        return real(cluster, plan, rules, settings, *rest)
    monkeypatch.setattr(planner, "preempt_for", preempt_for)
    plan_batch(cluster_of(docs), options=OPTIONS, time_inputs=TimeInputs(NOW, (held,), carried=True))
    assert asked == [Moment(NOW, (held,))]
