"""What a policy test case may expect of the plan beside placements (issue 51): the evictions and the budgets they
break, reservations and estimated starts (time in the plan), the tenants' figures, and the pods' reason codes.

Each kind has a check of its shape, so a malformed expectation is the test file's error (exit 2) rather than a case
that quietly checks nothing, and a comparison with the plan that says each difference in one line: what was
expected, what the plan did. What an expectation names is checked; where a set is the point (the victims, the
reserved pods, a tenant's pods) the set is checked exactly, so a plan that evicts or reserves more fails too.
"""

from __future__ import annotations

import datetime
import difflib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..model.quantity import QuantityError, to_int, to_milli
from ..model.reasons import Code
from ..planning.plan import Plan
from ..quotas.tenant_report import TenantLine
from ..quotas.tenants import SHARE_UNIT, shown
from ..time.timeline import Now, rfc3339

KEYS = ("evicted", "reserved", "estimated", "tenants", "reason_codes")
EVICTION_KEYS = ("for", "violates")
RESERVATION_KEYS = ("node", "start")
TENANT_KEYS = ("before", "used", "borrowed", "share", "placed", "unschedulable")
AMOUNTS = ("before", "used", "borrowed")
CODES = tuple(code.value for code in Code)
UNKNOWN = "unknown"  # an estimate the plan cannot make
TIME_FORMATS = ("%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%dT%H:%M:%S%z")  # as `dry-run --now` reads it
TIME_EXAMPLE = "2026-11-25T12:00:00Z"


class Malformed(ValueError):
    """An expectation of the wrong shape: the message, and the entry (a pod, a tenant) it is about, for its line."""

    def __init__(self, message: str, item: str | None = None) -> None:
        super().__init__(message)
        self.item = item


@dataclass(frozen=True, slots=True)
class CaseOutcome:
    """What a case's plan is compared with: the plan, its tenants by quota name, and the now it was made at."""

    plan: Plan
    tenants: dict[str, TenantLine]
    now: Now | None


def unknown_key(key: str, known: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(key, known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else f" (one of {', '.join(known)})"
    return f"unknown key {key!r}{hint}"


def parse_time(value: Any, what: str, alternative: str = "") -> float:
    """An RFC 3339 time as `--now` takes it (YAML may have read an unquoted one already), in seconds since the
    epoch; a time without an offset is UTC. `alternative`: what else the value may be, for the message."""
    at = value if isinstance(value, datetime.datetime) else None
    for fmt in TIME_FORMATS if isinstance(value, str) else ():
        try:
            at = datetime.datetime.strptime(value, fmt)
            break
        except ValueError:
            continue
    if at is None:
        shown = value.isoformat() if isinstance(value, datetime.date) else value  # YAML reads 2026-11-25 as a date
        raise Malformed(f"{what} must be an RFC 3339 time such as {TIME_EXAMPLE}{alternative}, got {shown!r}")
    return (at if at.tzinfo else at.replace(tzinfo=datetime.UTC)).timestamp()


# --- shapes ------------------------------------------------------------------------------------------------------

def check(key: str, value: Any) -> None:
    """Raise Malformed when `value` is not what `expect.<key>` takes."""
    entries = _mapping(value, f"expect.{key}", "a mapping of quota name to its figures" if key == "tenants"
                       else "a mapping of namespace/pod to what is expected")
    for item, want in entries.items():
        if key != "tenants" and "/" not in str(item):
            raise Malformed(f"expect.{key}: {item!r} is not a pod key (namespace/name)", str(item))
        try:
            SHAPES[key](f"expect.{key}.{item}", want)
        except Malformed as exc:
            raise Malformed(str(exc), str(item)) from None


def _mapping(value: Any, what: str, of: str) -> dict[Any, Any]:
    if not isinstance(value, dict):
        raise Malformed(f"{what} must be {of}, got {type(value).__name__}")
    return value


def _keys(value: dict[Any, Any], known: tuple[str, ...], what: str) -> None:
    for key in value:
        if key not in known:
            raise Malformed(f"{what}: {unknown_key(str(key), known)}")


def _nodes(value: Any, what: str) -> None:
    if not (isinstance(value, str) or (isinstance(value, list) and value and all(isinstance(n, str) for n in value))):
        raise Malformed(f"{what} must be a node name or a list of node names, got {value!r}")


def _names(value: Any, what: str) -> None:
    if not (isinstance(value, str) or (isinstance(value, list) and all(isinstance(n, str) for n in value))):
        raise Malformed(f"{what} must be a namespace/name or a list of them, got {value!r}")


def _eviction_shape(what: str, want: Any) -> None:
    if want is None or isinstance(want, str):
        return
    _keys(_mapping(want, what, "the preemptor (namespace/pod) or a mapping with for, violates"), EVICTION_KEYS, what)
    if "for" in want and not isinstance(want["for"], str):
        raise Malformed(f"{what}.for must be the preemptor's namespace/name, got {want['for']!r}")
    if "violates" in want:
        _names(want["violates"], f"{what}.violates")


def _reservation_shape(what: str, want: Any) -> None:
    if want is None:
        return
    if not isinstance(want, dict):
        _nodes(want, what)
        return
    _keys(want, RESERVATION_KEYS, what)
    if "node" in want:
        _nodes(want["node"], f"{what}.node")
    if "start" in want:
        parse_time(want["start"], f"{what}.start")


def _estimate_shape(what: str, want: Any) -> None:
    if want != UNKNOWN:
        parse_time(want, what, f" or {UNKNOWN!r}")


def _amount(resource: str, amount: Any, what: str) -> int:
    """A Kubernetes quantity in the model's units (cpu in millicores, the rest as counted or in bytes)."""
    if isinstance(amount, bool) or not isinstance(amount, str | int | float):
        raise Malformed(f"{what}.{resource} must be a quantity (4, \"500m\", 8Gi), got {amount!r}")
    try:
        return to_milli(amount) if resource == "cpu" else to_int(amount)
    except QuantityError as exc:
        raise Malformed(f"{what}.{resource}: {exc}") from None


def _tenant_shape(what: str, want: Any) -> None:
    _keys(_mapping(want, what, f"a mapping with {', '.join(TENANT_KEYS)}"), TENANT_KEYS, what)
    for field in AMOUNTS:
        for resource, amount in _mapping(want.get(field, {}), f"{what}.{field}", "a mapping of resource to "
                                         "quantity").items():
            _amount(str(resource), amount, f"{what}.{field}")
    share = want.get("share", 0)
    if isinstance(share, bool) or not isinstance(share, int | float) or share < 0:
        raise Malformed(f"{what}.share must be a number (0.25), got {share!r}")
    for field in ("placed", "unschedulable"):
        pods = want.get(field, 0)
        if not ((isinstance(pods, int) and not isinstance(pods, bool) and pods >= 0)
                or (isinstance(pods, list) and all(isinstance(p, str) for p in pods))):
            raise Malformed(f"{what}.{field} must be how many pods or the list of them, got {pods!r}")


def _code_shape(what: str, want: Any) -> None:
    if want not in CODES:
        close = difflib.get_close_matches(str(want), CODES, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else f" (one of {', '.join(CODES)})"
        raise Malformed(f"{what}: unknown reason code {want!r}{hint}")


SHAPES: dict[str, Callable[[str, Any], None]] = {
    "evicted": _eviction_shape, "reserved": _reservation_shape, "estimated": _estimate_shape,
    "tenants": _tenant_shape, "reason_codes": _code_shape,
}


# --- comparisons -------------------------------------------------------------------------------------------------

def compare(expect: dict[str, Any], outcome: CaseOutcome) -> list[str]:
    """One line per difference between the expectations of KEYS that `expect` gives and the plan."""
    failures: list[str] = []
    for key, compare_one in COMPARISONS.items():
        if key in expect:
            failures.extend(compare_one(expect[key], outcome))
    return failures


def _fate(plan: Plan, pod: str) -> str:
    """What the plan did with a pod, in a few words, for a failure line."""
    if pod in plan.assignments:
        return f"placed on {plan.assignments[pod]}"
    held = [(node, r.start) for r in plan.reservations for key, node in r.pods if key == pod]
    if held:
        return f"reserved on {held[0][0]} from {rfc3339(held[0][1])}"
    if (estimate := plan.estimates.get(pod)) is not None:
        return estimate.why if estimate.start is None else f"estimated to start by {rfc3339(estimate.start)}"
    if pod in plan.unschedulable:
        return f"unschedulable: {'; '.join(plan.unschedulable[pod])}"
    return f"skipped: {plan.skipped[pod]}" if pod in plan.skipped else "not a pending pod of this scheduler"


def _timeless(outcome: CaseOutcome) -> str:
    return "" if outcome.now is not None else " (no time in the plan: give the case a now:)"


def _as_list(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def _evictions(expect: dict[str, Any], outcome: CaseOutcome) -> list[str]:
    plan = outcome.plan
    done = {v.pod: (preemptor, v) for preemptor, p in plan.preemptions.items() for v in p.victims}
    failures = []
    for pod, want in expect.items():
        want = want if isinstance(want, dict) else {} if want is None else {"for": want}
        said = "expected evicted" + (f" for {want['for']}" if "for" in want else "")
        if pod not in done:
            failures.append(f"{pod}: {said}, but the plan does not evict it")
            continue
        preemptor, victim = done[pod]
        if "for" in want and want["for"] != preemptor:
            failures.append(f"{pod}: {said}, evicted for {preemptor}")
        if "violates" in want and sorted(_as_list(want["violates"])) != sorted(victim.over_budget):
            wanted = ", ".join(f"PodDisruptionBudget {b}" for b in sorted(_as_list(want["violates"]))) or "no PodDisruptionBudget"
            failures.append(f"{pod}: expected its eviction to violate {wanted}, {victim.to_dict()['budget']}")
    failures.extend(f"{pod}: evicted for {preemptor} on {plan.preemptions[preemptor].node}, not expected"
                    for pod, (preemptor, _) in sorted(done.items()) if pod not in expect)
    return failures


def _reservations(expect: dict[str, Any], outcome: CaseOutcome) -> list[str]:
    plan = outcome.plan
    held = {key: (node, r.start) for r in plan.reservations for key, node in r.pods}
    failures = []
    for pod, want in expect.items():
        want = want if isinstance(want, dict) else {} if want is None else {"node": want}
        nodes = _as_list(want.get("node", []))
        start = parse_time(want["start"], "start") if "start" in want else None
        said = ("expected reserved" + (f" on {' or '.join(nodes)}" if nodes else "")
                + (f" from {rfc3339(start)}" if start is not None else ""))
        if pod not in held:
            failures.append(f"{pod}: {said}, but it has no reservation: {_fate(plan, pod)}{_timeless(outcome)}")
        elif (nodes and held[pod][0] not in nodes) or (start is not None and held[pod][1] != start):
            failures.append(f"{pod}: {said}, reserved on {held[pod][0]} from {rfc3339(held[pod][1])}")
    failures.extend(f"{pod}: reserved on {node} from {rfc3339(at)}, not expected"
                    for pod, (node, at) in sorted(held.items()) if pod not in expect)
    return failures


def _estimates(expect: dict[str, Any], outcome: CaseOutcome) -> list[str]:
    plan = outcome.plan
    failures = []
    for pod, want in expect.items():
        estimate = plan.estimates.get(pod)
        if want == UNKNOWN:
            if estimate is None or estimate.start is not None:
                failures.append(f"{pod}: expected {UNKNOWN} (no estimate), {_fate(plan, pod)}{_timeless(outcome)}")
            continue
        start = parse_time(want, "start")
        if estimate is None or estimate.start != start:
            failures.append(f"{pod}: expected to start by {rfc3339(start)}, {_fate(plan, pod)}{_timeless(outcome)}")
    return failures


def _tenants(expect: dict[str, Any], outcome: CaseOutcome) -> list[str]:
    failures = []
    for name, want in expect.items():
        line = outcome.tenants.get(str(name))
        if line is None:
            known = ", ".join(sorted(outcome.tenants)) or "none: the case has no quotas"
            failures.append(f"tenant {name}: no such quota (the plan's: {known})")
            continue
        failures.extend(f"tenant {name}: {f}" for f in _tenant_figures(want, line))
    return failures


def _tenant_figures(want: dict[str, Any], line: TenantLine) -> list[str]:
    failures = []
    amounts = {a.resource: a for a in line.resources}
    for field in AMOUNTS:
        for resource, amount in (want.get(field) or {}).items():
            expected = _amount(resource, amount, field)
            got = getattr(amounts[resource], field) if resource in amounts else None  # (None: not pooled)
            if resource not in amounts:
                failures.append(f"expected {resource} {field} {shown(resource, expected)}, but the quota names no "
                                f"{resource} (it names {', '.join(amounts) or 'nothing'})")
            elif got != expected:
                said = "none (not a tenant, or no tenant's min names it)" if got is None else shown(resource, got)
                failures.append(f"expected {resource} {field} {shown(resource, expected)}, got {said}")
    if "share" in want and (line.share is None or line.share != round(want["share"] * SHARE_UNIT)):
        got = "none (not a tenant)" if line.share is None else f"{line.share / SHARE_UNIT:g}"
        failures.append(f"expected share {want['share']:g}, got {got}")
    for field, pods in (("placed", line.placed), ("unschedulable", line.left)):
        if field not in want:
            continue
        expected = want[field]
        if isinstance(expected, int) and expected != len(pods):
            failures.append(f"expected {expected} pod(s) {field}, got {len(pods)}: {', '.join(pods) or 'none'}")
        elif isinstance(expected, list) and sorted(expected) != sorted(pods):
            failures.append(f"expected {field} {', '.join(sorted(expected)) or 'none'}, got {', '.join(pods) or 'none'}")
    return failures


def _codes(expect: dict[str, Any], outcome: CaseOutcome) -> list[str]:
    plan = outcome.plan
    waiting = plan.waiting_reasons()
    failures = []
    for pod, want in expect.items():
        diagnosis = waiting.get(pod)
        if diagnosis is None:
            failures.append(f"{pod}: expected reason code {want}, but it does not wait: {_fate(plan, pod)}")
        elif diagnosis.code.value != want:
            others = ", ".join(c.code.value for c in diagnosis.causes[1:])
            failures.append(f"{pod}: expected reason code {want}, got {diagnosis.code.value}"
                            f"{f' (then {others})' if others else ''}")
    return failures


COMPARISONS: dict[str, Callable[[dict[str, Any], CaseOutcome], list[str]]] = {
    "evicted": _evictions, "reserved": _reservations, "estimated": _estimates, "tenants": _tenants,
    "reason_codes": _codes,
}
