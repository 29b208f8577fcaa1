"""Type-check parsed policies before anything uses them; every problem is a positioned Diagnostic."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterator
from typing import Any

from ..devices.dra_domains import attribute_problem
from ..model.quantity import QuantityError, parse_quantity
from . import ast as A
from .parse import Diagnostic

MAX_PODS_PER_CLUSTER = 150_000  # Kubernetes' documented scalability limit
MAX_WEIGHT = 1000
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
LABEL_KEY = re.compile(rf"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?{_NAME}$")
LABEL_VALUE = re.compile(rf"^({_NAME})?$")
EXTENDED_RESOURCE = re.compile(rf"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/{_NAME}$")
# the resources without a domain that pods request, nodes advertise or claims hold (besides hugepages-<size>)
STANDARD_RESOURCES = ("cpu", "memory", "ephemeral-storage", "pods", "storage")
_RESOURCE_HELP = ("a resource is cpu, memory, ephemeral-storage, pods, storage, hugepages-<size> or an extended "
                  "resource named with its domain, such as 'example.com/gpu'")


def check(policies: list[A.Policy], sources: dict[str, str]) -> list[Diagnostic]:
    """All type errors in the policies (empty when they are fit to use)."""
    out: list[Diagnostic] = []

    def error(pos: A.Pos, message: str) -> None:
        lines = sources.get(pos.file, "").splitlines()
        source = lines[pos.line - 1] if 0 < pos.line <= len(lines) else ""
        out.append(Diagnostic(pos.file, pos.line, pos.column, message, source))

    seen: dict[str, A.Pos] = {}
    for policy in policies:
        if policy.name in seen:
            error(policy.pos, f"duplicate policy name {policy.name!r} (first defined at {seen[policy.name]})")
        else:
            seen[policy.name] = policy.pos
        scopes = [s for s in policy.statements if isinstance(s, A.Scope)]
        if not scopes:
            error(policy.pos, f"policy {policy.name!r} has no 'applies to' line (say 'applies to all pods' for every pod)")
        for extra in scopes[1:]:
            error(extra.pos, f"policy {policy.name!r} has a second 'applies to' line; combine them with 'and' / 'or'")
        for kind, word, why in ONCE_PER_POLICY:
            for again in [s for s in policy.statements if isinstance(s, kind)][1:]:
                error(again.pos, f"policy {policy.name!r} has a second '{word}' line; {why}")
        for s in policy.statements:
            if isinstance(s, A.Runtime) and s.seconds <= 0:
                error(s.pos, "runtime must be longer than 0s (say how long the pods in scope run at most)")
            if isinstance(s, A.Reserve) and s.horizon <= 0:
                error(s.pos, "reserve … within must be longer than 0s (how far ahead a reservation may reach)")
        for statement in policy.statements:
            for pos, message in _statement(statement):
                error(pos, message)
        for pos, message in _quota(policy):
            error(pos, message)
    return out


MAX_QUOTA_WEIGHT = 1000
ONCE_PER_POLICY = ((A.GangBy, "gang", "a pod belongs to one gang"), (A.Runtime, "runtime", "a pod has one runtime"),
                   (A.Reserve, "reserve", "one count and horizon per policy"))


def _quota(policy: A.Policy) -> Iterator[tuple[A.Pos, str]]:
    """A policy's quota lines together: each resource once per bound, min ≤ max, one weight from 0 to 1000."""
    found: dict[str, dict[str, tuple[int, A.Pos]]] = {"min": {}, "max": {}}
    weights = [s for s in policy.statements if isinstance(s, A.QuotaWeight)]
    for extra in weights[1:]:
        yield extra.pos, f"policy {policy.name!r} has a second 'quota weight' line"
    for w in weights:
        if not 0 < w.weight <= MAX_QUOTA_WEIGHT:
            yield w.pos, f"quota weight must be above 0 and at most {MAX_QUOTA_WEIGHT}, got {w.weight:g}"
    for s in policy.statements:
        if isinstance(s, A.QuotaAmounts):
            yield from _amounts(s, found[s.bound])
    for r, (low, pos) in found["min"].items():
        if r in found["max"] and low > found["max"][r][0]:
            most, where = found["max"][r]
            yield pos, f"quota min of {r!r} ({low}) is above its max ({most}, line {where.line})"


def _amounts(s: A.QuotaAmounts, seen: dict[str, tuple[int, A.Pos]]) -> Iterator[tuple[A.Pos, str]]:
    for a in s.amounts:
        if problems := list(_resource(a.resource, a.pos)):
            yield from problems
            continue
        if a.resource in seen:
            yield a.pos, f"quota {s.bound} of {a.resource!r} is given twice"
            continue
        try:
            amount = a.quantity()
        except QuantityError as exc:
            yield a.pos, f"quota {s.bound} of {a.resource!r} is {a.value!r}, which is not a quantity: {exc}"
            continue
        if amount < 0:
            yield a.pos, f"quota {s.bound} of {a.resource!r} must not be negative"
            continue
        seen[a.resource] = (amount, a.pos)


def _resource(name: str, pos: A.Pos) -> Iterator[tuple[A.Pos, str]]:
    """A resource name as Kubernetes validates it where pods request and nodes advertise: a standard name,
    hugepages-<size>, or an extended resource (a qualified name with a domain, valid with `requests.` before it)."""
    if "/" in name:
        if EXTENDED_RESOURCE.match(name) and len(name.split("/")[0]) <= 253 - len("requests."):
            return
    elif name in STANDARD_RESOURCES or _hugepages(name):
        return
    close = _near(name)
    why = "the size of hugepages-<size> is a quantity above 0, as in 'hugepages-2Mi'" if name.startswith(
        "hugepages-") else _RESOURCE_HELP
    yield pos, f"invalid resource name {name!r}" + (f" (did you mean {close!r}?)" if close else f": {why}")


def _near(name: str) -> str | None:
    """The valid resource name `name` was probably meant to be: without a ResourceQuota prefix (`requests.cpu`),
    with its domain in lower case, or a standard name a letter or two away."""
    bare = name.split(".", 1)[1] if name.startswith(("requests.", "limits.")) else name
    if bare in STANDARD_RESOURCES:
        return bare
    domain, _, rest = name.partition("/")
    if rest and EXTENDED_RESOURCE.match(lowered := f"{domain.lower()}/{rest}"):
        return lowered
    close = difflib.get_close_matches(name.lower(), [*STANDARD_RESOURCES, "hugepages-2Mi", "hugepages-1Gi"], n=1,
                                      cutoff=0.75)
    return close[0] if close else None


def _hugepages(name: str) -> bool:
    """hugepages-<size>, the size a positive quantity (upstream's HugePageSizeFromResourceName)."""
    if not name.startswith("hugepages-"):
        return False
    try:
        return parse_quantity(name.removeprefix("hugepages-")) > 0
    except QuantityError:
        return False


def _weight(weight: float | None, pos: A.Pos) -> Iterator[tuple[A.Pos, str]]:
    if weight is not None and not (0 < weight <= MAX_WEIGHT and weight == int(weight)):
        hint = " (use 'avoid' to push pods away)" if weight < 0 else ""
        yield pos, f"weight must be a whole number from 1 to {MAX_WEIGHT}, got {weight:g}{hint}"


def _label_key(key: str, pos: A.Pos, what: str = "label key") -> Iterator[tuple[A.Pos, str]]:
    if not LABEL_KEY.match(key):
        yield pos, f"invalid {what} {key!r} (a Kubernetes qualified name such as 'example.com/tier')"


def _statement(s: A.Statement) -> Iterator[tuple[A.Pos, str]]:
    """Every problem of one statement, by the checker of its kind (statements without one have none)."""
    check = _CHECKS.get(type(s))
    if check is not None:
        yield from check(s)


def _scope(s: A.Scope) -> Iterator[tuple[A.Pos, str]]:
    yield from _pod_expr(s.expr)


def _node_requirement(s: A.NodeRequirement) -> Iterator[tuple[A.Pos, str]]:
    yield from _weight(s.weight, s.pos)
    yield from _node_expr(s.expr)


def _tolerate(s: A.Tolerate) -> Iterator[tuple[A.Pos, str]]:
    for t in s.taints:
        if t.key:
            yield from _label_key(t.key, t.pos, "taint key")
        if t.value and not LABEL_VALUE.match(t.value):
            yield t.pos, f"invalid taint value {t.value!r}"
        if t.effect and t.effect not in EFFECTS:
            yield t.pos, f"unknown taint effect {t.effect!r} (one of {', '.join(EFFECTS)})"


DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _fragmentation(s: A.LessFragmentation) -> Iterator[tuple[A.Pos, str]]:
    yield from _weight(s.weight, s.pos)
    if not DNS_SUBDOMAIN.match(s.device_class) or len(s.device_class) > 253:
        yield s.pos, (f"invalid device class name {s.device_class!r} (a DeviceClass is named as a DNS subdomain, "
                      "such as 'gpu.example.com')")


def _minimize(s: A.Minimize) -> Iterator[tuple[A.Pos, str]]:
    yield from _weight(s.weight, s.pos)
    if s.attr not in ("label", "annotation", "allocatable"):
        yield s.pos, f"cannot minimise a node {s.attr}: use a label, an annotation or an allocatable resource"
    elif s.attr == "label":
        yield from _label_key(s.key, s.pos)
    elif s.attr == "allocatable":
        yield from _resource(s.key, s.pos)


def _minimize_cost(s: A.MinimizeCost) -> Iterator[tuple[A.Pos, str]]:
    yield from _weight(s.weight, s.pos)
    seen: set[str] = set()
    for price in s.prices:
        yield from _resource(price.resource, price.pos)
        if price.resource in seen:
            yield price.pos, f"resource {price.resource!r} is priced twice"
        seen.add(price.resource)
        if price.attr not in ("label", "annotation"):
            yield price.pos, f"a price is read from a node label or annotation, not a {price.attr}"
        elif price.attr == "label":
            yield from _label_key(price.key, price.pos)


def _pods(pods: A.SameLabel | A.PodsWhere) -> Iterator[tuple[A.Pos, str]]:
    if isinstance(pods, A.SameLabel):
        yield from _label_key(pods.key, pods.pos)
    else:
        yield from _pod_expr(pods.expr)


def _proximity(s: A.Proximity) -> Iterator[tuple[A.Pos, str]]:
    yield from _weight(s.weight, s.pos)
    yield from _label_key(s.domain.key, s.domain.pos, "topology key")
    yield from _pods(s.pods)


def _node_usage(s: A.PackOrSpread) -> Iterator[tuple[A.Pos, str]]:
    yield from _weight(s.weight, s.pos)


def _limit(s: A.AtMost) -> Iterator[tuple[A.Pos, str]]:
    yield from _label_key(s.domain.key, s.domain.pos, "topology key")
    if s.most < 1:
        yield s.pos, f"'at most {s.most}' leaves no room at all; use 'separate from' to keep pods apart"
    yield from _pods(s.pods)


def _default_spreading(s: A.DefaultSpreadingRule) -> Iterator[tuple[A.Pos, str]]:
    seen: set[str] = set()
    for spread in s.spreads:
        yield from _label_key(spread.domain.key, spread.domain.pos, "topology key")
        if spread.max_skew < 1:
            yield spread.pos, f"max skew must be at least 1, got {spread.max_skew}"
        if spread.domain.key in seen:
            yield spread.domain.pos, f"topology key {spread.domain.key!r} is spread twice"
        seen.add(spread.domain.key)


def _eviction_cap(s: A.EvictionsPerCycle) -> Iterator[tuple[A.Pos, str]]:
    if s.most > MAX_PODS_PER_CLUSTER:
        yield s.pos, f"'at most {s.most} evictions' is more than a cluster can hold ({MAX_PODS_PER_CLUSTER:,} pods)"


def _gang(s: A.GangBy) -> Iterator[tuple[A.Pos, str]]:
    yield from _gang_topology(s)
    if s.device is not None and (problem := attribute_problem(s.device.name)) is not None:
        yield s.device.pos, f"invalid device attribute {s.device.name!r}: {problem}"
    if s.workload:
        return  # by workload: the workload's object says its size
    if not s.label:
        if s.within is None and not s.prefer and s.least is None and s.device is None:
            yield s.pos, ("gang by podgroup adds a topology to each pod's PodGroup: give `within …`, "
                          "`prefer within …` or `with at least N per …`")
        return  # by podgroup: the PodGroup's minMember applies
    yield from _label_key(s.label, s.pos)
    if s.min_member < 1:
        yield s.pos, f"gang min must be at least 1, got {s.min_member}"
    elif s.min_member > MAX_PODS_PER_CLUSTER:
        yield s.pos, (f"gang min {s.min_member} can never be satisfied: a cluster holds at most "
                      f"{MAX_PODS_PER_CLUSTER} pods")


def _gang_topology(s: A.GangBy) -> Iterator[tuple[A.Pos, str]]:
    """Its levels' keys, each named once; `with at least` a count some gang can reach."""
    seen: dict[str, str] = {}
    for what, domain in ([("within", s.within)] if s.within else []) + [("prefer within", d) for d in s.prefer] + (
            [("with at least", s.least.domain)] if s.least else []):
        yield from _label_key(domain.key, domain.pos, "topology key")
        if what != "with at least" and domain.key in seen:
            yield domain.pos, (f"{what} {domain.key!r}: already named by {seen[domain.key]} (a gang in one domain of "
                               f"it is in the fewest)")
        seen.setdefault(domain.key, what)
    if s.least is not None and s.least.least < 1:
        yield s.least.pos, f"with at least {s.least.least}: must be at least 1"


_CHECKS: dict[type, Callable[[Any], Iterator[tuple[A.Pos, str]]]] = {
    A.Scope: _scope, A.NodeRequirement: _node_requirement, A.Tolerate: _tolerate, A.Minimize: _minimize,
    A.MinimizeCost: _minimize_cost, A.Proximity: _proximity, A.PackOrSpread: _node_usage, A.AtMost: _limit,
    A.EvictionsPerCycle: _eviction_cap, A.GangBy: _gang, A.DefaultSpreadingRule: _default_spreading,
    A.LessFragmentation: _fragmentation,
}


def _pod_expr(e: A.PodExpr) -> Iterator[tuple[A.Pos, str]]:
    if isinstance(e, (A.PodAnd, A.PodOr)):
        yield from _pod_expr(e.left)
        yield from _pod_expr(e.right)
    elif isinstance(e, A.PodNot):
        yield from _pod_expr(e.inner)
    elif (isinstance(e, A.PodField) and e.field == "label") or isinstance(e, A.PodLabelExists):
        yield from _label_key(e.key, e.pos)
    elif isinstance(e, A.PodPriority) and not isinstance(e.value, (int, float)):
        yield e.pos, f"priority is a number; cannot compare it with {e.value!r}"


def _node_expr(e: A.NodeExpr) -> Iterator[tuple[A.Pos, str]]:
    if isinstance(e, (A.NodeAnd, A.NodeOr)):
        yield from _node_expr(e.left)
        yield from _node_expr(e.right)
    elif isinstance(e, A.NodeNot):
        yield from _node_expr(e.inner)
    elif isinstance(e, (A.NodeCompare, A.NodeMember, A.NodeExists)):
        if e.attr == "allocatable":
            yield from _resource(e.key, e.pos)
            if isinstance(e, A.NodeMember):
                yield e.pos, "compare allocatable resources with <, <=, >, >=, == or !=, not 'in'"
            if isinstance(e, A.NodeCompare):
                try:
                    A.quantity_value(e.key, e.value)
                except QuantityError as exc:
                    yield e.pos, f"allocatable {e.key!r} is compared with {e.value!r}, which is not a quantity: {exc}"
        elif e.attr in ("label", "taint"):
            yield from _label_key(e.key, e.pos, f"{e.attr} key")
        if (isinstance(e, A.NodeCompare) and e.op in ("<", "<=", ">", ">=") and not isinstance(e.value, (int, float))
                and e.attr != "allocatable"):
                yield e.pos, f"'{e.op}' compares numbers; {e.value!r} is a string (write the number without quotes)"
