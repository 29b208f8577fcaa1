"""The scheduler loop's logic against an in-memory ClusterAPI: assume/forget, queue, watches, leases, policies."""
from __future__ import annotations

import threading

import pytest

from clocks import TickingClock
from engine.loop.cycle import Rejected
from engine.loop.leader import LeaderElector
from engine.loop.policies import PolicyHolder
from engine.loop.ports import WatchTarget
from engine.loop.profile import head_rank
from engine.loop.queue import HEAD_OF, PodQueue, QueueConfig
from engine.loop.scheduler import Profile, Scheduler, Settings
from engine.loop.store import Store
from engine.loop.sync import Backoff, Reflector
from engine.model.cluster import Pod
from loopfake import FakeAPI, node, pod


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _scheduler(api: FakeAPI, *profiles: Profile) -> Scheduler:
    settings = Settings(profiles or (Profile("policy-scheduler"),), QueueConfig(batch_window=0.0), time_limit=2)
    return Scheduler(api, settings)


def _sync(s: Scheduler) -> None:
    """Fill the store from the fake as a relist would (no threads)."""
    for r in s.resources:
        items, _ = s.api.list(r) if r.kind not in s.api.absent_kinds else ([], "")
        s.store.replace(r, items)


# --- assume / forget -------------------------------------------------------------------------------------

def test_an_assumed_pod_holds_its_node_until_the_watch_shows_it_bound() -> None:
    api = FakeAPI(emit_binds=False)  # binds succeed, but the watch has not shown them yet
    api.put("Node", node("n1", cpu="1"))
    api.put("Pod", pod("a"))
    s = _scheduler(api)
    _sync(s)
    loop = s.loops[0]
    loop.cycle(["default/a"]).result()
    assert api.binds == [("default/a", "n1")]
    assert s.store.is_assumed("default/a")

    s.store.apply("Pod", "ADDED", api.put("Pod", pod("b")))  # the watch brings b, but not a's binding yet
    loop.cycle(["default/b"]).result()
    assert api.binds == [("default/a", "n1")], "b must not get a's capacity: no double-booking"
    s.events.close()
    assert "default/b" in api.conditions


def test_next_batch_sees_the_assumption_then_the_watch_confirms_it() -> None:
    api = FakeAPI(emit_binds=False)
    api.put("Node", node("n1", cpu="1"))
    a = api.put("Pod", pod("a"))
    api.put("Pod", pod("b"))
    s = _scheduler(api)
    for r in s.resources:  # the store sees a and b pending
        s.store.replace(r, api.list(r)[0])
    s.loops[0].cycle(["default/a"]).result()
    s.loops[0].cycle(["default/b"]).result()
    assert api.binds == [("default/a", "n1")]
    s.store.apply("Pod", "MODIFIED", {**a, "spec": {**a["spec"], "nodeName": "n1"}})
    assert not s.store.is_assumed("default/a")  # confirmed: the bound pod itself now holds the node
    s.loops[0].cycle(["default/b"]).result()
    assert api.binds == [("default/a", "n1")]


def test_a_failed_bind_forgets_the_pod_and_frees_its_node() -> None:
    api = FakeAPI(fail_binds={"default/a": 500})
    api.put("Node", node("n1", cpu="1"))
    api.put("Pod", pod("a"))
    api.put("Pod", pod("b"))
    s = _scheduler(api)
    _sync(s)
    loop = s.loops[0]
    loop.cycle(["default/a"]).result()
    assert not s.store.is_assumed("default/a") and api.binds == []
    assert loop.queue.waiting() == 2  # a is back in line (after a backoff), beside b
    loop.cycle(["default/b"]).result()
    assert api.binds == [("default/b", "n1")]  # the forgotten assumption left the node free


def test_a_conflict_is_not_retried_blindly_and_other_schedulers_pods_are_untouched() -> None:
    api = FakeAPI()
    api.put("Node", node("n1", cpu="4"))
    api.put("Pod", pod("mine"))
    api.put("Pod", pod("theirs", scheduler="default-scheduler"))
    s = _scheduler(api)
    _sync(s)
    loop = s.loops[0]
    assert loop.queue.waiting() == 1  # only our pod is queued
    api.objects[("Pod", "default", "mine")]["metadata"]["uid"] = "recreated"  # same name, another pod
    loop.cycle(["default/mine"]).result()
    assert api.binds == []
    assert not s.store.is_assumed("default/mine")
    s.events.close()
    assert not [e for e in api.events if "theirs" in e[0]] and "default/theirs" not in api.conditions


def test_gang_is_bound_whole_or_not_at_all() -> None:
    api = FakeAPI()
    api.put("Node", node("n1", cpu="2"))
    api.put("Node", node("n2", cpu="2"))
    for g in ("g1", "g2"):
        api.put("PodGroup", {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                             "metadata": {"name": g, "namespace": "default"}, "spec": {"minMember": 3}})
        for i in range(3):
            api.put("Pod", pod(f"{g}-{i}", labels={"scheduling.x-k8s.io/pod-group": g}))
    s = _scheduler(api)
    _sync(s)
    loop = s.loops[0]
    loop.cycle([f"default/{g}-{i}" for g in ("g1", "g2") for i in range(3)]).result()
    groups = {key.split("/")[1].split("-")[0] for key, _ in api.binds}
    assert len(api.binds) == 3 and len(groups) == 1
    s.events.close()
    assert len(api.conditions) == 3


def test_a_failed_cycle_forgets_its_assumptions_and_requeues_the_batch(monkeypatch) -> None:
    api = FakeAPI()
    api.put("Node", node("n1", cpu="1"))
    api.put("Pod", pod("a"))
    s = _scheduler(api)
    _sync(s)
    loop = s.loops[0]

    stop = threading.Event()
    tries = []

    def broken(placements):
        tries.append(placements)
        stop.set()  # run() stops once this cycle is over: what it does after a failure, not how long it has
        raise RuntimeError("boom")

    monkeypatch.setattr(s.binder, "bind_all", broken)
    guard = threading.Timer(60, stop.set)  # a loop that never binds fails below instead of hanging
    guard.start()
    loop.run(stop)  # the cycle fails; run() goes on until stopped
    guard.cancel()
    assert tries  # the cycle ran and failed
    assert not s.store.is_assumed("default/a")
    assert loop.queue.waiting() == 1


def test_the_next_batch_is_planned_while_the_last_one_is_still_binding() -> None:
    """Binds run in the bind stage: a slow apiserver does not hold up planning, and the assumption
    keeps the second batch off the first one's node meanwhile."""
    api = FakeAPI(emit_binds=False)
    api.put("Node", node("n1", cpu="1"))
    api.put("Node", node("n2", cpu="1"))
    api.put("Pod", pod("a"))
    api.put("Pod", pod("b"))
    release = threading.Event()
    real_bind = api.bind

    def slow_bind(*args):
        release.wait(10)
        return real_bind(*args)

    api.bind = slow_bind
    s = _scheduler(api)
    _sync(s)
    loop = s.loops[0]
    first = loop.cycle(["default/a"])
    second = loop.cycle(["default/b"])  # planned while a's bind is still in flight
    assert not first.done() and not second.done()
    release.set()
    first.result(), second.result()
    assert sorted(node for _, node in api.binds) == ["n1", "n2"], api.binds


def test_a_full_outbox_drops_writes_and_counts_them_instead_of_waiting() -> None:
    from engine.loop.binder import Outbox

    gate, dropped, done = threading.Event(), [], []
    box = Outbox(workers=1, capacity=2, on_drop=lambda: dropped.append(1))
    box.submit(gate.wait, 10)  # the writer is busy with this one
    for i in range(5):
        box.submit(done.append, i)
    gate.set()
    box.close()  # writes what was queued, then stops
    assert len(dropped) + len(done) == 5 and len(dropped) >= 2
    assert done == sorted(done)


# --- preemption --------------------------------------------------------------------------------------------

def _preempting(api: FakeAPI, batch: list[str]):
    """A scheduler over `api` that has planned `batch` and run its bind stage (evictions, nominations)."""
    s = _scheduler(api)
    _sync(s)
    loop = s.loops[0]
    loop.cycle(batch).result()
    loop.flush_binds()
    return s, loop


def _full_node(api: FakeAPI, victims: int = 1) -> None:
    api.put("Node", node("n1", cpu=str(victims)))
    for i in range(victims):
        api.put("Pod", pod(f"low{i}", nodeName="n1", priority=0))


def test_a_preemptor_is_nominated_and_bound_only_once_its_victims_are_gone() -> None:
    api = FakeAPI(hold_evictions=True)  # evicted pods linger, as with a kubelet still stopping them
    _full_node(api)
    api.put("Pod", pod("high", priority=100))
    s, loop = _preempting(api, ["default/high"])
    assert [k for k, _ in api.evictions] == ["default/low0"]
    assert api.binds == [] and s.store.is_assumed("default/high")
    s.events.close()
    assert api.nominated == {"default/high": "n1"}
    assert any(e[2] == "Preempted" and "default/high" in e[3] for e in api.events if "low0" in e[0])
    s.store.apply("Pod", "DELETED", api.objects[("Pod", "default", "low0")])  # the victim is gone at last
    loop.flush_binds()
    assert api.binds == [("default/high", "n1")]
    assert s.metrics.victims.labels("policy-scheduler")._value.get() == 1


def test_the_next_cycle_sees_a_victim_terminating_before_the_watch_does() -> None:
    """With the eviction not yet shown by the watch (nor even sent), the next cycle's model has the victim
    terminating already: it is not evicted a second time (seen running, it and the other pod would be evicted for
    `high2`: the room it leaves is `high`'s)."""
    api = FakeAPI(hold_evictions=True)
    _full_node(api, victims=2)
    api.put("Pod", pod("high", priority=100))
    _, loop = _preempting(api, ["default/high"])
    [(victim, _)] = api.evictions
    snap = loop.cache.snapshot([], "policy-scheduler", None)
    assert {p.key: p.terminating for p in snap.cluster.bound}[victim] is True
    api.put("Pod", pod("high2", priority=100))
    loop.cycle(["default/high2"]).result()
    loop.flush_binds()
    assert [k for k, _ in api.evictions] == [victim]  # not evicted twice for the room it leaves to `high`


def test_a_gang_of_preemptors_binds_together_after_every_victim_left() -> None:
    api = FakeAPI(hold_evictions=True)
    _full_node(api, victims=2)
    api.put("PodGroup", {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                         "metadata": {"name": "g", "namespace": "default"}, "spec": {"minMember": 2}})
    for i in range(2):
        api.put("Pod", pod(f"g-{i}", priority=100, labels={"scheduling.x-k8s.io/pod-group": "g"}))
    s, loop = _preempting(api, ["default/g-0", "default/g-1"])
    assert len(api.evictions) == 2
    s.store.apply("Pod", "DELETED", api.objects[("Pod", "default", "low0")])
    loop.flush_binds()
    assert api.binds == [], "half the room is free: no member may bind yet"
    s.store.apply("Pod", "DELETED", api.objects[("Pod", "default", "low1")])
    loop.flush_binds()
    assert sorted(k for k, _ in api.binds) == ["default/g-0", "default/g-1"]


def test_a_podgroup_mode_group_preempted_whole_gets_disruption_target() -> None:
    from engine.reading.objects import NATIVE_POD_GROUP
    from testkit.manifests import in_group, native_group
    api = FakeAPI(hold_evictions=True)
    for i in range(2):
        api.put("Node", node(f"n{i}", cpu="1"))
        api.put("Pod", pod(f"train-{i}", nodeName=f"n{i}", schedulingGroup=in_group("train")))
    api.put(NATIVE_POD_GROUP, native_group("train", 2, disruption="PodGroup"))
    api.put("Pod", pod("high", priority=100))
    s, _loop = _preempting(api, ["default/high"])
    s.events.close()
    assert sorted(k for k, _ in api.evictions) == ["default/train-0", "default/train-1"]
    group = api.objects[(NATIVE_POD_GROUP, "default", "train")]
    (cond,) = [c for c in group["status"]["conditions"] if c["type"] == "DisruptionTarget"]
    assert (cond["status"], cond["reason"]) == ("True", "PreemptionByScheduler")
    assert cond["message"] == "policy-scheduler: preempting to accommodate a higher priority pod"


def test_a_nomination_whose_victims_never_leave_is_given_up_and_the_pod_requeued() -> None:
    api = FakeAPI(hold_evictions=True)
    _full_node(api)
    api.put("Pod", pod("high", priority=100))
    settings = Settings((Profile("policy-scheduler"),), QueueConfig(batch_window=0.0), time_limit=2,
                        victims_timeout=0.0)
    s = Scheduler(api, settings)
    _sync(s)
    loop = s.loops[0]
    loop.cycle(["default/high"]).result()
    loop.flush_binds()
    assert s.store.is_assumed("default/high")
    loop._give_up_late_nominations()
    assert not s.store.is_assumed("default/high") and api.binds == []
    assert loop.queue.waiting() == 1


def test_no_preemption_setting_evicts_nothing() -> None:
    api = FakeAPI()
    _full_node(api)
    api.put("Pod", pod("high", priority=100))
    settings = Settings((Profile("policy-scheduler"),), QueueConfig(batch_window=0.0), time_limit=2, preemption=False)
    s = Scheduler(api, settings)
    _sync(s)
    s.loops[0].cycle(["default/high"]).result()
    assert api.evictions == [] and api.binds == []


# --- the queue ---------------------------------------------------------------------------------------------

TIMED_OUT = Rejected(None, None)

def test_backoff_grows_and_a_cluster_change_wakes_at_once() -> None:
    clock = Clock()
    q = PodQueue(QueueConfig(batch_window=0, backoff_initial=1, backoff_max=4), clock)
    stop = threading.Event()
    q.add("ns/a", "ns/a")
    assert q.next_batch(stop, idle=0) == ["ns/a"]
    waits = []
    for _ in range(4):
        q.done(["ns/a"], {"ns/a": TIMED_OUT})  # the time limit kept it out: nothing has to change
        start = clock.now
        assert q.next_batch(stop, idle=0) == []  # still backing off
        while not (batch := q.next_batch(stop, idle=0)):
            clock.now += 0.5
        waits.append(clock.now - start)
        assert batch == ["ns/a"]
    assert waits == [1.0, 2.0, 4.0, 4.0]  # doubling, capped
    q.done(["ns/a"])
    q.wake_all()
    assert q.next_batch(stop, idle=0) == ["ns/a"]


def test_batch_window_collects_pods_arriving_during_it() -> None:
    # the clock reads 0.05 s later each time: a is ready at 1000.15, the window runs from 1000.2 to 1000.4, and b
    # arrives within it, at 1000.35 (without the window, a would have gone alone at 1000.3)
    clock = TickingClock(0.05, at={1000.32: lambda: q.add("ns/b", "ns/b")})
    q = PodQueue(QueueConfig(batch_window=0.2), clock)
    stop = threading.Event()
    q.add("ns/a", "ns/a")
    assert q.next_batch(stop, idle=1) == ["ns/a", "ns/b"]
    assert q.arrival("ns/a") < q.arrival("ns/b") < clock.now  # b came after the first pod was ready
    q.add("ns/a", "ns/a")  # a known member (placed, not yet seen bound): not queued again
    assert q.next_batch(stop, idle=0) == []


def test_a_burst_closes_the_window_early_when_nothing_more_arrives() -> None:
    stop = threading.Event()
    clock = TickingClock(0.05, at={1001.0: stop.set})  # stops a window that would not close early well before 30 s
    q = PodQueue(QueueConfig(batch_window=30, batch_idle=0.1), clock)
    for i in range(3):
        q.add(f"ns/p{i}", f"ns/p{i}")
    assert q.next_batch(stop, idle=1) == ["ns/p0", "ns/p1", "ns/p2"]
    assert not stop.is_set() and clock.now < 1001.0  # not the 30 s window
    assert clock.now - q.arrival("ns/p2") >= 0.1  # but once nothing more arrived for batch_idle


def test_max_batch_and_gangs_stay_whole() -> None:
    q = PodQueue(QueueConfig(batch_window=0, max_batch=2))
    stop = threading.Event()
    for i in range(3):
        q.add(f"ns/g-{i}", "gang:ns/g")
    q.add("ns/x", "ns/x")
    q.add("ns/y", "ns/y")
    assert q.next_batch(stop, idle=0) == ["ns/g-0", "ns/g-1", "ns/g-2"]  # a gang exceeds max_batch, never split
    assert q.next_batch(stop, idle=0) == ["ns/x", "ns/y"]


def test_a_large_batch_is_taken_in_two_its_head_first() -> None:
    """head=2: nine ready pods (more than HEAD_OF x 2) are taken as the two oldest, then the other seven whole; a
    gang in the head stays whole; eight or fewer are taken at once."""
    assert HEAD_OF == 4
    q = PodQueue(QueueConfig(batch_window=0, head=2), Clock())
    stop = threading.Event()
    for i in range(9):
        q.add(f"ns/p{i}", f"ns/p{i}")
    assert q.next_batch(stop, idle=0) == ["ns/p0", "ns/p1"]
    assert q.next_batch(stop, idle=0) == [f"ns/p{i}" for i in range(2, 9)]
    for i in range(3):
        q.add(f"ns/g-{i}", "gang:ns/g")
    for i in range(6):
        q.add(f"ns/q{i}", f"ns/q{i}")
    assert q.next_batch(stop, idle=0) == ["ns/g-0", "ns/g-1", "ns/g-2"]  # a new burst: a head again, the gang whole
    assert len(q.next_batch(stop, idle=0)) == 6
    for i in range(8):
        q.add(f"ns/r{i}", f"ns/r{i}")
    assert len(q.next_batch(stop, idle=0)) == 8


def test_a_head_takes_the_units_first_by_rank_then_age() -> None:
    """The loop's rank (head_rank): the highest priority, then the largest pods, as the batch's first fit takes
    them; a pod not converted yet comes last. Nine 1-CPU pods, then two 3-CPU ones and one 2-CPU pod of a higher
    priority: the head of 2 is the high-priority pod, then a 3-CPU one (the older of the two)."""
    models = {f"ns/s{i}": Pod("ns", f"s{i}", requests={"cpu": 1000}) for i in range(9)}
    models |= {"ns/b0": Pod("ns", "b0", requests={"cpu": 3000}), "ns/b1": Pod("ns", "b1", requests={"cpu": 3000}),
               "ns/hi": Pod("ns", "hi", requests={"cpu": 2000}, priority=10)}
    clock = TickingClock(0.01)
    q = PodQueue(QueueConfig(batch_window=0, head=2), clock, rank=lambda key: head_rank(models.get(key)))
    stop = threading.Event()
    for key in [*models, "ns/unknown"]:
        q.add(key, key)
    assert q.next_batch(stop, idle=0) == ["ns/hi", "ns/b0"]
    rest = q.next_batch(stop, idle=0)
    assert rest[:9] == [f"ns/s{i}" for i in range(9)] and set(rest[9:]) == {"ns/b1", "ns/unknown"}  # by age
    assert head_rank(None) > head_rank(models["ns/s0"]) > head_rank(models["ns/b0"]) > head_rank(models["ns/hi"])


def test_a_new_gang_member_wakes_its_gang() -> None:
    clock = Clock()
    q = PodQueue(QueueConfig(batch_window=0, backoff_initial=10), clock)
    stop = threading.Event()
    q.add("ns/g-0", "gang:ns/g")
    q.done(q.next_batch(stop, idle=0))
    assert q.next_batch(stop, idle=0) == []
    q.add("ns/g-1", "gang:ns/g")
    assert q.next_batch(stop, idle=0) == ["ns/g-0", "ns/g-1"]


# --- watches ----------------------------------------------------------------------------------------------

def test_relist_after_410_gone_loses_no_pending_pod() -> None:
    api = FakeAPI()
    api.put("Pod", pod("a"))
    store, stop = Store(), threading.Event()
    reflector = Reflector(api, WatchTarget("Pod"), store, stop, watch_seconds=1, backoff=Backoff(0.01, 0.05))
    thread = threading.Thread(target=reflector.run, daemon=True)
    thread.start()
    try:
        _eventually(lambda: store.get("Pod", "default", "a"))
        api.down = True  # the apiserver goes away; meanwhile b is created and history is compacted
        api.put("Pod", pod("b"))
        api.delete("Pod", "default", "a")
        api.compact()
        api.down = False
        _eventually(lambda: store.get("Pod", "default", "b") and not store.get("Pod", "default", "a"))
    finally:
        stop.set()
        thread.join(5)


def test_a_missing_crd_counts_as_synced_and_empty() -> None:
    api = FakeAPI(absent_kinds={"PodGroup"})
    store, stop = Store(), threading.Event()
    reflector = Reflector(api, WatchTarget("PodGroup"), store, stop, absent_retry=0.05)
    thread = threading.Thread(target=reflector.run, daemon=True)
    thread.start()
    try:
        _eventually(lambda: store.synced([WatchTarget("PodGroup")]))
        api.absent_kinds.clear()
        api.put("PodGroup", {"metadata": {"name": "g", "namespace": "default"}, "spec": {"minMember": 1}})
        _eventually(lambda: store.get("PodGroup", "default", "g"))
    finally:
        stop.set()
        thread.join(5)


def _eventually(check, timeout: float = 5.0) -> None:
    done = threading.Event()
    deadline = threading.Event()
    threading.Timer(timeout, deadline.set).start()
    while not deadline.is_set():
        if check():
            done.set()
            break
        deadline.wait(0.01)
    assert done.is_set(), "condition not reached in time"


# --- leader election ----------------------------------------------------------------------------------------

def test_one_leader_takeover_after_expiry_and_at_once_after_release() -> None:
    api, clock = FakeAPI(), Clock()
    a = LeaderElector(api, "kube-system", "ps", "a", lease_seconds=10, clock=clock, wall=clock)
    b = LeaderElector(api, "kube-system", "ps", "b", lease_seconds=10, clock=clock, wall=clock)
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    clock.now += 5
    assert a.try_acquire_or_renew()  # renewed
    clock.now += 9
    assert not b.try_acquire_or_renew()  # b saw a renewal 9 s ago (its own clock): not expired
    clock.now += 11  # a died: no renewal for longer than the lease
    assert b.try_acquire_or_renew()
    assert not a.try_acquire_or_renew()  # a comes back: b holds it now
    b.release()
    assert a.try_acquire_or_renew()  # released: no need to wait the lease out
    assert api.leases[("kube-system", "ps")]["spec"]["leaseTransitions"] == 2


# --- policies -----------------------------------------------------------------------------------------------

GOOD = 'policy web-in-a {\n  applies to pods where label "app" == "web"\n  prefer node label "zone" == "a" weight 10\n}\n'


def test_bad_policy_update_keeps_the_previous_policies() -> None:
    holder = PolicyHolder(("kube-system", "policies"))
    errors: list[str] = []
    cm = {"metadata": {"name": "policies", "namespace": "kube-system", "resourceVersion": "1"}, "data": {"a.policy": GOOD}}
    assert not holder.ready
    assert holder.refresh(cm, lambda _, m: errors.append(m))
    good_rules = holder.rules
    bad = {**cm, "metadata": {**cm["metadata"], "resourceVersion": "2"}, "data": {"a.policy": "policy broken {\n  nonsense\n}\n"}}
    assert not holder.refresh(bad, lambda _, m: errors.append(m))
    assert holder.rules is good_rules and holder.ready
    assert len(errors) == 1 and errors[0].startswith("kube-system/policies[a.policy]:2:")
    assert not holder.refresh(bad, lambda _, m: errors.append(m))  # reported once per version
    assert len(errors) == 1


def test_a_profile_without_loaded_policies_is_not_ready() -> None:
    api = FakeAPI()
    s = _scheduler(api, Profile("a", ("kube-system", "missing")), Profile("b"))
    _sync(s)
    for loop in s.loops:
        loop._refresh_policies()
    assert [loop.ready() for loop in s.loops] == [False, True]
    assert not s.ready()


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__])


def test_a_waiting_pod_has_one_event_object_counted_and_patched_at_a_limited_rate() -> None:
    from engine.loop.binder import EventSink

    api, clock = FakeAPI(), Clock()
    sink = EventSink(api, clock=clock, min_interval=10)
    p = api.put("Pod", pod("a"))
    sink.unschedulable(p, "no node has room")
    sink.outbox.close()  # (written before the next one: one write per pod is under way at a time)
    sink = _reopened(sink)
    for _ in range(3):
        sink.unschedulable(p, "no node has room")  # the same, within 10 s: counted, not written
    assert list(api.event_objects.values()) == [(1, "no node has room")]
    clock.now += 11
    sink.unschedulable(p, "no node has room")  # the same after 10 s: the count patched
    _drain(sink)
    assert list(api.event_objects.values()) == [(5, "no node has room")]
    for i in range(10):  # a new message each time: a burst of 5 writes per object, then 1 a minute
        clock.now += 1
        sink.unschedulable(p, f"0/{i} nodes are available")
        _drain(sink)
    assert list(api.event_objects.values()) == [(8, "0/2 nodes are available")]  # 5 writes in all, then none
    clock.now += 60
    sink.unschedulable(p, "another reason")
    _drain(sink)
    assert list(api.event_objects.values()) == [(16, "another reason")]
    assert [e[2] for e in api.events] == ["FailedScheduling"]  # one Event object throughout
    api.event_objects.clear()  # it expired (events live an hour)
    clock.now += 60
    sink.unschedulable(p, "another reason still")
    sink.close()
    assert list(api.event_objects.values()) == [(17, "another reason still")] and len(api.events) == 2


def _reopened(sink):
    from engine.loop.binder import Outbox

    sink.outbox = Outbox(1)
    return sink


def _drain(sink) -> None:
    """Wait for the sink's writes so far (one worker: a marker write runs after them)."""
    done = threading.Event()
    sink.outbox.submit(done.set)
    assert done.wait(5)
