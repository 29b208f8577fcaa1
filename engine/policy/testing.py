"""Policy test cases (like `opa test`): a small cluster, the policies, and the expected plan.

A test file is YAML named `*_test.yaml`:

    cases:
      - name: training jobs go to GPU nodes
        policies: [gpu-pools.policy]        # paths relative to the test file
        cluster: [ ...Kubernetes manifests... ]   # or cluster_file: cluster.yaml
        now: 2026-11-25T12:00:00Z           # optional: the plan's now, as `dry-run --now`
        expect:
          placed: {ml/train-0: gpu-1, ml/train-1: [gpu-1, gpu-2]}   # a node, or any of several
          unschedulable: {default/web: "untolerated taint"}        # a substring of one reason
          skipped: {default/gated: "scheduling gate"}              # not pending at all; a substring of the reason
          placed_count: 3                                          # optional
          evicted: {default/batch-1: {for: ml/train-0, violates: default/batch-pdb}}   # every victim
          reserved: {ml/big-0: {node: gpu-1, start: 2026-11-25T12:30:00Z}}         # every reserved pod
          estimated: {ml/small-0: 2026-11-25T12:40:00Z}
          tenants: {policy/team-a: {used: {cpu: "6"}, borrowed: {cpu: "2"}, share: 0.75}}
          reason_codes: {default/web: Policy}                      # the dominant code

Each case is solved like a dry run, through the same planner (preemption and time included, at the case's `now:`
or else the snapshot's newest pod time; one worker, fixed seed, so results are reproducible). The expectations
beyond placements are engine.policy.expectations'. A case needs at least one expectation, and an unknown key
(`expcet:`) or a malformed expectation is an error naming its line, so a typo cannot make a case pass by checking
nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..model.ir import Rules
from ..planning.plan import Plan
from ..planning.planner import Options, TimeInputs, plan_batch
from ..quotas import tenant_report
from ..reading.load import InputError, build_cluster
from ..reading.manifests import read_documents
from ..time import timeline
from . import expectations
from .expectations import CaseOutcome, Malformed, parse_time, unknown_key
from .lower import lower
from .sources import load_policies

SUFFIX = "_test.yaml"
CASE_KEYS = ("name", "policies", "cluster", "cluster_file", "scheduler_name", "now", "expect")
EXPECT_KEYS = ("placed", "unschedulable", "skipped", "placed_count", *expectations.KEYS)


class TestFileError(Exception):
    """A malformed test file (not a failing test)."""


@dataclass(slots=True)
class CaseResult:
    file: str
    name: str
    failures: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures


def find_test_files(paths: list[str]) -> list[Path]:
    out: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            out.extend(sorted(p for p in path.rglob(f"*{SUFFIX}") if p.is_file()))
        elif path.is_file():
            out.append(path)
        else:
            raise TestFileError(f"{raw}: no such file or directory")
    if not out:
        raise TestFileError(f"no {SUFFIX} files under {', '.join(paths)}")
    return out


def run_file(path: Path, time_limit: float = 10.0) -> list[CaseResult]:
    try:
        text = path.read_text(encoding="utf-8-sig")
        spec = yaml.safe_load(text)
        lines = _case_lines(text)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise TestFileError(f"{path}: cannot read test file: {exc}") from None
    except RecursionError:
        raise TestFileError(f"{path}: cannot read test file: nested too deeply") from None
    cases = spec.get("cases") if isinstance(spec, dict) else None
    if not isinstance(cases, list) or not cases:
        raise TestFileError(f"{path}: expected a mapping with a non-empty 'cases' list")
    for i, case in enumerate(cases):
        _validate_case(path, i, case, lines[i] if i < len(lines) else _CaseLines(1))
    return [run_case(path, i, case, time_limit) for i, case in enumerate(cases)]


@dataclass(slots=True)
class _CaseLines:
    """Where a case and its keys start in the test file (1-based), for messages."""

    start: int
    keys: dict[str, int] = field(default_factory=dict)
    expect: dict[str, int] = field(default_factory=dict)
    entries: dict[tuple[str, str], int] = field(default_factory=dict)  # (expect key, pod or tenant) -> line


def _case_lines(text: str) -> list[_CaseLines]:
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    cases = next((v for k, v in root.value if k.value == "cases"), None) if isinstance(root, yaml.MappingNode) else None
    if not isinstance(cases, yaml.SequenceNode):
        return []
    out = []
    for item in cases.value:
        lines = _CaseLines(item.start_mark.line + 1)
        for key, value in item.value if isinstance(item, yaml.MappingNode) else ():
            lines.keys[str(key.value)] = key.start_mark.line + 1
            if key.value == "expect" and isinstance(value, yaml.MappingNode):
                lines.expect = {str(k.value): k.start_mark.line + 1 for k, _ in value.value}
                lines.entries = {(str(k.value), str(e.value)): e.start_mark.line + 1 for k, v in value.value
                                 if isinstance(v, yaml.MappingNode) for e, _ in v.value}
        out.append(lines)
    return out


def _validate_case(path: Path, index: int, case: Any, lines: _CaseLines) -> None:
    """Reject what would otherwise make a case check less than its author meant."""
    if not isinstance(case, dict):
        raise TestFileError(f"{path}:{lines.start}: case {index + 1} is not a mapping")
    name = str(case.get("name") or f"case {index + 1}")
    for key in case:
        if key not in CASE_KEYS:
            where = f"{path}:{lines.keys.get(str(key), lines.start)}"
            raise TestFileError(f"{where}: case {name!r}: {unknown_key(str(key), CASE_KEYS)}")
    _validate_expect(path, name, case.get("expect"), lines)
    policies = case.get("policies")
    if policies is not None and not (isinstance(policies, list) and all(isinstance(p, str) for p in policies)):
        raise TestFileError(f"{path}:{lines.keys.get('policies', lines.start)}: case {name!r}: policies must be a list of paths")
    if "now" in case:
        try:
            parse_time(case["now"], "now")
        except Malformed as exc:
            raise TestFileError(f"{path}:{lines.keys.get('now', lines.start)}: case {name!r}: {exc}") from None


def _validate_expect(path: Path, name: str, expect: Any, lines: _CaseLines) -> None:
    where = f"{path}:{lines.keys.get('expect', lines.start)}: case {name!r}"
    if not expect:
        raise TestFileError(f"{where}: no expectation (give expect: with {', '.join(EXPECT_KEYS)})")
    if not isinstance(expect, dict):
        raise TestFileError(f"{where}: expect must be a mapping")
    for key, value in expect.items():
        at = f"{path}:{lines.expect.get(str(key), lines.start)}: case {name!r}: expect"
        if key not in EXPECT_KEYS:
            raise TestFileError(f"{at}: {unknown_key(str(key), EXPECT_KEYS)}")
        if key in expectations.KEYS:
            try:
                expectations.check(key, value)
            except Malformed as exc:
                line = lines.entries.get((key, exc.item or ""), lines.expect.get(key, lines.start))
                raise TestFileError(f"{path}:{line}: case {name!r}: {exc}") from None
        elif key == "placed_count" and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise TestFileError(f"{at}.placed_count must be a whole number, got {value!r}")
        elif key != "placed_count" and not isinstance(value, dict):
            raise TestFileError(f"{at}.{key} must be a mapping of namespace/pod to what is expected")
        elif key == "placed" and not all(isinstance(v, str) or (isinstance(v, list) and v and all(isinstance(n, str) for n in v))
                                         for v in value.values()):
            raise TestFileError(f"{at}.placed: each pod maps to a node name or a list of node names")


def _docs(path: Path, case: dict[str, Any], name: str) -> list[tuple[str, dict[str, Any]]]:
    if "cluster_file" in case:
        target = path.parent / str(case["cluster_file"])
        return [(str(target), d) for d in read_documents(str(target))]
    items = case.get("cluster")
    if not isinstance(items, list):
        raise TestFileError(f"{path}: case {name!r}: 'cluster' must be a list of manifests (or use cluster_file)")
    for i, d in enumerate(items):
        if not isinstance(d, dict):
            raise TestFileError(f"{path}: case {name!r}: cluster[{i}] is not a Kubernetes object (a mapping)")
    return [(f"{path}[{name}]", d) for d in items]


def run_case(path: Path, index: int, case: Any, time_limit: float) -> CaseResult:
    if not isinstance(case, dict):
        raise TestFileError(f"{path}: case {index + 1} is not a mapping")
    name = str(case.get("name") or f"case {index + 1}")
    policy_paths = [str(path.parent / p) for p in case.get("policies") or []]
    try:
        rules = lower(load_policies(policy_paths)) if policy_paths else Rules()
        cluster = build_cluster(_docs(path, case, name), str(case.get("scheduler_name") or "policy-scheduler"),
                                rules.gangs)
    except InputError as exc:
        raise TestFileError(f"{path}: case {name!r}: {exc}") from None
    # the plan's now as the dry-run's: the case's `now:` (its --now), else the snapshot's newest pod time
    chosen = timeline.choose_now(cluster, parse_time(case["now"], "now") if "now" in case else None)
    plan = plan_batch(cluster, rules, Options(time_limit=time_limit, workers=1, seed=0),
                      time_inputs=TimeInputs(None if chosen is None else chosen.at))
    expect = case.get("expect") or {}
    tenants = {t.name: t for t in tenant_report.of_plan(plan, cluster)} if "tenants" in expect else {}
    return CaseResult(str(path), name, _compare(expect, plan) + expectations.compare(expect, CaseOutcome(plan, tenants, chosen)))


def _compare(expect: dict[str, Any], plan: Plan) -> list[str]:
    failures = []
    for pod, want in (expect.get("placed") or {}).items():
        allowed = [want] if isinstance(want, str) else list(want)
        got = plan.assignments.get(pod)
        if got is None:
            why = "; ".join(plan.unschedulable.get(pod, [f"skipped: {plan.skipped[pod]}" if pod in plan.skipped
                                                         else "not a pending pod of this scheduler"]))
            failures.append(f"{pod}: expected on {' or '.join(allowed)}, but it was not placed: {why}")
        elif got not in allowed:
            failures.append(f"{pod}: expected on {' or '.join(allowed)}, placed on {got}")
    for pod, want in (expect.get("skipped") or {}).items():
        if pod not in plan.skipped:
            failures.append(f"{pod}: expected skipped (not pending), but it was not")
        elif want and str(want) not in plan.skipped[pod]:
            failures.append(f"{pod}: expected a skip reason containing {want!r}, got: {plan.skipped[pod]}")
    for pod, want in (expect.get("unschedulable") or {}).items():
        if pod in plan.assignments:
            failures.append(f"{pod}: expected unschedulable, placed on {plan.assignments[pod]}")
        elif pod not in plan.unschedulable:
            failures.append(f"{pod}: skipped: {plan.skipped[pod]}" if pod in plan.skipped
                            else f"{pod}: not a pending pod of this scheduler")
        elif want and not any(str(want) in r for r in plan.unschedulable[pod]):
            failures.append(f"{pod}: expected a reason containing {want!r}, got: {'; '.join(plan.unschedulable[pod])}")
    if "placed_count" in expect and len(plan.assignments) != int(expect["placed_count"]):
        failures.append(f"expected {expect['placed_count']} pods placed, got {len(plan.assignments)}")
    return failures
