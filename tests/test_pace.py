"""The GIL's switch interval follows the pods the loop has in hand, and writes that can wait wait for a moment with
none (engine.loop.runtime)."""

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from engine.loop.queue import QueueConfig
from engine.loop.runtime import RuntimePolicy
from engine.loop.scheduler import Profile, Scheduler, Settings
from loopfake import FakeAPI, node, pod


@contextmanager
def started(runtime: RuntimePolicy) -> Iterator[RuntimePolicy]:
    """`runtime` past its startup (the heap frozen, full passes its own), and the process as it was after."""
    runtime.started()
    try:
        yield runtime
    finally:
        runtime.restore()


def test_the_interval_is_short_while_few_pods_are_in_hand_and_the_default_while_a_large_batch_is() -> None:
    set_to: list[float] = []
    pace = RuntimePolicy(quick=0.001, busy=0.005, many=64, set_interval=set_to.append)
    with pace.holding(100):
        pass
    assert set_to == []  # not started: the process's interval is left alone (tests, benches)
    with started(pace):
        assert set_to == [0.001]
        _hold_a_stream_then_batches(pace, set_to)


def _hold_a_stream_then_batches(pace: RuntimePolicy, set_to: list[float]) -> None:
    with pace.holding(1), pace.holding(3):  # a stream: a pod or a few at a time
        assert set_to == [0.001]
    with pace.holding(40):  # a cycle of 40 while 30 of the last one bind: 70 in hand
        with pace.holding(30):
            assert set_to == [0.001, 0.005]
        assert set_to == [0.001, 0.005, 0.001]
    with pace.holding(65):
        pass
    assert set_to == [0.001, 0.005, 0.001, 0.005, 0.001]


def test_a_failing_block_gives_its_pods_back() -> None:
    set_to: list[float] = []
    pace = RuntimePolicy(many=1, set_interval=set_to.append)
    with started(pace):
        with pytest.raises(RuntimeError), pace.cycle(5):
            raise RuntimeError("cycle failed")
        assert pace.interval == pace.quick and set_to[-1] == pace.quick
        assert pace.wait_quiet(0.0)  # none in hand: writes that wait go


def test_binds_and_cycles_from_many_threads_add_up() -> None:
    pace = RuntimePolicy(many=10)
    inside = threading.Barrier(4)
    seen: list[float] = []

    def hold() -> None:
        with pace.holding(3):
            inside.wait()
            seen.append(pace.interval)
            inside.wait()

    threads = [threading.Thread(target=hold) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == [pace.busy] * 4 and pace.interval == pace.quick  # 12 in hand at once; none after


def _loop_with_pods(pods: int, set_to: list[float]) -> tuple[Scheduler, FakeAPI, list[str]]:
    api = FakeAPI(emit_binds=False)
    api.put("Node", node("n1", cpu="100"))
    for i in range(pods):
        api.put("Pod", pod(f"p{i}", cpu="100m"))
    s = Scheduler(api, Settings((Profile("policy-scheduler"),), QueueConfig(batch_window=0.0), time_limit=2),
                  runtime=RuntimePolicy(many=64, set_interval=set_to.append))
    for r in s.resources:
        s.store.replace(r, api.list(r)[0] if r.kind not in api.absent_kinds else [])
    return s, api, [f"default/p{i}" for i in range(pods)]


@pytest.mark.parametrize("pods, busy", [(70, True), (3, False)])
def test_the_loop_counts_a_cycles_batch_and_its_binds_as_in_hand(pods: int, busy: bool) -> None:
    """A cycle of 70 pods (above 64) is planned at CPython's interval and so are its 70 binds sent, on the bind
    stage's threads, also after the cycle has returned; a cycle of 3 and its binds keep the short one."""
    set_to: list[float] = []
    s, api, keys = _loop_with_pods(pods, set_to)
    pace = s.runtime
    at_bind: list[float] = []
    bind = api.bind
    api.bind = lambda *a: (at_bind.append(pace.interval), bind(*a))[1]  # type: ignore[method-assign]
    at_plan: list[float] = []
    planner = s.loops[0].planner
    plan = planner.plan
    planner.plan = lambda *a: (at_plan.append(pace.interval), plan(*a))[1]  # type: ignore[method-assign]
    with started(pace):
        s.loops[0].cycle_isolated(keys)
        s.loops[0].flush_binds()
        s.events.close()
        assert set_to[0] == set_to[-1] == pace.quick and (pace.busy in set_to) == busy  # and back once done
    assert len(api.binds) == pods
    assert at_plan == [pace.busy if busy else pace.quick]
    assert at_bind == [pace.busy if busy else pace.quick] * pods


def test_an_outbox_write_waits_for_a_moment_with_no_pod_in_hand() -> None:
    """A Scheduled event does not share the GIL and the apiserver with the next pod's cycle and bind."""
    from engine.loop.binder import Outbox

    pace, written = RuntimePolicy(), threading.Event()
    box = Outbox(workers=1, runtime=pace, defer=30.0)
    with pace.holding(1):
        box.submit(written.set)
        assert not written.wait(0.2)  # a pod is in hand: the write waits
    assert written.wait(5.0)  # the pod is let go: the write goes at once
    box.close()


def test_an_outbox_write_waits_at_most_defer_seconds_while_pods_stay_in_hand() -> None:
    """In a batch arrival pods are always in hand: writes flow `defer` seconds late, not never."""
    from engine.loop.binder import Outbox

    pace, written = RuntimePolicy(), threading.Event()
    box = Outbox(workers=1, runtime=pace, defer=0.3)
    with pace.holding(500):
        box.submit(written.set)
        assert not written.wait(0.1)
        assert written.wait(5.0)
    box.close()


def test_without_a_runtime_an_outbox_writes_at_once() -> None:
    from engine.loop.binder import Outbox

    written = threading.Event()
    box = Outbox(workers=1, defer=30.0)
    box.submit(written.set)
    assert written.wait(5.0)
    box.close()


def test_a_pods_condition_is_written_at_once_while_its_event_waits_for_a_quiet_moment() -> None:
    """A PodScheduled=False held back could land after the pod's Binding and mark a bound pod unschedulable."""
    from engine.loop.binder import EventSink

    api, pace = FakeAPI(), RuntimePolicy()
    sink = EventSink(api, runtime=pace)
    waiting = api.put("Pod", pod("a"))
    with pace.holding(1):  # another pod in a cycle
        sink.unschedulable(waiting, "gang ns/g could not be completed")
        sink.status.close()  # the condition went out with a pod in hand
        assert api.conditions == {"default/a": "gang ns/g could not be completed"}
        assert api.events == []  # the event waits for the pod to be let go
    sink.outbox.close()
    assert [e[2] for e in api.events] == ["FailedScheduling"]
