"""Event-driven requeue (issue 17 point 2): a pod the plan left out waits for a change one of the kinds that
rejected it says may help, as upstream's queueing hints decide; backoff 1 s doubling to 10 s; a flush after
5 minutes; the pod's own update and new policies wake it at once; the time limit only backs off."""

from __future__ import annotations

import threading

import pytest

from engine.loop.cycle import Rejected
from engine.loop.queue import PodQueue, QueueConfig
from loopfake import FakeAPI, node, pod, synced_loop


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _never() -> threading.Event:
    return threading.Event()


def test_upstream_backoff_defaults() -> None:
    config = QueueConfig()
    assert (config.backoff_initial, config.backoff_max, config.flush) == (1.0, 10.0, 300.0)


def test_a_pod_left_out_for_room_waits_for_a_change_that_may_help_not_for_any_change() -> None:
    api = FakeAPI()
    api.put("Node", node("n1"))
    api.put("Pod", pod("big", cpu="2"))  # fits no 1-cpu node
    s, loop = synced_loop(api, backoff=0.0)
    loop.cycle(loop.queue.next_batch(_never(), idle=0.1)).result()
    assert loop.queue.unschedulable() == 1 and loop.queue.next_batch(_never(), idle=0.05) == []
    for i in range(20):  # nodes too small for it join: not one of them wakes it
        api.put("Node", node(f"small{i}"))
        s.store.apply("Node", "ADDED", api.objects[("Node", "", f"small{i}")])
    s.store.apply("Pod", "ADDED", api.put("Pod", pod("other", cpu="0", node_name="n1", scheduler=None)))  # takes room
    assert loop.queue.unschedulable() == 1 and loop.queue.next_batch(_never(), idle=0.05) == []
    s.store.apply("Node", "ADDED", api.put("Node", node("large", cpu="4")))  # one that fits it
    assert loop.queue.unschedulable() == 0
    assert loop.queue.next_batch(_never(), idle=0.5) == ["default/big"]
    s.events.close()


def test_a_pod_leaving_a_node_the_pod_cannot_use_does_not_wake_it_and_one_it_can_use_does() -> None:
    api = FakeAPI()
    api.put("Node", node("a1", labels={"zone": "a"}))
    api.put("Node", node("b1", labels={"zone": "b"}))
    api.put("Pod", pod("in-a", node_name="a1", scheduler=None))
    api.put("Pod", pod("in-b", node_name="b1", scheduler=None))
    api.put("Pod", pod("wants-a", nodeSelector={"zone": "a"}))
    s, loop = synced_loop(api, backoff=0.0)
    loop.cycle(loop.queue.next_batch(_never(), idle=0.1)).result()
    assert loop.queue.unschedulable() == 1
    s.store.apply("Pod", "DELETED", api.objects[("Pod", "default", "in-b")])  # a pod deleted in the other zone
    assert loop.queue.unschedulable() == 1
    s.store.apply("Pod", "DELETED", api.objects[("Pod", "default", "in-a")])
    assert loop.queue.unschedulable() == 0
    s.events.close()


def test_a_label_no_rule_reads_does_not_wake_and_one_that_matches_does() -> None:
    api = FakeAPI()
    api.put("Node", node("n1"))
    api.put("Pod", pod("loner", affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}]}},
        labels={"app": "x"}))
    s, loop = synced_loop(api, backoff=0.0)
    loop.cycle(loop.queue.next_batch(_never(), idle=0.1)).result()
    assert loop.queue.unschedulable() == 1
    web = api.put("Pod", pod("web", cpu="0", node_name="n1", labels={"app": "web"}, scheduler=None))
    s.store.apply("Pod", "ADDED", web)
    assert loop.queue.unschedulable() == 1  # a pod its affinity does not count
    s.store.apply("Pod", "MODIFIED", api.put("Pod", {**web, "metadata": {**web["metadata"], "labels": {"app": "db"}}}))
    assert loop.queue.unschedulable() == 0  # relabelled into what it waits for
    s.events.close()


def test_the_flush_retries_an_unschedulable_pod_after_five_minutes() -> None:
    clock = Clock()
    q = PodQueue(QueueConfig(batch_window=0), clock)
    q.add("ns/a", "ns/a")
    assert q.next_batch(_never(), idle=0) == ["ns/a"]
    q.done(["ns/a"])  # not planned at all (no kind's reason): it waits for a change
    clock.now += 299
    assert q.next_batch(_never(), idle=0) == []
    clock.now += 1
    assert q.next_batch(_never(), idle=0) == ["ns/a"]


def test_the_time_limit_backs_off_only_and_the_pod_s_own_update_wakes_it() -> None:
    clock = Clock()
    q = PodQueue(QueueConfig(batch_window=0), clock)
    q.add("ns/a", "ns/a")
    q.add("ns/b", "ns/b")
    assert q.next_batch(_never(), idle=0) == ["ns/a", "ns/b"]
    q.done(["ns/a", "ns/b"], {"ns/a": Rejected(None, None)})  # a: the time limit; b: not planned
    clock.now += 1
    assert q.next_batch(_never(), idle=0) == ["ns/a"]  # its backoff (1 s) is over, no change needed
    q.touch("ns/b")  # its own spec changed (a scheduling gate removed, say)
    assert q.next_batch(_never(), idle=0) == ["ns/b"]


def test_a_cycle_takes_what_is_ready_at_once_and_its_time_limit_is_sized_to_its_batch() -> None:
    from engine.loop.scheduler import Profile, Settings

    clock = Clock()
    q = PodQueue(QueueConfig(), clock)  # the defaults: no window to wait out
    q.add("ns/a", "ns/a")
    assert q.next_batch(_never(), idle=0) == ["ns/a"]  # the clock did not move: taken at once
    for key in ("ns/b", "ns/c"):  # what arrives while a cycle runs forms the next batch
        q.add(key, key)
    assert q.next_batch(_never(), idle=0) == ["ns/b", "ns/c"]
    settings = Settings((Profile("p"),), time_limit=5.0, time_per_pod=0.005)
    assert settings.limit_for(1) == pytest.approx(0.205) and settings.limit_for(100_000) == 5.0
    assert Settings((Profile("p"),), time_limit=5.0).limit_for(1) == 5.0  # 0: always the whole limit


def test_a_change_or_a_new_member_during_the_cycle_is_not_missed() -> None:
    """Upstream's in-flight events: what happened while the pod was being planned is judged once the plan says why
    it was left out (it backs off instead of waiting for a change it already missed); a gang member arriving
    meanwhile makes the gang try again at once."""
    from engine.kinds import Action, ModelChange, Resource, Waiting
    from engine.reading.load import build_cluster
    from testkit.manifests import node as full_node

    clock = Clock()
    q = PodQueue(QueueConfig(backoff_initial=1), clock)
    pod_model = build_cluster([("t", pod("big", cpu="8"))]).pending[0]
    room = Rejected(frozenset({"NodeResourcesFit"}), Waiting(pod_model, (), frozenset({"n1"})))
    fits = ModelChange(Resource.NODE, Action.ADD, None, build_cluster([("t", full_node("n9", cpu="16"))]).nodes[0])
    q.add("default/big", "default/big")
    assert q.next_batch(_never(), idle=0) == ["default/big"]
    q.on_change(fits)  # a node that fits joined while the cycle ran on the old snapshot
    q.done(["default/big"], {"default/big": room})
    assert q.unschedulable() == 0  # backs off only
    clock.now += 1
    assert q.next_batch(_never(), idle=0) == ["default/big"]
    q.done(["default/big"], {"default/big": room})
    assert q.unschedulable() == 1  # nothing happened this time: it waits for a change
    q.add("ns/g-0", "gang:ns/g")
    assert q.next_batch(_never(), idle=0) == ["ns/g-0"]
    q.add("ns/g-1", "gang:ns/g")  # the second member, while the first is planned
    q.done(["ns/g-0"], {"ns/g-0": Rejected(frozenset({"Coscheduling"}), None)})
    assert sorted(q.next_batch(_never(), idle=0)) == ["ns/g-0", "ns/g-1"]  # at once, whole


def test_preferences_get_a_fifth_of_a_cycle_once_every_pod_is_placed() -> None:
    from engine.loop.scheduler import Profile, Settings

    settings = Settings((Profile("p"),), time_limit=5.0, time_per_pod=0.005)
    assert settings.preferences_for(100) == pytest.approx(0.2 * settings.limit_for(100))
    assert Settings((Profile("p"),), time_limit=5.0).preferences_for(100) is None


def test_a_list_counts_as_synced_only_once_every_listener_heard_it() -> None:
    """The loops start once the store is synced: a backlog of pods waiting at start is then one batch, not what
    the queue happened to hear of it so far."""
    from engine.loop.ports import WatchTarget
    from engine.loop.store import Store

    store = Store()
    heard = []
    store.subscribe(lambda change: heard.append(store.synced([WatchTarget("Pod")])))
    store.replace(WatchTarget("Pod"), [pod(f"p{i}") for i in range(3)])
    assert heard == [False, False, False] and store.synced([WatchTarget("Pod")])


def test_a_gang_s_cycles_while_its_members_arrive_do_not_lengthen_its_backoff_once_whole() -> None:
    """A gang created pod by pod is planned (and left out, short of members) in a cycle per arrival; those are not
    attempts at the whole gang (upstream holds its pods at PreEnqueue until the quorum is pending). Once whole, a
    first try the time limit cut short backs off 1 s, not the 10 s of as many failures as there were arrivals
    (issue 49's hero gang waited 10 s for its second try)."""
    clock = Clock()
    q = PodQueue(QueueConfig(batch_window=0), clock)
    members = [f"ns/hero-{i}" for i in range(8)]
    short = Rejected(frozenset({"GangScheduling"}), None)  # waiting for more of its members to be pending
    for k, key in enumerate(members):
        q.add(key, "gang:ns/hero")
        assert sorted(q.next_batch(_never(), idle=0)) == members[:k + 1]
        whole = k == len(members) - 1
        q.done(members[:k + 1], {m: Rejected(None, None) if whole else short for m in members[:k + 1]})
        clock.now += 0.01
    assert q.next_batch(_never(), idle=0) == []  # whole, and left out for the time limit: it backs off
    clock.now += 1
    assert sorted(q.next_batch(_never(), idle=0)) == members  # after 1 s, as a first failure
