"""Policy test cases (like `opa test`): a small cluster, the policies, and the expected plan.

A test file is YAML named `*_test.yaml`:

    cases:
      - name: training jobs go to GPU nodes
        policies: [gpu-pools.policy]        # paths relative to the test file
        cluster: [ ...Kubernetes manifests... ]   # or cluster_file: cluster.yaml
        expect:
          placed: {ml/train-0: gpu-1, ml/train-1: [gpu-1, gpu-2]}   # a node, or any of several
          unschedulable: {default/web: "untolerated taint"}        # a substring of one reason
          placed_count: 3                                          # optional

Each case is solved like a dry run (one worker, fixed seed, so results are reproducible).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..load import InputError, build_cluster, read_documents
from ..plan import make_plan
from .lower import policy_rules
from .sources import load_policies

SUFFIX = "_test.yaml"


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
        spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise TestFileError(f"{path}: cannot read test file: {exc}") from None
    cases = spec.get("cases") if isinstance(spec, dict) else None
    if not isinstance(cases, list) or not cases:
        raise TestFileError(f"{path}: expected a mapping with a non-empty 'cases' list")
    return [run_case(path, i, case, time_limit) for i, case in enumerate(cases)]


def _docs(path: Path, case: dict[str, Any], name: str) -> list[tuple[str, dict[str, Any]]]:
    if "cluster_file" in case:
        target = path.parent / str(case["cluster_file"])
        return [(str(target), d) for d in read_documents(str(target))]
    items = case.get("cluster")
    if not isinstance(items, list):
        raise TestFileError(f"{path}: case {name!r}: 'cluster' must be a list of manifests (or use cluster_file)")
    return [(f"{path}[{name}]", d) for d in items]


def run_case(path: Path, index: int, case: Any, time_limit: float) -> CaseResult:
    if not isinstance(case, dict):
        raise TestFileError(f"{path}: case {index + 1} is not a mapping")
    name = str(case.get("name") or f"case {index + 1}")
    policy_paths = [str(path.parent / p) for p in case.get("policies") or []]
    try:
        rules = policy_rules(load_policies(policy_paths)) if policy_paths else None
        cluster = build_cluster(_docs(path, case, name), str(case.get("scheduler_name") or "policy-scheduler"))
    except InputError as exc:
        raise TestFileError(f"{path}: case {name!r}: {exc}") from None
    plan = make_plan(cluster, rules, time_limit=time_limit, workers=1, seed=0)
    return CaseResult(str(path), name, _compare(case.get("expect") or {}, plan))


def _compare(expect: dict[str, Any], plan) -> list[str]:
    failures = []
    for pod, want in (expect.get("placed") or {}).items():
        allowed = [want] if isinstance(want, str) else list(want)
        got = plan.assignments.get(pod)
        if got is None:
            why = "; ".join(plan.unschedulable.get(pod, ["not a pending pod of this scheduler"]))
            failures.append(f"{pod}: expected on {' or '.join(allowed)}, but it was not placed: {why}")
        elif got not in allowed:
            failures.append(f"{pod}: expected on {' or '.join(allowed)}, placed on {got}")
    for pod, want in (expect.get("unschedulable") or {}).items():
        if pod in plan.assignments:
            failures.append(f"{pod}: expected unschedulable, placed on {plan.assignments[pod]}")
        elif pod not in plan.unschedulable:
            failures.append(f"{pod}: not a pending pod of this scheduler")
        elif want and not any(str(want) in r for r in plan.unschedulable[pod]):
            failures.append(f"{pod}: expected a reason containing {want!r}, got: {'; '.join(plan.unschedulable[pod])}")
    if "placed_count" in expect and len(plan.assignments) != int(expect["placed_count"]):
        failures.append(f"expected {expect['placed_count']} pods placed, got {len(plan.assignments)}")
    return failures
