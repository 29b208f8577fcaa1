"""What `run` tells operators: events on pods that wait for policies, Lease refusals at error level with the fix,
the state metrics (pods waiting, leader, policies), cycle phases and the gap, and /readyz vs /leaderz."""
from __future__ import annotations

import logging
import threading
import time
import urllib.error
import urllib.request

import pytest
from prometheus_client import generate_latest

from engine.loop.command import _log_profiles
from engine.loop.leader import LeaderElector
from engine.loop.ports import ApiError, NotFound
from engine.loop.queue import QueueConfig
from engine.loop.scheduler import Profile, Scheduler, Settings
from engine.loop.serving.endpoints import Endpoints, Listener
from loopfake import FakeAPI, node, pod, synced_loop

BROKEN = "policy broken {\n  nonsense\n}\n"


def _scheduler(api: FakeAPI, *profiles: Profile) -> Scheduler:
    s = Scheduler(api, Settings(profiles, QueueConfig(batch_window=0.0), time_limit=2))
    for r in s.resources:
        s.store.replace(r, api.list(r)[0])
    return s


def _sample(s: Scheduler, name: str, **labels: str) -> float | None:
    """The value of one sample on /metrics (as text, the way Prometheus reads it), None when absent."""
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in generate_latest(s.metrics.registry).decode().splitlines():
        if line.startswith("#"):
            continue
        key, _, value = line.rpartition(" ")
        if key == (f"{name}{{{want}}}" if want else name):
            return float(value)
    return None


def _events_until(api: FakeAPI, want: int, loop, timeout: float = 10.0) -> list[tuple[str, str, str, str]]:
    """Run `loop` in its thread until `want` events were posted (or time is up); the events."""
    stop = threading.Event()
    thread = threading.Thread(target=loop.run, args=(stop,), daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while len(api.events) < want and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    thread.join(10)
    return api.events


@pytest.mark.parametrize("configmap, why", [
    (None, "policy ConfigMap ops/policies does not exist"),
    ({"a.policy": BROKEN}, "policy ConfigMap ops/policies has errors: ops/policies[a.policy]:2:"),
])
def test_waiting_pods_are_told_why_nothing_is_scheduled(configmap, why) -> None:
    api = FakeAPI()
    api.put("Node", node("n1"))
    api.put("Pod", pod("w1"))
    api.put("Pod", pod("bound", node_name="n1"))
    if configmap is not None:
        api.put("ConfigMap", {"metadata": {"name": "policies", "namespace": "ops"}, "data": configmap})
    s = _scheduler(api, Profile("policy-scheduler", ("ops", "policies")))
    loop = s.loops[0]
    events = [e for e in _events_until(api, 1 + (configmap is not None), loop) if e[0].startswith("Pod/")]
    s.events.close()
    assert api.binds == []  # nothing scheduled without a valid policy set
    assert [(e[0], e[1], e[2]) for e in events] == [("Pod/default/w1", "Warning", "FailedScheduling")]
    assert "no valid policy set" in events[0][3] and why in events[0][3], events[0][3]
    assert api.condition_reasons == {"default/w1": "SchedulerError"}  # PodScheduled=False says so too
    assert why in api.conditions["default/w1"]
    assert _sample(s, "policy_scheduler_pods_waiting", profile="policy-scheduler") == 1
    assert _sample(s, "policy_scheduler_policies_loaded", profile="policy-scheduler") == 0
    assert _sample(s, "policy_scheduler_policies_valid", profile="policy-scheduler") == 0


def test_the_start_log_does_not_say_scheduling_for_a_profile_without_policies(caplog) -> None:
    api = FakeAPI()
    s = _scheduler(api, Profile("web", ("ops", "missing")), Profile("batch"))
    s.refresh_policies()
    with caplog.at_level(logging.INFO, logger="policy_scheduler"):
        _log_profiles(s)
    lines = [r.getMessage() for r in caplog.records]
    assert "scheduling profiles=batch" in lines
    warning = next(r for r in caplog.records if r.levelno == logging.WARNING and r.name == "policy_scheduler")
    assert "not scheduling profile=web" in warning.getMessage()
    assert "policy ConfigMap ops/missing does not exist" in warning.getMessage()


def test_a_cycle_records_its_phases_and_gap_and_the_state_gauges_follow() -> None:
    api = FakeAPI()
    api.put("Node", node("n1"))
    api.put("Pod", pod("a"))
    api.put("Pod", pod("b"))  # 1-cpu node, 1-cpu pods: one waits
    s, loop = synced_loop(api)
    assert _sample(s, "policy_scheduler_pods_waiting", profile="policy-scheduler") == 2
    assert _sample(s, "policy_scheduler_leader") == 0
    assert _sample(s, "policy_scheduler_policies_loaded", profile="policy-scheduler") == 1
    loop.cycle(["default/a", "default/b"]).result(timeout=30)
    for phase in ("compile", "start", "model", "solve", "bind"):
        assert _sample(s, "policy_scheduler_cycle_phase_seconds_count", profile="policy-scheduler", phase=phase) == 1
    assert _sample(s, "policy_scheduler_optimality_gap", profile="policy-scheduler") == 0.0
    assert _sample(s, "policy_scheduler_pods_waiting", profile="policy-scheduler") == 1  # the one bound is not
    s.leading.set()
    assert _sample(s, "policy_scheduler_leader") == 1


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_readyz_is_ready_on_a_standby_and_leaderz_tells_the_leader(monkeypatch) -> None:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    s, _ = synced_loop(FakeAPI())
    server = Listener(Endpoints(s.metrics.registry, s.ready, s.leading.is_set), 0, host="127.0.0.1")
    port = server.start()
    try:
        assert _get(port, "/readyz") == (200, "ok: standby\n")  # a Service may route to it; a rollout proceeds
        assert _get(port, "/leaderz") == (503, "standby\n")
        s.leading.set()
        assert _get(port, "/readyz") == (200, "ok: leader\n")
        assert _get(port, "/leaderz") == (200, "leader\n")
        assert "policy_scheduler_leader 1.0" in _get(port, "/metrics")[1]
    finally:
        server.stop()


class RefusingAPI(FakeAPI):
    """The Lease calls answer as an apiserver does without RBAC (403) or without the namespace (404)."""

    refuse: int = 403

    def get_lease(self, namespace: str, name: str):
        if self.refuse == 403:
            raise ApiError(403, f'leases.coordination.k8s.io "{name}" is forbidden: User cannot get resource')
        return None

    def create_lease(self, namespace: str, lease):
        raise NotFound(f'namespaces "{namespace}" not found')


@pytest.mark.parametrize("status, fix", [
    (403, "fix: grant this ServiceAccount get, update and create on leases (coordination.k8s.io) in namespace kube-system"),
    (404, "fix: namespace kube-system does not exist: create it, or set --lease-namespace"),
])
def test_lease_refusals_are_errors_with_the_fix_logged_once(status: int, fix: str, caplog) -> None:
    api = RefusingAPI()
    api.refuse = status
    elector = LeaderElector(api, "kube-system", "ps", "me", retry_seconds=0.01)
    with caplog.at_level(logging.DEBUG, logger="policy_scheduler.leader"):
        for _ in range(5):
            assert not elector.try_acquire_or_renew()
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1, errors  # every retry fails the same way: said once, not five times
    assert f"status={status}" in errors[0] and fix in errors[0] and "lease=kube-system/ps" in errors[0]


def test_ready_only_once_the_cache_is_built_after_the_sync() -> None:
    from engine.loop.scheduler import Profile, Scheduler, Settings
    api = FakeAPI()
    api.put("Node", node("n1"))
    s = Scheduler(api, Settings((Profile("policy-scheduler"),)))
    for r in s.resources:
        s.store.replace(r, api.list(r)[0] if r.kind not in api.absent_kinds else [])
    assert not s.ready()  # every watch has listed, but the first cycle would still convert the cluster
    assert s.wait_synced(threading.Event(), timeout=1.0)
    assert s.ready()
