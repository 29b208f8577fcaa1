"""Running the scheduler: policy hot reload, profiles, leader election, metrics, apiserver restarts.

Same conventions as test_scheduler.py: a namespace and `e2e: <test>` nodes per test, schedulers as
separate processes with their own scheduler names.
"""
from __future__ import annotations

from testkit.controlplane import ControlPlane
from testkit.manifests import api_pod
from testkit.scheduling import Kube, condition, node_of, wait_for


def _policy(ns: str, label: str, value: str) -> str:
    return (f'policy only-{value} {{\n  applies to pods where namespace == "{ns}"\n'
            f'  require node label "{label}" == "{value}"\n}}\n')


def _configmap(ns: str, name: str, text: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns},
            "data": {"rules.policy": text}}


def _bound_to(kube: Kube, ns: str, name: str) -> str | None:
    return node_of(kube.pods(ns).get(name) or {})


def test_policy_configmap_hot_reload_good_and_bad(control_plane: ControlPlane, kube: Kube, schedulers) -> None:
    ns, sel = "sched-policy", {"e2e": "policy"}
    control_plane.ensure_namespace(ns)
    control_plane.create_ready_node("pol-gold", labels={**sel, "tier": "gold"})
    control_plane.create_ready_node("pol-plain", labels={**sel, "tier": "plain"})
    cm_path = f"/api/v1/namespaces/{ns}/configmaps/policies"
    kube.create(_configmap(ns, "policies", _policy(ns, "tier", "gold")))
    s = schedulers.start("--scheduler-name", "policy-sched", "--policy-configmap", f"{ns}/policies")
    kube.create(api_pod("first", ns, scheduler="policy-sched", nodeSelector=sel))
    wait_for("first on gold", lambda: _bound_to(kube, ns, "first") == "pol-gold")

    kube.ok("PUT", cm_path, _configmap(ns, "policies", "policy broken {\n  require nonsense\n}\n"))
    warning = wait_for("Warning event on the ConfigMap", lambda: [
        e for e in kube.events(ns) if e["involvedObject"]["kind"] == "ConfigMap" and e["type"] == "Warning"])
    assert f"{ns}/policies[rules.policy]:2:" in warning[0]["message"]
    wait_for("failed reload metric", lambda: s.metric("policy_scheduler_policy_reloads_total", result="failed") == 1)
    kube.create(api_pod("second", ns, scheduler="policy-sched", nodeSelector=sel))
    wait_for("second on gold: the previous policies stay active", lambda: _bound_to(kube, ns, "second") == "pol-gold")

    kube.ok("PUT", cm_path, _configmap(ns, "policies", _policy(ns, "tier", "plain")))
    wait_for("good reload metric", lambda: s.metric("policy_scheduler_policy_reloads_total", result="ok") == 2)
    kube.create(api_pod("third", ns, scheduler="policy-sched", nodeSelector=sel))
    wait_for("third on plain: the new policies", lambda: _bound_to(kube, ns, "third") == "pol-plain")
    assert "policy reload failed" in s.log()


KEEP_NS = "keep-c"  # a chart release whose two profiles read ConfigMaps of their own there
KEEP_VALUES = {"profiles": [{"name": "keep-sched", "existingConfigMap": "keep-policies"},
                            {"name": "lost-sched", "existingConfigMap": "lost-policies"}]}
CONDITION = "policy-scheduler/PoliciesValid"


def _stand_in(kube: Kube, name: str) -> dict[str, str]:
    """A pod object for a scheduler process to report on (no kubelet runs it; nobody schedules it): the environment
    the installs give the scheduler's container."""
    kube.create(api_pod(name, KEEP_NS, scheduler="nobody"))
    return {"POD_NAMESPACE": KEEP_NS, "POD_NAME": name}


def _policy_condition(kube: Kube, pod: str) -> dict | None:
    return condition(kube.pods(KEEP_NS)[pod], CONDITION)


def test_a_restart_while_the_configmap_is_invalid_schedules_with_the_last_valid_policies(
        control_plane: ControlPlane, kube: Kube, chart_schedulers, chart_identity) -> None:
    """Issue 47, point 7, as the chart's ServiceAccount: the leader keeps the set it loaded (a patch of the copy the
    chart made); after a bad edit a replica that starts schedules with that set, is ready, and says so in an event,
    its pod's condition and a metric."""
    sel = {"e2e": "keep"}
    identity = chart_identity("keep-chart", KEEP_NS, KEEP_VALUES)
    control_plane.create_ready_node("keep-gold", labels={**sel, "tier": "gold"})
    control_plane.create_ready_node("keep-plain", labels={**sel, "tier": "plain"})
    cm_path = f"/api/v1/namespaces/{KEEP_NS}/configmaps/keep-policies"
    kube.create(_configmap(KEEP_NS, "keep-policies", _policy(KEEP_NS, "tier", "gold")))
    args = ("--profile", f"keep-sched={KEEP_NS}/keep-policies")
    first = chart_schedulers.start(*args, kubeconfig=identity, name="keep-first", env=_stand_in(kube, "scheduler-a"))
    wait_for("the loaded set kept", lambda: kube.ok("GET", f"{cm_path}-last-valid").get("data") ==
             {"rules.policy": _policy(KEEP_NS, "tier", "gold")})
    wait_for("its pod says its policies are valid", lambda: (_policy_condition(kube, "scheduler-a") or {}).get("status")
             == "True")
    assert first.stop() == 0

    kube.ok("PUT", cm_path, _configmap(KEEP_NS, "keep-policies", "policy broken {\n  require nonsense\n}\n"))
    s = chart_schedulers.start(*args, kubeconfig=identity, name="keep-second", env=_stand_in(kube, "scheduler-b"))
    assert s.get("/readyz")[0] == 200  # (start() waited for it)
    assert s.metric("policy_scheduler_policies_restored", profile="keep-sched") == 1
    assert s.metric("policy_scheduler_policies_loaded", profile="keep-sched") == 1
    assert s.metric("policy_scheduler_policies_valid", profile="keep-sched") == 0
    kube.create(api_pod("kept-rules", KEEP_NS, scheduler="keep-sched", nodeSelector=sel))
    wait_for("placed by the kept policy", lambda: _bound_to(kube, KEEP_NS, "kept-rules") == "keep-gold")
    said = wait_for("its pod's condition", lambda: _policy_condition(kube, "scheduler-b"))
    assert (said["status"], said["reason"]) == ("False", "LastValidPolicies"), said
    assert "kept in ConfigMap keep-policies-last-valid" in said["message"], said
    event = wait_for("a Warning event on the ConfigMap", lambda: [
        e for e in kube.events(KEEP_NS) if e["reason"] == "InvalidPolicy" and e["involvedObject"]["name"] == "keep-policies"])
    assert f"{KEEP_NS}/keep-policies[rules.policy]:2:" in event[0]["message"]
    assert "the last valid policies (version" in event[0]["message"] and "are in force" in event[0]["message"]
    assert "policies restored configmap=keep-c/keep-policies" in s.log()

    kube.ok("PUT", cm_path, _configmap(KEEP_NS, "keep-policies", _policy(KEEP_NS, "tier", "plain")))  # fixed
    wait_for("its own policies again", lambda: s.metric("policy_scheduler_policies_restored", profile="keep-sched") == 0)
    wait_for("the condition back to True", lambda: _policy_condition(kube, "scheduler-b")["status"] == "True")
    wait_for("the fixed set kept", lambda: kube.ok("GET", f"{cm_path}-last-valid").get("data") ==
             {"rules.policy": _policy(KEEP_NS, "tier", "plain")})


def test_with_no_valid_set_kept_a_replica_schedules_nothing_and_says_why(control_plane: ControlPlane, kube: Kube,
                                                                         chart_schedulers, chart_identity) -> None:
    identity = chart_identity("keep-chart", KEEP_NS, KEEP_VALUES)
    kube.create(_configmap(KEEP_NS, "lost-policies", "policy broken {\n  require nonsense\n}\n"))
    s = chart_schedulers.start("--profile", f"lost-sched={KEEP_NS}/lost-policies", kubeconfig=identity, name="lost",
                               ready=False, env=_stand_in(kube, "scheduler-c"))
    said = wait_for("its pod's condition", lambda: _policy_condition(kube, "scheduler-c"))
    assert (said["status"], said["reason"]) == ("False", "NoValidPolicies"), said
    assert f"ConfigMap {KEEP_NS}/lost-policies-last-valid holds no policy set yet" in said["message"], said
    event = wait_for("a Warning event on the ConfigMap", lambda: [
        e for e in kube.events(KEEP_NS) if e["reason"] == "InvalidPolicy" and e["involvedObject"]["name"] == "lost-policies"])
    assert "no valid policy set is in force" in event[0]["message"] and "nothing is scheduled" in event[0]["message"]
    assert s.get("/readyz")[0] == 503 and s.metric("policy_scheduler_policies_loaded", profile="lost-sched") == 0


def test_two_profiles_in_one_process(control_plane: ControlPlane, kube: Kube, schedulers) -> None:
    ns, sel = "sched-profiles", {"e2e": "profiles"}
    control_plane.ensure_namespace(ns)
    control_plane.create_ready_node("prof-red", labels={**sel, "color": "red"})
    control_plane.create_ready_node("prof-blue", labels={**sel, "color": "blue"})
    kube.create(_configmap(ns, "alpha", _policy(ns, "color", "red")))
    kube.create(_configmap(ns, "beta", _policy(ns, "color", "blue")))
    schedulers.start("--profile", f"alpha={ns}/alpha", "--profile", f"beta={ns}/beta")
    for i in range(3):
        kube.create(api_pod(f"a-{i}", ns, scheduler="alpha", nodeSelector=sel))
        kube.create(api_pod(f"b-{i}", ns, scheduler="beta", nodeSelector=sel))
    wait_for("all bound", lambda: all(node_of(p) for p in kube.pods(ns).values()))
    placed = {name: node_of(p) for name, p in kube.pods(ns).items()}
    assert {placed[f"a-{i}"] for i in range(3)} == {"prof-red"}
    assert {placed[f"b-{i}"] for i in range(3)} == {"prof-blue"}


def test_leader_failover_binds_every_pod_once(control_plane: ControlPlane, kube: Kube, schedulers) -> None:
    ns, sel = "sched-leader", {"e2e": "leader"}
    control_plane.ensure_namespace(ns)
    control_plane.create_ready_node("leader-1", labels=sel)
    args = ("--scheduler-name", "ha-sched", "--leader-elect", "--lease-namespace", ns, "--lease-duration", "4")
    first = schedulers.start(*args, name="replica-a")
    wait_for("replica-a leads", lambda: "became leader" in first.log())
    second = schedulers.start(*args, name="replica-b")  # ready (caches synced) while standing by
    for i in range(5):
        kube.create(api_pod(f"before-{i}", ns, scheduler="ha-sched", nodeSelector=sel))
    wait_for("bound by the leader", lambda: sum(1 for p in kube.pods(ns).values() if node_of(p)) == 5)
    assert "became leader" not in second.log() and "cycle profile" not in second.log()

    first.kill()  # a crash: the lease is not released, the standby waits it out
    for i in range(5):
        kube.create(api_pod(f"after-{i}", ns, scheduler="ha-sched", nodeSelector=sel))
    wait_for("takeover within the lease duration", lambda: "became leader" in second.log(), timeout=4 + 6)
    wait_for("bound by the new leader", lambda: sum(1 for p in kube.pods(ns).values() if node_of(p)) == 10)

    def scheduled() -> list[str]:
        return [e["involvedObject"]["name"] for e in kube.events(ns) if e["reason"] == "Scheduled"]
    # events go out after their binds, from the event outbox's writers: wait until each pod has one
    wait_for("a Scheduled event for every pod", lambda: set(scheduled()) == set(kube.pods(ns)))
    assert sorted(scheduled()) == sorted(kube.pods(ns)), "every pod bound exactly once"
    assert second.metric("policy_scheduler_bind_errors_total") == 0


def test_sigterm_releases_the_lease(control_plane: ControlPlane, kube: Kube, schedulers) -> None:
    ns = "sched-release"
    control_plane.ensure_namespace(ns)
    args = ("--scheduler-name", "release-sched", "--leader-elect", "--lease-namespace", ns, "--lease-duration", "30")
    first = schedulers.start(*args, name="replica-a")
    wait_for("replica-a leads", lambda: "became leader" in first.log())
    lease_path = f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/release-sched"
    holder = kube.ok("GET", lease_path)["spec"]["holderIdentity"]
    second = schedulers.start(*args, name="replica-b")
    assert first.stop() == 0
    # released: empty, or already taken by the standby (it may win the race to this read)
    assert kube.ok("GET", lease_path)["spec"].get("holderIdentity") != holder
    wait_for("standby leads long before 30 s", lambda: "became leader" in second.log(), timeout=10)


def test_metrics_health_and_an_apiserver_restart(control_plane: ControlPlane, kube: Kube, schedulers) -> None:
    ns, sel = "sched-restart", {"e2e": "restart"}
    control_plane.ensure_namespace(ns)
    control_plane.create_ready_node("restart-1", labels=sel)
    s = schedulers.start("--scheduler-name", "restart-sched")
    assert s.get("/healthz")[0] == 200 and s.get("/readyz")[0] == 200
    kube.create(api_pod("before", ns, scheduler="restart-sched", nodeSelector=sel))
    wait_for("bound", lambda: _bound_to(kube, ns, "before"))
    control_plane.restart_apiserver()
    for i in range(3):
        kube.create(api_pod(f"after-{i}", ns, scheduler="restart-sched", nodeSelector=sel))
    wait_for("bound after the restart", lambda: all(node_of(p) for p in kube.pods(ns).values()), timeout=60)
    assert s.metric("policy_scheduler_pods_bound_total") == 4
    assert s.metric("policy_scheduler_batches_total") >= 2
    assert s.metric("policy_scheduler_pending_to_bound_seconds_count") == 4
    assert s.process.running()


def test_live_snapshot_plans_without_writing(control_plane: ControlPlane, kube: Kube) -> None:
    """engine.loop.live.read_cluster: the input of a live `dry-run --kubeconfig`, read only."""
    from engine.loop.live import read_cluster
    from engine.planning.plan import make_plan
    from engine.reading.load import build_cluster

    ns, sel = "sched-live", {"e2e": "live"}
    control_plane.ensure_namespace(ns)
    control_plane.create_ready_node("live-1", labels=sel)
    kube.create(api_pod("planned", ns, scheduler="nobody-runs-me", nodeSelector=sel))
    plan = make_plan(build_cluster(read_cluster(str(control_plane.kubeconfig)), "nobody-runs-me"), time_limit=2)
    assert plan.assignments == {f"{ns}/planned": "live-1"}
    assert not node_of(kube.pods(ns)["planned"])  # nothing was bound


def test_dry_run_against_a_live_cluster(control_plane: ControlPlane, kube: Kube) -> None:
    """`policy-scheduler dry-run --kubeconfig F`: the same JSON contract as with a snapshot, nothing bound."""
    import json
    import subprocess
    import sys

    ns, sel = "dry-live", {"e2e": "dry-live"}
    control_plane.ensure_namespace(ns)
    control_plane.create_ready_node("dry-live-1", labels=sel)
    kube.create(api_pod("fits", ns, scheduler="dry-runner", nodeSelector=sel))
    kube.create(api_pod("too-big", ns, scheduler="dry-runner", cpu="64", nodeSelector=sel))
    kube.create(api_pod("unreadable", ns, scheduler="dry-runner", cpu="9Ei", nodeSelector=sel))  # admitted, > 2^53
    done = subprocess.run([sys.executable, "-m", "engine", "dry-run", "--kubeconfig", str(control_plane.kubeconfig),
                           "--scheduler-name", "dry-runner", "-o", "json"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr  # as the scheduler loop: what the model cannot read is left out, said
    plan = json.loads(done.stdout)
    assert plan["assignments"] == {f"{ns}/fits": "dry-live-1"}
    assert "Insufficient cpu" in plan["unschedulable"][f"{ns}/too-big"][0]
    assert f"note: left out, the scheduler cannot read it: Pod {ns}/unreadable" in done.stderr, done.stderr
    assert not any(node_of(p) for p in kube.pods(ns).values())
    bad = subprocess.run([sys.executable, "-m", "engine", "dry-run", "--kubeconfig", "/nonexistent/kubeconfig"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "/nonexistent/kubeconfig" in bad.stderr


def test_a_proxy_in_the_environment_does_not_break_loopback(control_plane: ControlPlane, monkeypatch) -> None:
    """The scheduler's client ignores HTTPS_PROXY for a loopback apiserver (nothing listens on port 9)."""
    from engine.loop.api import KubeAPI, load_client
    from engine.loop.ports import WatchTarget

    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("https_proxy", "http://127.0.0.1:9")
    items, version = KubeAPI(load_client(str(control_plane.kubeconfig))).list(WatchTarget("Node"))
    assert version and all(item["kind"] == "Node" for item in items)
