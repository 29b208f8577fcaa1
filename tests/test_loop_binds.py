"""What the loop does after a bind fails, and with objects the model cannot read.

A bind the apiserver refused for another reason (an error, a timeout) is retried after a backoff: the pod is
still pending and ours. A 409 Conflict means the pod was bound meanwhile or replaced by another of the same
name: it is not retried blindly; the watch decides. Objects the model refuses are set aside by build_cluster's
one pass, without running it again, and a refused pod of the batch is told why.
"""
from __future__ import annotations

from clocks import StoppedClock
from loopfake import FakeAPI, node, pod, synced_loop
from testkit.manifests import priority_class


def test_a_bind_the_apiserver_failed_is_retried_after_a_backoff() -> None:
    api = FakeAPI(fail_binds={"default/a": 500})
    api.put("Node", node("n1", cpu="1"))
    api.put("Pod", pod("a"))
    s, loop = synced_loop(api)
    clock = loop.queue.clock = StoppedClock()  # the queue's time passes only when the test moves it
    loop.cycle(loop.queue.next_batch(_never(), idle=0.1)).result()
    unit = loop.queue._units["default/a"]
    assert "default/a" in unit.waiting and unit.attempts == 1 and unit.not_before > clock.now  # backed off
    assert not loop.queue.parked("default/a") and not s.store.is_assumed("default/a")
    api.fail_binds.clear()
    assert loop.queue.next_batch(_never(), idle=0) == []  # not before the backoff is over
    clock.now = unit.not_before
    batch = loop.queue.next_batch(_never(), idle=0)  # ready again once it is
    assert batch == ["default/a"]
    loop.cycle(batch).result()
    assert api.binds == [("default/a", "n1")]
    s.events.close()


def test_a_conflict_waits_for_the_watch_instead_of_a_retry() -> None:
    api = FakeAPI()
    api.put("Node", node("n1", cpu="1"))
    api.put("Pod", pod("a"))
    s, loop = synced_loop(api)
    api.objects[("Pod", "default", "a")]["metadata"]["uid"] = "recreated"  # replaced; the watch has not said so
    loop.cycle(loop.queue.next_batch(_never(), idle=0.1)).result()
    unit = loop.queue._units["default/a"]
    assert loop.queue.parked("default/a") and not unit.waiting and unit.attempts == 0  # neither in line nor backed off
    assert not s.store.is_assumed("default/a") and api.binds == []
    assert loop.queue.next_batch(_never(), idle=0.3) == []  # nothing retries it blindly
    s.store.apply("Pod", "DELETED", {**pod("a"), "metadata": {**pod("a")["metadata"], "uid": "uid-Pod-default-a"}})
    s.store.apply("Pod", "ADDED", api.objects[("Pod", "default", "a")])  # the watch: the new pod, pending
    assert loop.queue.next_batch(_never(), idle=0.5) == ["default/a"]
    s.events.close()


def test_a_conflict_on_a_pod_still_shown_pending_is_put_back_by_its_next_watch_event() -> None:
    api = FakeAPI(fail_binds={"default/a": 409})
    api.put("Node", node("n1", cpu="1"))
    a = api.put("Pod", pod("a"))
    s, loop = synced_loop(api)
    loop.cycle(loop.queue.next_batch(_never(), idle=0.1)).result()
    assert loop.queue.parked("default/a")
    s.store.apply("Pod", "MODIFIED", {**a, "metadata": {**a["metadata"], "resourceVersion": "99"}})
    assert not loop.queue.parked("default/a") and loop.queue.waiting() == 1
    s.store.apply("Pod", "MODIFIED", {**a, "metadata": {**a["metadata"], "resourceVersion": "100"},
                                      "spec": {**a["spec"], "nodeName": "n1"}})  # bound by someone
    assert loop.queue.waiting() == 0 and "default/a" not in loop.queue._unit_of
    s.events.close()


def test_bad_objects_are_set_aside_in_one_pass_and_a_bad_pod_of_the_batch_is_told(monkeypatch) -> None:
    api = FakeAPI()
    api.put("Node", node("n1", cpu="2"))
    api.put("Node", node("broken", cpu="lots"))
    api.put("PriorityClass", {**priority_class("high", 1000), "value": "very"})
    api.put("Pod", pod("good"))
    api.put("Pod", pod("classy", priorityClassName="high"))
    api.put("Pod", pod("bad", cpu="lots"))
    s, loop = synced_loop(api)
    calls = []
    real = s.cache.snapshot
    monkeypatch.setattr(s.cache, "snapshot", lambda *a, **k: calls.append(1) or real(*a, **k))
    loop.cycle(["default/good", "default/classy", "default/bad"]).result()
    assert len(calls) == 1  # one pass, whatever is refused
    assert api.binds == [("default/good", "n1")]
    s.events.close()
    assert api.conditions["default/bad"].startswith("[InvalidObject] the scheduler cannot read this pod: Pod default/bad: ")
    assert "PriorityClass 'high' not found" in api.conditions["default/classy"]  # its class was refused


def _never():
    import threading

    return threading.Event()
