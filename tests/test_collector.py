"""The collector's full passes run at quiet moments, not in the middle of a stream (engine.loop.runtime).

The collector itself is the real one: these tests make cyclic garbage, let CPython collect its young generations as
it does, and watch which generations it walks (gc.callbacks)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from engine.loop.runtime import NEVER, RuntimePolicy


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def full_passes_seen() -> Iterator[list[int]]:
    """The generation of every collection that starts meanwhile; the thresholds are put back after."""
    seen: list[int] = []

    def note(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            seen.append(info["generation"])

    thresholds = gc.get_threshold()
    was_enabled, was_frozen = gc.isenabled(), gc.get_freeze_count()
    gc.enable()
    gc.collect()
    gc.callbacks.append(note)
    try:
        yield seen
    finally:
        gc.callbacks.remove(note)
        if not was_frozen:
            gc.unfreeze()  # (`started` froze the heap)
        gc.set_threshold(*thresholds)
        if not was_enabled:
            gc.disable()


def churn(middle_passes: int) -> None:
    """Cyclic garbage, and objects kept, until CPython has collected its middle generation `middle_passes` times."""
    kept: list[object] = []
    start = gc.get_count()[2]
    while gc.get_count()[2] - start < middle_passes:
        for _ in range(1000):
            a: list[object] = []
            a.append(a)  # a cycle: only the collector frees it
            kept.append([a] if len(kept) < 50_000 else None)


def test_once_started_no_full_pass_runs_by_itself_and_a_quiet_moment_runs_one(full_passes_seen: list[int]) -> None:
    clock = Clock()
    runtime = RuntimePolicy(clock=clock, quiet=1.0, gap=30.0, every=300.0, set_interval=lambda _: None)
    runtime.started()
    assert gc.get_threshold()[2] == NEVER
    churn(25)  # without `started`, CPython would have walked the oldest generation at least twice by now
    assert 2 not in full_passes_seen and 1 in full_passes_seen  # the young generations are collected as before
    assert gc.get_count()[2] >= 25
    clock.now += 31  # 31 s since started, and no pod in hand for as long
    assert runtime.tick()
    assert full_passes_seen[-1] == 2 and gc.get_count()[2] == 0 and runtime.full_passes == 1


def test_no_full_pass_while_pods_are_in_hand_until_every_seconds_passed(full_passes_seen: list[int]) -> None:
    clock = Clock()
    runtime = RuntimePolicy(clock=clock, quiet=1.0, gap=30.0, every=300.0, set_interval=lambda _: None)
    runtime.started()
    churn(12)
    with runtime.holding(1):  # a stream: a pod in hand at every tick
        clock.now += 100
        assert not runtime.tick()
    with runtime.holding(1):
        clock.now += 0.5
    assert runtime.quiet_for() == 0.0
    assert not runtime.tick()  # let go just now: not quiet yet
    clock.now += 0.5
    assert runtime.quiet_for() == 0.5 and not runtime.tick()
    assert 2 not in full_passes_seen
    with runtime.holding(1):
        clock.now += 200  # 300.5 s since started: due however busy
        assert runtime.tick()
    assert full_passes_seen[-1] == 2


def test_quiet_moments_collect_only_what_has_grown_and_at_most_every_gap_seconds(full_passes_seen: list[int]) -> None:
    clock = Clock()
    runtime = RuntimePolicy(clock=clock, quiet=1.0, gap=30.0, every=300.0, passes=10, set_interval=lambda _: None)
    runtime.started()
    churn(3)
    clock.now += 60
    assert not runtime.tick()  # quiet and past the gap, but the old generation has hardly grown
    churn(10)
    assert runtime.tick()
    churn(10)
    clock.now += 10
    assert not runtime.tick()  # quiet, grown, but 10 s after the last full pass
    clock.now += 20
    assert runtime.tick()
    assert full_passes_seen.count(2) == 2 and runtime.full_passes == 2


def test_a_paused_stage_leaves_the_collector_as_it_found_it() -> None:
    """engine.heap.collector_paused: off inside (a nested pause too), on again after, even when the stage raises;
    left off when it was off before (a stage paused inside a paused startup)."""
    from engine.heap import collector_paused

    was_enabled = gc.isenabled()
    gc.enable()
    try:
        with collector_paused():
            assert not gc.isenabled()
            with collector_paused():
                assert not gc.isenabled()
            assert not gc.isenabled()
        assert gc.isenabled()
        with pytest.raises(RuntimeError), collector_paused():
            raise RuntimeError("the stage failed")
        assert gc.isenabled()
        gc.disable()
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        if was_enabled:
            gc.enable()
