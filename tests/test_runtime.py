"""One runtime policy (engine.loop.runtime): the process's settings through its phases, put back after, and the loop
entering it once per cycle; the one-shot commands' one pause at the command group (engine.cli)."""

from __future__ import annotations

import gc
import sys
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import pytest

from engine.loop.cycle import CycleResult
from engine.loop.runtime import BUSY, NEVER, QUICK, RuntimePolicy
from loopfake import FakeAPI, node, pod, synced_loop


@pytest.fixture
def process() -> Iterator[None]:
    """The process as CPython starts it (collector on, 5 ms interval, nothing frozen), and as it was after."""
    interval, thresholds, collecting = sys.getswitchinterval(), gc.get_threshold(), gc.isenabled()
    gc.enable()
    sys.setswitchinterval(0.005)
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)
        sys.setswitchinterval(interval)
        (gc.enable if collecting else gc.disable)()


def settings() -> tuple[bool, float, int, int]:
    """What the policy sets: collector on, switch interval, full-pass threshold, objects frozen."""
    return gc.isenabled(), sys.getswitchinterval(), gc.get_threshold()[2], gc.get_freeze_count()


def test_each_phase_sets_the_process_and_the_end_puts_it_back(process: None) -> None:
    before = settings()
    runtime = RuntimePolicy()
    with runtime.starting():
        assert settings() == (False, 0.005, before[2], 0)  # listing: no collections, nothing else touched yet
        runtime.started()
        collecting, interval, full, frozen = settings()
        assert (collecting, interval, full) == (False, QUICK, NEVER) and frozen > 1000  # startup's heap frozen
    assert settings()[:3] == (True, QUICK, NEVER)  # synced: collecting again, but full passes only at quiet moments
    with runtime.cycle(3):  # a stream's cycle
        assert settings()[:2] == (False, QUICK)
    assert settings()[:2] == (True, QUICK)
    with runtime.cycle(100):  # a batch arrival's
        assert settings()[:2] == (False, BUSY)
    assert settings()[:2] == (True, QUICK)
    with pytest.raises(RuntimeError), runtime.cycle(100):
        raise RuntimeError("the cycle failed")
    assert settings()[:2] == (True, QUICK) and runtime.wait_quiet(0.0)
    runtime.restore()
    assert settings() == before


def test_overlapping_cycles_of_two_profiles_keep_the_collector_off_until_the_last_ends(process: None) -> None:
    """Two profiles' cycles overlap outside the planning lock (one reports while the other plans): the first to end
    must not turn the collector on under the other, as a pause that only remembered its own start did."""
    runtime = RuntimePolicy()
    with ExitStack() as first:
        first.enter_context(runtime.cycle(1))
        with ExitStack() as second:
            second.enter_context(runtime.cycle(1))
            first.close()
            assert not gc.isenabled()
        assert gc.isenabled()


def test_a_cycle_leaves_a_paused_collector_paused_and_a_runtime_not_started_leaves_the_interval_alone(
        process: None) -> None:
    set_to: list[float] = []
    runtime = RuntimePolicy(set_interval=set_to.append)
    gc.disable()
    with runtime.cycle(500):
        pass
    assert not gc.isenabled() and set_to == [] and sys.getswitchinterval() == 0.005
    assert not runtime.tick()  # nor does it run full passes of its own
    runtime.restore()  # never started: nothing to put back
    assert not gc.isenabled() and set_to == []


@contextmanager
def counting(runtime: RuntimePolicy) -> Iterator[list[int]]:
    """The batch size of every cycle `runtime` is entered for."""
    entered: list[int] = []
    real = runtime.cycle

    @contextmanager
    def cycle(pods: int) -> Iterator[None]:
        entered.append(pods)
        with real(pods):
            yield
    runtime.cycle = cycle  # type: ignore[method-assign]
    try:
        yield entered
    finally:
        runtime.cycle = real  # type: ignore[method-assign]


def test_the_loop_enters_the_runtime_once_per_cycle_and_plans_with_the_collector_paused(process: None) -> None:
    api = FakeAPI()
    api.put("Node", node("n1", cpu="4"))
    for name in ("a", "b", "c"):
        api.put("Pod", pod(name))
    s, loop = synced_loop(api)
    collecting: list[bool] = []
    plan = loop.planner.plan
    loop.planner.plan = lambda *a: (collecting.append(gc.isenabled()), plan(*a))[1]  # type: ignore[method-assign]
    with counting(s.runtime) as entered:
        loop.cycle_isolated(["default/a", "default/b"])
        loop.cycle_isolated(["default/c"])
    loop.flush_binds()
    s.events.close()
    assert entered == [2, 1] and collecting == [False, False] and gc.isenabled()
    assert sorted(k for k, _ in api.binds) == ["default/a", "default/b", "default/c"]


def test_a_failed_cycle_is_narrowed_down_inside_its_one_entry(process: None, monkeypatch) -> None:
    """The bisection's cycles are the failed cycle's: no entry of their own, and the collector still paused."""
    api = FakeAPI()
    api.put("Node", node("n1", cpu="4"))
    for name in ("a", "bad", "c"):
        api.put("Pod", pod(name))
    s, loop = synced_loop(api)
    real = CycleResult.volume_steps
    collecting: list[bool] = []

    def volume_steps(self, chosen=None):
        collecting.append(gc.isenabled())
        if "default/bad" in self.plan.assignments:
            raise KeyError("a PV that vanished")
        return real(self, chosen)
    monkeypatch.setattr(CycleResult, "volume_steps", volume_steps)
    with counting(s.runtime) as entered:
        loop.cycle_isolated(["default/a", "default/bad", "default/c"])
    loop.flush_binds()
    s.events.close()
    assert entered == [3] and len(collecting) > 1 and not any(collecting) and gc.isenabled()
    assert sorted(k for k, _ in api.binds) == ["default/a", "default/c"]


def test_a_one_shot_command_runs_with_the_collector_off_and_run_is_left_to_its_policy(process: None,
                                                                                      monkeypatch) -> None:
    """engine.cli pauses the collector once for a whole one-shot command (the core no longer does); `run` is tuned
    phase by phase by its RuntimePolicy, so the command group leaves it alone."""
    from click.testing import CliRunner

    import engine.cli
    from engine.loop import api as loop_api
    from engine.loop.api import ConfigError

    collecting: dict[str, bool] = {}
    plan_batch = engine.cli.plan_batch

    def planning(*args, **kwargs):
        collecting["dry-run"] = gc.isenabled()
        return plan_batch(*args, **kwargs)

    def client(*args, **kwargs):
        collecting["run"] = gc.isenabled()
        raise ConfigError("no cluster here")
    monkeypatch.setattr(engine.cli, "plan_batch", planning)
    monkeypatch.setattr(loop_api, "load_client", client)
    assert CliRunner().invoke(engine.cli.main, ["dry-run", "-q", "-o", "json"]).exit_code == 0
    assert gc.isenabled()
    assert CliRunner().invoke(engine.cli.main, ["run", "--secure-port", "0"]).exit_code == 2
    assert collecting == {"dry-run": False, "run": True} and gc.isenabled()


def test_binds_from_many_threads_and_a_cycle_add_up_in_hand(process: None) -> None:
    """A cycle's batch and the bind calls on the bind threads are counted together: a cycle of 40 while 30 bind is
    a busy loop (CPython's interval)."""
    set_to: list[float] = []
    runtime = RuntimePolicy(many=64, set_interval=set_to.append)
    runtime.started()
    inside, done = threading.Event(), threading.Event()

    def bind() -> None:
        with runtime.holding(30):
            inside.set()
            done.wait(5.0)
    thread = threading.Thread(target=bind)
    thread.start()
    assert inside.wait(5.0)
    with runtime.cycle(40):
        assert runtime.interval == BUSY
    done.set()
    thread.join()
    runtime.restore()
    assert set_to == [QUICK, BUSY, QUICK, 0.005]  # started, busy, quiet again, as found
