"""Policy test cases that assert the whole plan (issue 51): evictions and the budgets they break, reservations and
estimated starts at a case's `now:`, tenant figures and reason codes. Each kind has a case that passes and one
that fails, so an expectation the runner ignored would show; a malformed expectation is a file:line error (exit 2)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from engine.cli import main
from engine.policy import testing
from engine.policy.testing import run_file
from testkit.manifests import budget, node, pod

NOON = "2026-11-25T12:00:00Z"
TEAMS = '''policy team-a {
  applies to pods where namespace == "team-a"
  quota min "cpu" 4
  quota max "cpu" 6
}
policy team-b {
  applies to pods where namespace == "team-b"
  quota min "cpu" 4
}
'''


def write_cases(tmp_path: Path, *cases: dict[str, Any]) -> Path:
    (tmp_path / "teams.policy").write_text(TEAMS)
    path = tmp_path / "plan_test.yaml"
    path.write_text(yaml.safe_dump({"cases": list(cases)}, sort_keys=False))
    return path


def failures(tmp_path: Path, case: dict[str, Any]) -> list[str]:
    [result] = run_file(write_cases(tmp_path, {"name": "case", **case}), time_limit=2)
    return result.failures


# --- the clusters -----------------------------------------------------------------------------------------------

def preemption(allowed: int) -> list[dict]:
    """n1 full with a low-priority web pod whose budget allows `allowed` disruptions; a high-priority pod waits."""
    return [node("n1", cpu="2"), pod("low", cpu="2", node_name="n1", priority=0, labels={"app": "web"}),
            budget("web", {"app": "web"}, min_available=1, allowed=allowed), pod("high", cpu="1", priority=100)]


def timed(name: str, created: str, cpu: str = "4", deadline: int = 600, **extra: Any) -> dict:
    doc = pod(name, cpu=cpu, **extra)
    doc["metadata"]["creationTimestamp"] = created
    doc["spec"]["activeDeadlineSeconds"] = deadline
    return doc


def queue() -> list[dict]:
    """At noon n1 runs a pod until 12:30; three 10-minute pods wait in line (a, b, c) and one too big ever to fit."""
    running = timed("run", "2026-11-25T11:00:00Z", deadline=5400, node_name="n1")
    running["status"]["startTime"] = "2026-11-25T11:00:00Z"
    return [node("n1", cpu="4"), running, timed("a", "2026-11-25T11:00:00Z"), timed("b", "2026-11-25T11:10:00Z"),
            timed("c", "2026-11-25T11:20:00Z"), timed("huge", "2026-11-25T11:30:00Z", cpu="8")]


def tenants() -> list[dict]:
    """8 cores; team-a (min 4, max 6) asks for 8 in 2-core pods, team-b (min 4) for 2."""
    return [node("n1", cpu="8"), *(pod(f"a-{i}", cpu="2", ns="team-a") for i in range(4)),
            pod("b-0", cpu="2", ns="team-b")]


# --- evictions ----------------------------------------------------------------------------------------------------

def test_evictions_pass_with_the_victim_its_preemptor_and_the_budget_broken(tmp_path: Path) -> None:
    assert failures(tmp_path, {"cluster": preemption(allowed=0), "expect": {
        "placed": {"default/high": "n1"},
        "evicted": {"default/low": {"for": "default/high", "violates": "default/web"}}}}) == []
    assert failures(tmp_path, {"cluster": preemption(allowed=1), "expect": {
        "evicted": {"default/low": {"for": "default/high", "violates": []}}}}) == []
    assert failures(tmp_path, {"cluster": preemption(allowed=1), "expect": {"evicted": {"default/low": None}}}) == []


def test_evictions_fail_on_another_preemptor_another_budget_or_a_victim_not_listed(tmp_path: Path) -> None:
    assert failures(tmp_path, {"cluster": preemption(allowed=0), "expect": {"evicted": {"default/low": "default/x"}}}) == [
        "default/low: expected evicted for default/x, evicted for default/high"]
    assert failures(tmp_path, {"cluster": preemption(allowed=0), "expect": {
        "evicted": {"default/low": {"violates": []}}}}) == [
        "default/low: expected its eviction to violate no PodDisruptionBudget, violates PodDisruptionBudget default/web"]
    assert failures(tmp_path, {"cluster": preemption(allowed=1), "expect": {
        "evicted": {"default/low": {"violates": "default/web"}}}}) == [
        "default/low: expected its eviction to violate PodDisruptionBudget default/web, within PodDisruptionBudget "
        "default/web"]
    # the set of victims is exact: an eviction not listed fails, and so does one listed that the plan does not make
    assert failures(tmp_path, {"cluster": preemption(allowed=0), "expect": {"evicted": {}}}) == [
        "default/low: evicted for default/high on n1, not expected"]
    assert failures(tmp_path, {"cluster": [node("n1", cpu="4"), *preemption(0)[1:]], "expect": {
        "evicted": {"default/low": "default/high"}}}) == [
        "default/low: expected evicted for default/high, but the plan does not evict it"]


# --- reservations and estimates -----------------------------------------------------------------------------------

def test_reservations_and_estimates_pass_at_the_cases_now(tmp_path: Path) -> None:
    assert failures(tmp_path, {"now": NOON, "cluster": queue(), "expect": {
        "reserved": {"default/a": {"node": "n1", "start": "2026-11-25T12:30:00Z"}, "default/b": "n1"},
        "estimated": {"default/c": "2026-11-25T12:50:00Z", "default/huge": "unknown"}}}) == []


def test_reservations_and_estimates_fail_on_another_node_time_or_pod(tmp_path: Path) -> None:
    got = failures(tmp_path, {"now": NOON, "cluster": queue(), "expect": {
        "reserved": {"default/a": {"node": "n2"}, "default/c": {"start": "2026-11-25T12:50:00Z"}},
        "estimated": {"default/c": "2026-11-25T12:55:00Z", "default/b": "unknown"}}})
    assert got == [
        "default/a: expected reserved on n2, reserved on n1 from 2026-11-25T12:30:00Z",
        "default/c: expected reserved from 2026-11-25T12:50:00Z, but it has no reservation: estimated to start by "
        "2026-11-25T12:50:00Z",
        "default/b: reserved on n1 from 2026-11-25T12:40:00Z, not expected",  # the reserved pods are an exact set
        "default/c: expected to start by 2026-11-25T12:55:00Z, estimated to start by 2026-11-25T12:50:00Z",
        "default/b: expected unknown (no estimate), reserved on n1 from 2026-11-25T12:40:00Z"]


def test_the_cases_now_is_the_plans_now(tmp_path: Path) -> None:
    """At 12:45 the running pod is past its bound: nothing is reserved, a is expected at once; noon's plan fails."""
    later = {"now": "2026-11-25T12:45:00+00:00", "cluster": queue()}
    assert failures(tmp_path, {**later, "expect": {"reserved": {}, "estimated": {"default/a": "2026-11-25T12:45:00Z"}}}) == []
    assert failures(tmp_path, {**later, "expect": {"reserved": {"default/a": "n1"}}}) == [
        "default/a: expected reserved on n1, but it has no reservation: estimated to start by 2026-11-25T12:45:00Z"]


def test_a_case_without_a_now_plans_at_the_snapshots_time_as_the_dry_run(tmp_path: Path) -> None:
    """The newest pod time (11:30) is the now: the pod running until 12:30 still holds n1, so a is reserved; a
    snapshot without pod times has no time in the plan, and the failure says so."""
    assert failures(tmp_path, {"cluster": queue(), "expect": {"reserved": {"default/a": "n1", "default/b": "n1"}}}) == []
    bare = [node("n1", cpu="4"), pod("run", cpu="4", node_name="n1"), pod("a", cpu="4")]
    [line] = failures(tmp_path, {"cluster": bare, "expect": {"reserved": {"default/a": "n1"}}})
    assert line.startswith("default/a: expected reserved on n1, but it has no reservation: unschedulable: ")
    assert line.endswith("(no time in the plan: give the case a now:)")


# --- tenants ------------------------------------------------------------------------------------------------------

def test_tenant_figures_pass_in_kubernetes_quantities(tmp_path: Path) -> None:
    assert failures(tmp_path, {"policies": ["teams.policy"], "cluster": tenants(), "expect": {"tenants": {
        "policy/team-a": {"before": {"cpu": 0}, "used": {"cpu": "6"}, "borrowed": {"cpu": "2000m"}, "share": 0.75,
                          "placed": 3, "unschedulable": 1},
        "policy/team-b": {"used": {"cpu": 2}, "borrowed": {"cpu": 0}, "placed": ["team-b/b-0"], "unschedulable": []}}}}) == []


def test_tenant_figures_fail_on_each_figure_and_an_unknown_quota(tmp_path: Path) -> None:
    got = failures(tmp_path, {"policies": ["teams.policy"], "cluster": tenants(), "expect": {"tenants": {
        "policy/team-a": {"used": {"cpu": "8", "memory": "1Gi"}, "borrowed": {"cpu": 0}, "share": 0.5, "placed": 4,
                          "unschedulable": []},
        "policy/team-c": {"share": 0.1}}}})
    left = re.fullmatch(r"tenant policy/team-a: expected unschedulable none, got (team-a/a-\d)", got[5])
    assert left, got
    placed = sorted({f"team-a/a-{i}" for i in range(4)} - {left[1]})
    assert got[:5] + got[6:] == [
        "tenant policy/team-a: expected cpu used 8, got 6",
        "tenant policy/team-a: expected memory used 1Gi, but the quota names no memory (it names cpu)",
        "tenant policy/team-a: expected cpu borrowed 0, got 2",
        "tenant policy/team-a: expected share 0.5, got 0.75",
        f"tenant policy/team-a: expected 4 pod(s) placed, got 3: {', '.join(placed)}",
        "tenant policy/team-c: no such quota (the plan's: policy/team-a, policy/team-b)"]


# --- reason codes -------------------------------------------------------------------------------------------------

def test_reason_codes_pass_with_each_waiting_pods_dominant_code(tmp_path: Path) -> None:
    waiting = [node("n1", cpu="2", labels={"pool": "web"}), pod("big", cpu="4"), pod("picky", nodeSelector={"pool": "db"})]
    assert failures(tmp_path, {"cluster": waiting, "expect": {
        "reason_codes": {"default/big": "Capacity", "default/picky": "Policy"}}}) == []
    assert failures(tmp_path, {"cluster": preemption(allowed=1), "expect": {
        "reason_codes": {"default/high": "PreemptionPending"}}}) == []


def test_reason_codes_fail_on_another_code_or_a_pod_that_does_not_wait(tmp_path: Path) -> None:
    assert failures(tmp_path, {"policies": ["teams.policy"], "cluster": tenants(), "expect": {
        "reason_codes": {"team-b/b-0": "Quota"}}}) == [
        "team-b/b-0: expected reason code Quota, but it does not wait: placed on n1"]
    waiting = [node("n1", cpu="2", labels={"pool": "web"}), pod("big", cpu="4")]
    assert failures(tmp_path, {"cluster": waiting, "expect": {"reason_codes": {"default/big": "Quota"}}}) == [
        "default/big: expected reason code Quota, got Capacity"]


# --- malformed expectations: exit 2, the file, the line and the case, never a traceback ---------------------------

MALFORMED = {
    "a now that is not a time": ({"now": "noon"}, "now must be an RFC 3339 time such as 2026-11-25T12:00:00Z, got 'noon'"),
    "a now without a time of day": ({"now": "2026-11-25"}, "got '2026-11-25'"),
    "evicted not a mapping": ({"expect": {"evicted": ["default/low"]}}, "expect.evicted must be a mapping"),
    "evicted by a pod name alone": ({"expect": {"evicted": {"low": "default/high"}}}, "'low' is not a pod key"),
    "a misspelt eviction key": ({"expect": {"evicted": {"default/low": {"violate": "default/web"}}}},
                                "expect.evicted.default/low: unknown key 'violate' (did you mean 'violates'?)"),
    "a reservation start not a time": ({"expect": {"reserved": {"default/a": {"start": "soon"}}}},
                                       "expect.reserved.default/a.start must be an RFC 3339 time"),
    "an estimate neither a time nor unknown": ({"expect": {"estimated": {"default/a": 5}}}, "or 'unknown', got 5"),
    "a tenant's bad quantity": ({"expect": {"tenants": {"policy/team-a": {"used": {"cpu": "lots"}}}}},
                                "expect.tenants.policy/team-a.used.cpu: invalid quantity"),
    "a tenant's share as text": ({"expect": {"tenants": {"policy/team-a": {"share": "half"}}}},
                                 "share must be a number"),
    "a misspelt tenant figure": ({"expect": {"tenants": {"policy/team-a": {"borowed": {"cpu": 1}}}}},
                                 "unknown key 'borowed' (did you mean 'borrowed'?)"),
    "a misspelt reason code": ({"expect": {"reason_codes": {"default/a": "Capcity"}}},
                               "unknown reason code 'Capcity' (did you mean 'Capacity'?)"),
    "a misspelt expectation": ({"expect": {"reason_code": {"default/a": "Capacity"}}},
                               "unknown key 'reason_code' (did you mean 'reason_codes'?)"),
}


@pytest.mark.parametrize("change,fragment", MALFORMED.values(), ids=list(MALFORMED))
def test_a_malformed_expectation_is_an_error_at_its_line(tmp_path: Path, change: dict, fragment: str) -> None:
    case = {"name": "bad one", "cluster": [node("n1")], "expect": {"placed_count": 0}} | change
    path = write_cases(tmp_path, case)
    out = CliRunner().invoke(main, ["test", str(path)])
    assert out.exit_code == 2 and "Traceback" not in out.output, out.output
    [line] = out.stderr.strip().splitlines()
    assert fragment in line and "case 'bad one'" in line, line
    number = int(line.split(f"{path}:")[1].split(":")[0])
    named = change if "now" in change else change["expect"]
    key, value = next(iter(named.items()))
    words = {key, *(value if isinstance(value, dict) else ())}  # the line of the key, or of its entry
    assert any(w in path.read_text().splitlines()[number - 1] for w in words), (number, line)
    with pytest.raises(testing.TestFileError):
        run_file(path)


def test_the_test_command_exits_0_when_all_pass_1_when_one_fails(tmp_path: Path) -> None:
    good = {"name": "the important pod evicts", "cluster": preemption(allowed=0),
            "expect": {"evicted": {"default/low": {"for": "default/high", "violates": "default/web"}}}}
    out = CliRunner().invoke(main, ["test", "--time-limit", "2", str(write_cases(tmp_path, good))])
    assert out.exit_code == 0 and "1 passed, 0 failed" in out.stdout, out.output
    bad = {**good, "name": "within its budget", "expect": {"evicted": {"default/low": {"violates": []}}}}
    out = CliRunner().invoke(main, ["test", "--time-limit", "2", str(write_cases(tmp_path, good, bad))])
    assert out.exit_code == 1, out.output
    assert "FAIL" in out.stdout and "within its budget" in out.stdout and "1 passed, 1 failed" in out.stdout
    assert "default/low: expected its eviction to violate no PodDisruptionBudget" in out.stdout
