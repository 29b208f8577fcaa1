"""Policies that survive a restart, and optional policy ConfigMaps, against the in-memory ClusterAPI.

The leader keeps the set in force in ConfigMap NAME-last-valid beside the policy ConfigMap; a replica that starts
while the ConfigMap is invalid or missing schedules with that set, is ready, and says so (an event, its pod's
condition, a metric); with nothing valid kept it schedules nothing and says why. An optional ConfigMap (the
installs' default) that does not exist means pod specs only.
"""
from __future__ import annotations

import threading

from engine.loop.policies import KEPT_FROM, KEPT_VERSION, PolicyHolder, Standing
from engine.loop.queue import QueueConfig
from engine.loop.reports import POLICY_CONDITION
from engine.loop.scheduler import Profile, Scheduler, Settings
from loopfake import FakeAPI, node, pod
from testkit.metrics import total

NS, NAME, KEPT = "ps", "policies", "policies-last-valid"
OWN_POD = ("ps", "scheduler-0")


def _policy(tier: str) -> str:
    return f'policy only-{tier} {{\n  applies to all pods\n  require node label "tier" == "{tier}"\n}}\n'


BROKEN = "policy broken {\n  require nonsense\n}\n"


def _configmap(text: str, name: str = NAME, **data: str) -> dict:
    return {"metadata": {"name": name, "namespace": NS}, "data": {"rules.policy": text, **data}}


def _cluster() -> FakeAPI:
    api = FakeAPI()
    api.put("Node", node("gold", labels={"tier": "gold"}))
    api.put("Node", node("plain", labels={"tier": "plain"}))
    return api


def _start(api: FakeAPI, optional: bool = False) -> Scheduler:
    """A replica starting: its store filled as its watches list, its policies read as `run` reads them."""
    s = Scheduler(api, Settings((Profile("policy-scheduler", (NS, NAME), optional),), QueueConfig(batch_window=0.0),
                                time_limit=2, own_pod=OWN_POD))
    for r in s.resources:
        s.store.replace(r, api.list(r)[0])
    assert s.wait_synced(threading.Event(), timeout=1.0)
    s.refresh_policies()
    return s


def _lead(s: Scheduler) -> None:
    """What the leader's loop does between cycles: keep the set it loaded."""
    s.loops[0]._keep_policies()


def _placed(s: Scheduler, api: FakeAPI, name: str) -> str | None:
    api.put("Pod", pod(name))
    s.store.replace(next(r for r in s.resources if r.kind == "Pod"), api.list(next(r for r in s.resources
                                                                                  if r.kind == "Pod"))[0])
    s.loops[0].cycle([f"default/{name}"]).result()
    return dict(api.binds).get(f"default/{name}")


def _metric(s: Scheduler, name: str) -> float:
    from prometheus_client import generate_latest
    return total(generate_latest(s.metrics.registry).decode(), f"policy_scheduler_{name}", profile="policy-scheduler")


def _conditions(api: FakeAPI, s: Scheduler) -> list[dict]:
    """The scheduler pod's policy condition as written, in order (its status outbox has one writer)."""
    s.events.close()
    return [c for key, c in api.pod_conditions if key == "/".join(OWN_POD) and c["type"] == POLICY_CONDITION]


def test_the_leader_keeps_the_set_it_loaded_beside_the_configmap_and_only_when_it_changes() -> None:
    api = _cluster()
    api.put("ConfigMap", _configmap(_policy("gold"), **{"extra.policy": "# nothing\n"}))
    s = _start(api)
    _lead(s)
    kept = api.objects[("ConfigMap", NS, KEPT)]
    source = api.objects[("ConfigMap", NS, NAME)]
    assert kept["data"] == source["data"]
    notes = kept["metadata"]["annotations"]
    assert notes[KEPT_FROM] == f"{NS}/{NAME}" and notes[KEPT_VERSION] == source["metadata"]["resourceVersion"]
    assert kept["metadata"]["labels"]["app.kubernetes.io/component"] == "last-valid-policies"
    s.store.apply("ConfigMap", "ADDED", kept)  # the watch shows it
    _lead(s)
    assert len(api.created) == 1 and not api.patches  # it holds this version: nothing written again

    s.store.apply("ConfigMap", "MODIFIED", api.put("ConfigMap", _configmap(_policy("plain"))))
    s.loops[0]._refresh_policies()
    _lead(s)
    kept = api.objects[("ConfigMap", NS, KEPT)]
    assert kept["data"] == {"rules.policy": _policy("plain")}, "a key gone from the ConfigMap is gone from the copy"
    assert len(api.patches) == 1

    s.store.apply("ConfigMap", "MODIFIED", kept)
    s.store.apply("ConfigMap", "MODIFIED", api.put("ConfigMap", _configmap(BROKEN)))
    s.loops[0]._refresh_policies()
    _lead(s)
    assert api.objects[("ConfigMap", NS, KEPT)]["data"] == {"rules.policy": _policy("plain")}  # never a bad set


def test_a_replica_starting_while_the_configmap_is_invalid_schedules_with_the_last_valid_set_and_says_so() -> None:
    api = _cluster()
    api.put("ConfigMap", _configmap(_policy("gold")))
    first = _start(api)
    _lead(first)
    first.events.close()
    api.put("ConfigMap", _configmap(BROKEN))  # a bad edit; then the replica restarts (a rollout, a drained node)

    s = _start(api)
    assert s.ready(), "ready: it schedules with the last valid policies"
    assert s.loops[0].policies.standing is Standing.RESTORED
    assert _placed(s, api, "a") == "gold"  # the kept policy holds
    assert (_metric(s, "policies_restored"), _metric(s, "policies_loaded"), _metric(s, "policies_valid")) == (1, 1, 0)

    api.put("ConfigMap", _configmap(_policy("plain")))  # fixed: its own policies from now on
    s.store.replace(next(r for r in s.resources if r.name == NAME), [api.objects[("ConfigMap", NS, NAME)]])
    s.loops[0]._refresh_policies()
    assert s.loops[0].policies.standing is Standing.CURRENT and _metric(s, "policies_restored") == 0
    assert _placed(s, api, "b") == "plain"

    restored, fixed = _conditions(api, s)[-2:]  # (after the first replica's)
    assert (restored["status"], restored["reason"]) == ("False", "LastValidPolicies")
    assert f"kept in ConfigMap {KEPT}" in restored["message"] and "has errors" in restored["message"]
    assert (fixed["status"], fixed["reason"]) == ("True", "PoliciesValid")
    [event] = [e for e in api.events if e[0] == f"ConfigMap/{NS}/{NAME}" and e[2] == "InvalidPolicy"]
    assert f"{NS}/{NAME}[rules.policy]:2:" in event[3] and "the last valid policies (version" in event[3]
    assert f"kept in ConfigMap {KEPT}" in event[3]


def test_a_replica_starting_while_the_configmap_is_missing_restores_the_kept_set_and_tells_on_the_copy() -> None:
    api = _cluster()
    api.put("ConfigMap", _configmap(_policy("gold")))
    _lead(_start(api))
    api.delete("ConfigMap", NS, NAME)
    s = _start(api)
    assert s.ready() and _placed(s, api, "a") == "gold"
    s.events.close()
    told = [e for e in api.events if e[2] == "MissingPolicy"]
    assert told and told[0][0] == f"ConfigMap/{NS}/{KEPT}" and f"policy ConfigMap {NS}/{NAME} does not exist" in told[0][3]


def test_with_no_valid_set_kept_a_replica_schedules_nothing_is_not_ready_and_says_why() -> None:
    api = _cluster()
    api.put("ConfigMap", _configmap(BROKEN))
    s = _start(api)
    assert not s.ready() and s.loops[0].policies.standing is Standing.NOTHING
    assert (_metric(s, "policies_loaded"), _metric(s, "policies_restored")) == (0, 0)
    api.put("Pod", pod("waits"))
    s.store.replace(next(r for r in s.resources if r.kind == "Pod"), api.list(next(r for r in s.resources
                                                                                  if r.kind == "Pod"))[0])
    s.loops[0]._tell_waiting()
    [condition] = _conditions(api, s)
    assert (condition["status"], condition["reason"]) == ("False", "NoValidPolicies")
    assert f"ConfigMap {NS}/{KEPT} does not exist" in condition["message"]
    event = next(e for e in api.events if e[2] == "InvalidPolicy")
    assert "no valid policy set is in force" in event[3] and "nothing is scheduled" in event[3]
    assert f"no last valid set to fall back on: ConfigMap {NS}/{KEPT} does not exist" in api.conditions["default/waits"]


def test_a_kept_copy_that_does_not_check_or_holds_another_configmap_is_not_restored() -> None:
    notes = {KEPT_FROM: f"{NS}/{NAME}", KEPT_VERSION: "7"}
    for kept, why in ((_configmap(BROKEN, KEPT), "have errors"),
                      ({**_configmap(_policy("gold"), KEPT)}, "holds no policy set yet"),
                      (_configmap(_policy("gold"), KEPT), "holds the policies of other/policies")):
        kept = {**kept, "metadata": {**kept["metadata"], "resourceVersion": "3"}}
        if why != "holds no policy set yet":
            kept["metadata"]["annotations"] = {**notes, **({KEPT_FROM: "other/policies"} if "other" in why else {})}
        holder = PolicyHolder((NS, NAME), kept_name=KEPT)
        bad = {**_configmap(BROKEN), "metadata": {"name": NAME, "namespace": NS, "resourceVersion": "9"}}
        holder.refresh(bad, lambda *_: None, kept)
        assert holder.standing is Standing.NOTHING and why in (holder.kept_problem or ""), (why, holder.kept_problem)


def test_an_optional_configmap_that_does_not_exist_means_pod_specs_only_until_it_does() -> None:
    api = _cluster()
    s = _start(api, optional=True)
    assert s.ready() and s.loops[0].policies.standing is Standing.ABSENT
    assert _metric(s, "policies_valid") == 1
    assert _placed(s, api, "anywhere") in ("gold", "plain")
    _lead(s)
    assert ("ConfigMap", NS, KEPT) not in api.objects  # nothing loaded, nothing kept

    api.put("ConfigMap", _configmap(_policy("plain")))  # `policy-scheduler configmap ... | kubectl apply -f -`
    s.store.replace(next(r for r in s.resources if r.name == NAME), [api.objects[("ConfigMap", NS, NAME)]])
    s.loops[0]._refresh_policies()
    assert s.loops[0].policies.standing is Standing.CURRENT and _placed(s, api, "b") == "plain"


def test_an_optional_configmap_that_exists_with_errors_and_nothing_kept_schedules_nothing() -> None:
    api = _cluster()
    api.put("ConfigMap", _configmap(BROKEN))
    s = _start(api, optional=True)
    assert not s.ready() and s.loops[0].policies.standing is Standing.NOTHING


def test_a_write_the_apiserver_refuses_is_logged_and_tried_again_later(caplog) -> None:
    api = _cluster()
    api.put("ConfigMap", _configmap(_policy("gold")))
    api.put("ConfigMap", {"metadata": {"name": KEPT, "namespace": NS}})  # the installs' empty copy
    api.fail_patches[f"ConfigMap {KEPT}"] = 403
    s = _start(api)
    _lead(s)
    assert "cannot keep the policies in force" in caplog.text and "status=403" in caplog.text
    del api.fail_patches[f"ConfigMap {KEPT}"]
    _lead(s)  # not before 30 s
    assert not api.patches
    s.loops[0]._keep_after = 0.0
    _lead(s)
    assert api.objects[("ConfigMap", NS, KEPT)]["data"] == {"rules.policy": _policy("gold")}


# --- one policy workflow: which ConfigMaps the deployed schedulers read (`check --kubeconfig`) ------------------

def _readme_configmap(*args: str) -> dict:
    """What the README's `policy-scheduler configmap my-policies/ | kubectl apply -f -` applies."""
    import yaml
    from click.testing import CliRunner

    from engine.cli import main
    out = CliRunner().invoke(main, ["configmap", "policies/lowest-price/lowest-price.policy", *args])
    assert out.exit_code == 0, out.output
    return yaml.safe_load(out.output)


def _deployment(namespace: str, args: list[str]) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "policy-scheduler", "namespace": namespace,
                         "labels": {"app.kubernetes.io/name": "policy-scheduler"}},
            "spec": {"template": {"spec": {"containers": [{"name": "scheduler", "args": args}]}}}}


def _kustomize_args() -> list[str]:
    import yaml

    from testkit.controlplane import REPO
    deployment = yaml.safe_load((REPO / "deploy" / "deployment.yaml").read_text())
    return deployment["spec"]["template"]["spec"]["containers"][0]["args"]


def _check_live(api: FakeAPI, monkeypatch, *paths: str):
    from click.testing import CliRunner

    import engine.loop.api
    from engine.cli import main
    monkeypatch.setattr(engine.loop.api, "load_client", lambda kubeconfig, pool_size=32: None)
    monkeypatch.setattr(engine.loop.api, "KubeAPI", lambda client: api)
    return CliRunner().invoke(main, ["check", *paths, "--kubeconfig", "kubeconfig"])


def test_the_readme_configmap_is_read_by_a_default_install(monkeypatch) -> None:
    api = FakeAPI()
    api.put("Deployment", _deployment("policy-scheduler", _kustomize_args()))
    api.put("ConfigMap", _readme_configmap())
    api.put("ConfigMap", {"metadata": {"name": "policy-scheduler-policies-last-valid", "namespace": "policy-scheduler",
                                       "labels": {"app.kubernetes.io/name": "policy-scheduler",
                                                  "app.kubernetes.io/component": "last-valid-policies"}}})
    api.put("ConfigMap", {"metadata": {"name": "kube-root-ca.crt", "namespace": "default"}, "data": {"ca.crt": "x"}})
    done = _check_live(api, monkeypatch)
    assert done.exit_code == 0, done.output
    assert "note: ConfigMap policy-scheduler/policy-scheduler-policies checks clean: Deployment " \
           "policy-scheduler/policy-scheduler reads policy-scheduler/policy-scheduler-policies (profile " \
           "policy-scheduler, once it exists)" in done.output
    assert "warning" not in done.output.replace("0 warning(s)", "")


def test_a_policy_set_no_scheduler_reads_gets_a_warning_saying_where_they_read(monkeypatch) -> None:
    """The Helm chart installed in another namespace than the README's: its default profile reads
    scheduling/policy-scheduler-policies, the README's command wrote policy-scheduler/policy-scheduler-policies."""
    api = FakeAPI()
    api.put("Deployment", _deployment("scheduling", ["run", "--leader-elect",
                                                     "--profile=policy-scheduler=scheduling/policy-scheduler-policies,optional"]))
    api.put("ConfigMap", _readme_configmap())
    api.put("ConfigMap", {"metadata": {"name": "mine", "namespace": "team"}, "data": {"gpu.policy": _policy("gold")}})
    done = _check_live(api, monkeypatch)
    assert done.exit_code == 0, done.output  # a warning, not an error: nothing the scheduler reads is wrong
    lines = [line for line in done.output.splitlines() if line.startswith("warning:")]
    assert len(lines) == 2, done.output
    assert "ConfigMap policy-scheduler/policy-scheduler-policies looks like a policy set (lowest-price.policy) but " \
           "no policy-scheduler reads it" in lines[0]
    assert "Deployment scheduling/policy-scheduler reads scheduling/policy-scheduler-policies (profile " \
           "policy-scheduler, once it exists)" in lines[0]
    assert "ConfigMap team/mine looks like a policy set (gpu.policy)" in lines[1]
    assert "note: ConfigMap scheduling/policy-scheduler-policies does not exist" in done.output


def test_a_read_configmap_with_errors_fails_the_check_and_a_missing_required_one_is_a_warning(monkeypatch) -> None:
    api = FakeAPI()
    api.put("Deployment", _deployment("ps", ["run", "--profile=web=ps/web", "--profile=batch=ps/batch"]))
    api.put("ConfigMap", {"metadata": {"name": "web", "namespace": "ps"}, "data": {"rules.policy": BROKEN}})
    done = _check_live(api, monkeypatch)
    assert done.exit_code == 1, done.output
    assert "error: ConfigMap ps/web has errors: Deployment ps/policy-scheduler reads ps/web (profile web)" in done.output
    assert "ps/web[rules.policy]:2:" in done.output
    assert "warning: ConfigMap ps/batch does not exist: Deployment ps/policy-scheduler reads ps/batch (profile batch); " \
           "that profile schedules nothing until it does" in done.output
    assert _check_live(FakeAPI(), monkeypatch).output.startswith("warning: no policy-scheduler Deployment found")
    paths_too = _check_live(api, monkeypatch, "policies/lowest-price")
    assert paths_too.exit_code == 1 and "1 policy OK" in paths_too.output  # the files are fine, the live set is not


def test_after_a_bad_edit_a_new_leader_keeps_its_set_only_where_no_version_of_that_configmap_is_kept() -> None:
    """A replica that loaded version 3 and missed version 5 (a relist) must not put 3 over a kept 5: resourceVersions
    do not say which is later. Into an empty copy it does keep 3 (the last valid set it knows)."""
    holder = PolicyHolder((NS, NAME), kept_name=KEPT)
    good = {**_configmap(_policy("gold")), "metadata": {"name": NAME, "namespace": NS, "resourceVersion": "3", "uid": "u"}}
    holder.refresh(good, lambda *_: None)
    bad = {**_configmap(BROKEN), "metadata": {"name": NAME, "namespace": NS, "resourceVersion": "6", "uid": "u"}}
    holder.refresh(bad, lambda *_: None)
    assert holder.standing is Standing.PREVIOUS
    later = {"metadata": {"name": KEPT, "namespace": NS, "resourceVersion": "9",
                          "annotations": {KEPT_FROM: f"{NS}/{NAME}", "policy-scheduler/kept-uid": "u", KEPT_VERSION: "5"}}}
    assert holder.to_keep(later) is None
    empty = {"metadata": {"name": KEPT, "namespace": NS, "resourceVersion": "2"}}
    copy = holder.to_keep(empty)
    assert copy is not None and copy["metadata"]["annotations"][KEPT_VERSION] == "3"


def test_check_without_paths_needs_the_live_policies() -> None:
    from click.testing import CliRunner

    from engine.cli import main
    for args in ([], ["--cluster", "snap.yaml"]):
        done = CliRunner().invoke(main, ["check", *args])
        assert done.exit_code == 2 and "check needs PATH..." in done.output, done.output
