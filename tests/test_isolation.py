"""Isolation (issue 25, point 1): an error nobody foresaw refuses only the pods it concerns. Planning that raises
for one pod is bisected down to that pod (a gang stays whole), which is refused with the error while everyone
else is planned in the same call; in the loop, a cycle failing outside planning is narrowed the same way into
cycles of its own, and the culprit is told (PodScheduled=False/SchedulerError) and backed off, never the batch."""
from __future__ import annotations

import engine.planning.plan
from engine.loop.cycle import CycleResult
from engine.planning.isolation import culprits
from engine.planning.planner import Options, plan_batch
from engine.reading.load import build_cluster
from loopfake import FakeAPI, synced_loop
from testkit.manifests import (
    GPU_DRIVER,
    claims,
    device_class,
    device_request,
    gpu,
    node,
    pod,
    podgroup,
    resource_claim,
    resource_slice,
)

GANG = {"scheduling.x-k8s.io/pod-group": "job"}


def _poisoned(monkeypatch, *names: str) -> list[int]:
    """Compiling any batch that holds a pending pod named in `names` raises; returns the calls' batch sizes."""
    real, sizes = engine.planning.plan.compile_cluster, []

    def compile_cluster(cluster, *args, **kwargs):
        sizes.append(len(cluster.pending))
        if any(p.name in names for p in cluster.pending):
            raise ZeroDivisionError(f"poisoned by {sorted(p.name for p in cluster.pending if p.name in names)}")
        return real(cluster, *args, **kwargs)
    monkeypatch.setattr(engine.planning.plan, "compile_cluster", compile_cluster)
    return sizes


def _plan(docs: list[dict], time_limit: float = 2.0):
    cluster = build_cluster([(f"doc{i}", d) for i, d in enumerate(docs)])
    return plan_batch(cluster, options=Options(time_limit=time_limit, workers=1))


def test_one_pod_that_makes_planning_raise_is_refused_and_everyone_else_is_placed(monkeypatch) -> None:
    sizes = _poisoned(monkeypatch, "bad")
    docs = [node("n1", cpu="8"), *(pod(f"p{i}") for i in range(40)), pod("bad")]
    plan = _plan(docs)
    assert set(plan.assignments) == {f"default/p{i}" for i in range(40)}
    assert list(plan.unschedulable) == ["default/bad"]
    assert "ZeroDivisionError: poisoned by ['bad']" in plan.unschedulable["default/bad"][0]
    assert "bug in policy-scheduler" in plan.unschedulable["default/bad"][0]
    assert plan.details.errors == {"default/bad"}
    assert [f.pods for f in plan.details.failures] == [("default/bad",)] and "Traceback" in plan.details.failures[0].trace
    assert plan.stats.failed == 1
    assert len(sizes) <= 2 * 6 + 2, sizes  # bisection: about two probes per halving, then the plan without it


def test_a_gang_is_refused_whole_when_one_member_makes_planning_raise(monkeypatch) -> None:
    _poisoned(monkeypatch, "job-1")
    docs = [node("n1", cpu="8"), podgroup("job", 3), *(pod(f"job-{i}", labels=GANG) for i in range(3)),
            *(pod(f"web-{i}") for i in range(5))]
    plan = _plan(docs)
    assert set(plan.assignments) == {f"default/web-{i}" for i in range(5)}
    assert set(plan.unschedulable) == {f"default/job-{i}" for i in range(3)}
    assert [sorted(f.pods) for f in plan.details.failures] == [[f"default/job-{i}" for i in range(3)]]


def test_two_culprits_are_both_found(monkeypatch) -> None:
    _poisoned(monkeypatch, "bad-a", "bad-b")
    docs = [node("n1", cpu="8"), *(pod(f"p{i}") for i in range(20)), pod("bad-a"), pod("bad-b")]
    plan = _plan(docs)
    assert len(plan.assignments) == 20 and set(plan.unschedulable) == {"default/bad-a", "default/bad-b"}


def test_a_failure_only_the_whole_batch_has_refuses_everyone_with_the_error(monkeypatch) -> None:
    real = engine.planning.plan.compile_cluster

    def compile_cluster(cluster, *args, **kwargs):
        if len(cluster.pending) > 2:
            raise MemoryError("only together")
        return real(cluster, *args, **kwargs)
    monkeypatch.setattr(engine.planning.plan, "compile_cluster", compile_cluster)
    plan = _plan([node("n1"), *(pod(f"p{i}") for i in range(4))])
    assert not plan.assignments and len(plan.unschedulable) == 4
    assert all("MemoryError: only together" in r[0] for r in plan.unschedulable.values())


def test_pods_sharing_a_claim_are_refused_together_when_one_makes_planning_raise(monkeypatch) -> None:
    """Two pods share one unallocated ResourceClaim: the first allocates it, the second follows onto its node. They are
    one unit of the bisection, so when the follower makes planning raise both are refused, rather than the claim
    allocated for the first alone while its other user is left out."""
    _poisoned(monkeypatch, "follower")
    docs = [node("n0", cpu="8"), resource_slice("n0", [gpu("g0")]), device_class(), resource_claim("shared"),
            pod("leader", resourceClaims=claims("shared")), pod("follower", resourceClaims=claims("shared")),
            *(pod(f"web-{i}") for i in range(6))]
    plan = _plan(docs)
    assert set(plan.assignments) == {f"default/web-{i}" for i in range(6)}
    assert [sorted(f.pods) for f in plan.details.failures] == [["default/follower", "default/leader"]]
    assert set(plan.unschedulable) == {"default/follower", "default/leader"}


def test_culprits_bisects_units_and_keeps_what_succeeds() -> None:
    tried: list[list[int]] = []

    def attempt(items: list[int]) -> None:
        tried.append(items)
        if 13 in items:
            raise ValueError("13")
    units = [[i] for i in range(32)]
    found = culprits(units, attempt, ValueError("all"))
    assert [(u, str(e)) for u, e in found] == [([13], "13")]
    ok = sorted(i for t in tried if 13 not in t for i in t)
    assert ok == [i for i in range(32) if i != 13]  # every other unit attempted (and kept) exactly once
    assert len(tried) == 2 * 5


def test_the_loop_narrows_a_cycle_failing_after_the_plan_to_its_culprit(monkeypatch) -> None:
    api = FakeAPI()
    api.put("Node", node("n1", cpu="4"))
    for name in ("a", "b", "bad", "c"):
        api.put("Pod", pod(name))
    s, loop = synced_loop(api)
    real = CycleResult.volume_steps

    def volume_steps(self, chosen=None):
        if "default/bad" in self.plan.assignments:
            raise KeyError("a PV that vanished")
        return real(self, chosen)
    monkeypatch.setattr(CycleResult, "volume_steps", volume_steps)
    loop.cycle_isolated(["default/a", "default/b", "default/bad", "default/c"])
    loop.flush_binds()
    s.events.close()
    assert sorted(k for k, _ in api.binds) == ["default/a", "default/b", "default/c"]
    assert not s.store.is_assumed("default/bad")
    assert api.condition_reasons["default/bad"] == "SchedulerError"
    assert "KeyError: 'a PV that vanished'" in api.conditions["default/bad"]


def test_bind_failures_are_one_counted_series_with_a_scheduler_error_condition() -> None:
    api = FakeAPI(fail_binds={"default/a": 500})
    api.put("Node", node("n1"))
    api.put("Pod", pod("a"))
    s, loop = synced_loop(api)
    for _ in range(4):
        loop.cycle(["default/a"]).result()
    s.events.close()
    assert api.condition_reasons["default/a"] == "SchedulerError"
    assert "binding to n1 failed (500)" in api.conditions["default/a"]
    failed = [e for e in api.events if e[2] == "FailedScheduling"]
    assert len(failed) == 1, failed  # one Event object, counted (client-go's recorder), not one per attempt


def test_the_dry_run_and_explain_print_the_plan_without_the_culprit_and_no_traceback(monkeypatch, tmp_path) -> None:
    import json

    import yaml
    from click.testing import CliRunner

    from engine.cli import main
    _poisoned(monkeypatch, "bad")
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List",
                                    "items": [node("n1"), pod("good"), pod("bad")]}))
    out = CliRunner().invoke(main, ["dry-run", "--cluster", str(path), "-o", "json", "-q"])
    assert out.exit_code == 0, out.output
    plan = json.loads(out.stdout)
    assert plan["assignments"] == {"default/good": "n1"}
    assert "ZeroDivisionError: poisoned by ['bad']" in plan["unschedulable"]["default/bad"][0]
    assert "internal error: planning default/bad failed" in out.stderr and "Traceback" not in out.output
    explained = CliRunner().invoke(main, ["explain", "--cluster", str(path), "default/bad", "-o", "json"])
    assert explained.exit_code == 0, explained.output
    assert "poisoned" in json.loads(explained.stdout)["unschedulable"][0]


def test_the_loop_tells_an_object_it_cannot_read_once_with_an_event_on_it() -> None:
    api = FakeAPI()
    api.put("Node", node("n1"))
    api.put("PriorityClass", {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                              "metadata": {"name": "high"}, "value": "very"})
    api.put("Pod", pod("a"))
    api.put("Pod", pod("b"))
    s, loop = synced_loop(api)
    loop.cycle(["default/a"]).result()
    loop.cycle(["default/b"]).result()
    s.events.close()
    told = [e for e in api.events if e[2] == "SchedulerCannotRead"]
    assert len(told) == 1 and told[0][0] == "PriorityClass/None/high", told
    assert sorted(k for k, _ in api.binds) == ["default/a", "default/b"]  # nobody else waits for it


# --- errors the engine foresees: a claim's CEL refuses only the claim's pods ------------------------------------

D = 'device.attributes["gpu.example.com"]'
ADMITTED = [  # CEL forms the apiserver admits, each true for an a100 of 40Gi (upstream's answer)
    f"{D}.?model.orValue('') == 'a100'", f"{D}.model.lowerAscii() == 'a100'", f"{D}.model.split('1')[0] == 'a'",
    f"{D}.model.upperAscii() == 'A100'", f"{D}.model.replace('a', 'b') == 'b100'", f"{D}.model.indexOf('1') == 1",
    f"{D}.?model.hasValue()", f"{D}.model.matches('^a[0-9]+$')", f"{D}.model.charAt(0) == 'a'",
    'device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) == 0',
    'device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("10Gi"))',
    f"{D}.model.substring(1) == '100' && {D}.model.trim() == 'a100'",
]


def _claiming(name: str, expression: str) -> list[dict]:
    return [resource_claim(f"c-{name}", device_request(selectors=(expression,)), ns="cel"),
            pod(name, ns="cel", resourceClaims=claims(f"c-{name}"))]


def _gpu_cluster(gpus: int = 16) -> list[dict]:
    return [node("n0", cpu="32"), node("n1", cpu="32"), device_class("gpu"),
            resource_slice("n0", [gpu(f"g{i}") for i in range(gpus)])]


def test_a_claim_whose_selector_fails_at_run_time_refuses_only_its_pod_in_upstreams_words() -> None:
    docs = _gpu_cluster() + [d for i, e in enumerate(ADMITTED) for d in _claiming(f"ok-{i}", e)]
    docs += _claiming("runtime-error", f"{D}.nosuchattr == 'x'") + [pod(f"cpu-{i}") for i in range(10)]
    plan = _plan(docs)
    assert len(plan.assignments) == 22 and list(plan.unschedulable) == ["cel/runtime-error"], plan.unschedulable
    assert plan.unschedulable["cel/runtime-error"] == [
        "claim cel/c-runtime-error: selector #0: CEL runtime error: no such key: nosuchattr"]
    assert plan.details.errors == {"cel/runtime-error"} and not plan.details.failures


def test_a_device_class_whose_selector_does_not_compile_refuses_the_pods_of_its_claims() -> None:
    docs = _gpu_cluster() + [device_class("broken", GPU_DRIVER, "device.driver ==")]
    docs += [resource_claim("c-broken", device_request("gpu", "broken"), ns="cel"),
             pod("uses-broken", ns="cel", resourceClaims=claims("c-broken"))]
    docs += _claiming("fine", ADMITTED[0])
    plan = _plan(docs)
    assert plan.assignments.get("cel/fine") == "n0"
    assert plan.unschedulable["cel/uses-broken"][0].startswith(
        "class broken: selector #1: CEL compile error: compilation failed: ERROR: <input>:1:17: Syntax error")


def test_the_loop_binds_everyone_else_and_tells_the_claims_pod_scheduler_error() -> None:
    api = FakeAPI()
    for obj in _gpu_cluster() + _claiming("ok", ADMITTED[0]) + _claiming("bad", f"{D}.nosuchattr == 'x'"):
        api.put(obj["kind"], obj)
    for i in range(3):
        api.put("Pod", pod(f"cpu-{i}"))
    s, loop = synced_loop(api)
    loop.cycle_isolated(["cel/ok", "cel/bad", *(f"default/cpu-{i}" for i in range(3))])
    loop.flush_binds()
    s.events.close()
    assert sorted(k for k, _ in api.binds) == ["cel/ok", "default/cpu-0", "default/cpu-1", "default/cpu-2"]
    assert api.condition_reasons["cel/bad"] == "SchedulerError"
    # the condition's message opens with the reason code (the claim the pod needs cannot be evaluated)
    assert api.conditions["cel/bad"] == \
        "[InvalidObject] claim cel/c-bad: selector #0: CEL runtime error: no such key: nosuchattr"


def _explaining_raises_for(monkeypatch, name: str) -> None:
    """Explaining a class left out that holds the pod `name` raises (after the placements were handed on)."""
    real = engine.planning.plan.explain_unplaced

    def explain_unplaced(compiled, solution, c, state=None, alike=None):
        if any(p.name == name for p in compiled.classes[c].pods):
            raise ZeroDivisionError(f"explaining {name}")
        return real(compiled, solution, c, state, alike)
    monkeypatch.setattr(engine.planning.plan, "explain_unplaced", explain_unplaced)


def test_placements_handed_on_before_planning_raised_stay_placed_and_hold_their_room(monkeypatch) -> None:
    # a and b (priority 100) fill the node and are handed on; explaining `bad` then raises. The retry must plan
    # around a and b as bound: c (1 cpu) would fit on the node if their room were forgotten.
    docs = [node("n1", cpu="4"), pod("a", cpu="2", priority=100), pod("b", cpu="2", priority=100),
            pod("c", cpu="1", priority=0), pod("bad", cpu="3", priority=0)]
    _explaining_raises_for(monkeypatch, "bad")
    handed: list[dict[str, str]] = []
    plan = plan_batch(build_cluster([("t", d) for d in docs]), options=Options(time_limit=5.0, preemption=False),
                      on_placed=lambda early: handed.append(dict(early.assignments)))
    assert handed == [{"default/a": "n1", "default/b": "n1"}]  # once, before the failure; probes hand nothing on
    assert plan.assignments == {"default/a": "n1", "default/b": "n1"}
    assert "default/c" in plan.unschedulable and "default/c" not in plan.details.errors
    assert plan.details.errors == {"default/bad"}
    assert "ZeroDivisionError: explaining bad" in plan.unschedulable["default/bad"][0]


def test_an_error_in_the_hand_over_is_the_callers_not_a_planning_failure() -> None:
    docs = [node("n1", cpu="4"), pod("a", cpu="1")]

    def on_placed(_early) -> None:
        raise KeyError("the caller's bug")
    try:
        plan_batch(build_cluster([("t", d) for d in docs]), options=Options(time_limit=5.0), on_placed=on_placed)
    except KeyError as exc:
        assert "the caller's bug" in str(exc)
    else:
        raise AssertionError("the hand-over's error was swallowed by the planning net")


def test_the_loop_binds_a_cycles_placements_before_it_explains_the_pods_left_out(monkeypatch) -> None:
    api = FakeAPI()
    api.put("Node", node("n1", cpu="2"))
    for name in ("a", "b", "c"):
        api.put("Pod", pod(name, cpu="1"))
    s, loop = synced_loop(api)
    handed: list[list[str]] = []
    real_bind_early = loop.bind_stage.bind_early

    def bind_early(placements):
        handed.append(sorted(p.key for p in placements))
        return real_bind_early(placements)
    monkeypatch.setattr(loop.bind_stage, "bind_early", bind_early)
    seen_at_explain: list[list[list[str]]] = []
    real_explain = engine.planning.plan.explain_unplaced

    def explain_unplaced(compiled, solution, c, state=None, alike=None):
        seen_at_explain.append(list(handed))
        return real_explain(compiled, solution, c, state, alike)
    monkeypatch.setattr(engine.planning.plan, "explain_unplaced", explain_unplaced)
    loop.cycle(["default/a", "default/b", "default/c"])
    loop.flush_binds()
    s.events.close()
    assert handed == [["default/a", "default/b"]]
    assert seen_at_explain == [[["default/a", "default/b"]]]  # the binds were under way before the explanation
    assert sorted(k for k, _ in api.binds) == ["default/a", "default/b"]
    assert "default/c" in api.condition_reasons
