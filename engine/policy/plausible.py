"""Warnings for policies that check but cannot mean what they say: an amount in the wrong unit (memory is bytes,
so `64` is 64 bytes; cpu is cores, so `"4Gi"` is four billion of them), a number beyond any cluster (`1e30`,
`runtime 99999999999d`), a priority no pod can have, a policy file with no policy in it.

Warnings, not errors: each is valid Kubernetes and valid policy, only implausible. The thresholds are in
docs/policy-language.md ("Warnings"); `check` prints them and a dry run gives them as notes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..model.quantity import QuantityError
from . import ast as A
from .check import MAX_PODS_PER_CLUSTER
from .parse import Diagnostic

MIN_BYTES = 2**20  # 1Mi: a byte-counted amount above 0 and below it is a missing unit (`64`) or milli (`"64m"`)
MAX_BYTES = 2**60  # 1Ei: over 200 times 5,000 nodes (Kubernetes' documented limit) of the largest machines' memory
MAX_CORES = 10_000_000  # 5,000 nodes of 2,000 cores, the largest machines sold
MAX_UNITS = 2**63 - 1  # any other resource: the most a Kubernetes quantity's int64 value can count
MAX_DAYS = 365  # a runtime or a reservation's reach beyond a year is as good as never ending
PRIORITIES = (-(2**31), 2**31 - 1)  # spec.priority is an int32
BYTES = ("memory", "ephemeral-storage", "storage")
_BINARY_SUFFIX = re.compile(r"[0-9.]+([KMGTPE]i)$")


def warnings(policies: list[A.Policy], sources: dict[str, str]) -> list[Diagnostic]:
    """Every warning about the policies read from `sources`, in file and line order."""
    found = list(_empty_files(policies, sources))
    for policy in policies:
        for s in policy.statements:
            found.extend(_statement(s))
    return [positioned(pos, f"warning: {message}", sources)
            for pos, message in sorted(found, key=lambda f: (f[0].file, f[0].line, f[0].column))]


def positioned(pos: A.Pos, message: str, sources: dict[str, str]) -> Diagnostic:
    """A diagnostic at `pos`, with its source line for the caret."""
    lines = sources.get(pos.file, "").splitlines()
    return Diagnostic(pos.file, pos.line, pos.column, message, lines[pos.line - 1] if 0 < pos.line <= len(lines) else "")


def _empty_files(policies: list[A.Policy], sources: dict[str, str]) -> Iterator[tuple[A.Pos, str]]:
    """A file (or ConfigMap key) that adds no policy: empty, only comments, or the wrong file given."""
    used = {p.pos.file for p in policies}
    for file, text in sources.items():
        if file not in used:
            what = "empty" if not text.strip() else "only comments"
            yield A.Pos(file, 1, 1), f"no policy in this file ({what}): it adds nothing"


def _statement(s: A.Statement) -> Iterator[tuple[A.Pos, str]]:
    if isinstance(s, A.QuotaAmounts):
        for a in s.amounts:
            yield from _amount(f"quota {s.bound} of {a.resource!r} is", a.resource, a.value, a.pos)
    elif isinstance(s, A.NodeRequirement):
        for leaf in node_leaves(s.expr):
            if isinstance(leaf, A.NodeCompare) and leaf.attr == "allocatable":
                yield from _amount(f"allocatable {leaf.key!r} is compared with", leaf.key, leaf.value, leaf.pos)
    elif isinstance(s, A.Runtime) and s.seconds > MAX_DAYS * 86400:
        yield s.pos, (f"runtime of {s.seconds // 86400:,} days is over {MAX_DAYS} days: the pods are as good as never "
                      "ending (say how long they run at most, or leave runtime out)")
    elif isinstance(s, A.Reserve) and s.horizon > MAX_DAYS * 86400:
        yield s.pos, (f"reserve … within {s.horizon // 86400:,} days reaches over {MAX_DAYS} days ahead "
                      "(a reservation that far promises nothing; pods no reserve covers: 7d)")
    for expr in _pod_exprs(s):
        yield from _priorities(expr)


def _pod_exprs(s: A.Statement) -> Iterator[A.PodExpr]:
    if isinstance(s, A.Scope):
        yield s.expr
    elif isinstance(s, (A.Proximity, A.AtMost)) and isinstance(s.pods, A.PodsWhere):
        yield s.pods.expr


def _amount(what: str, resource: str, value: A.Value, pos: A.Pos) -> Iterator[tuple[A.Pos, str]]:
    """An amount of `resource` as written (already a valid quantity: `check` passed) in a plausible unit and size."""
    try:
        amount = A.quantity_value(resource, value)
    except QuantityError:
        return
    shown = f'"{value}"' if isinstance(value, str) else f"{value:g}"
    number = re.sub(r"[^0-9.].*", "", str(value)) or "1"  # the digits before any suffix, for a suggestion
    if resource == "cpu" and isinstance(value, str) and _BINARY_SUFFIX.match(value):
        yield pos, (f"{what} {shown}: cpu is counted in cores, so that is {amount / 1000:,.0f} cores "
                    f"(did you mean {number}?)")
    elif _bytes(resource) and 0 < amount < MIN_BYTES:
        yield pos, (f"{what} {shown}: {resource} is counted in bytes, so that is {amount:,} byte(s) "
                    f'(did you mean "{number}Mi" or "{number}Gi"?)')
    elif amount > (most := _most(resource)):
        yield pos, f"{what} {shown}, more than any cluster holds (warned above {_written(resource, most)})"


def _bytes(resource: str) -> bool:
    return resource in BYTES or resource.startswith("hugepages-")


def _most(resource: str) -> int:
    """The largest plausible amount of `resource`, in the model's units (cpu in millicores)."""
    if resource == "cpu":
        return MAX_CORES * 1000
    if resource == "pods":
        return MAX_PODS_PER_CLUSTER
    return MAX_BYTES if _bytes(resource) else MAX_UNITS


def _written(resource: str, most: int) -> str:
    if resource == "cpu":
        return f"{MAX_CORES:,} cores"
    if _bytes(resource):
        return "1Ei"
    return f"{most:,}" + (" pods, Kubernetes' limit per cluster" if resource == "pods" else "")


def _priorities(expr: A.PodExpr) -> Iterator[tuple[A.Pos, str]]:
    """`priority OP N` with N beyond an int32: the same answer for every pod."""
    low, high = PRIORITIES
    for leaf in pod_leaves(expr):
        if isinstance(leaf, A.PodPriority) and isinstance(leaf.value, (int, float)) and not low <= leaf.value <= high:
            always = A.compare(0, leaf.op, leaf.value)
            yield leaf.pos, (f"a pod's priority is a 32-bit integer ({low:,} to {high:,}): 'priority {leaf.op} "
                             f"{leaf.value:g}' is {'true' if always else 'false'} for every pod")


def node_leaves(expr: A.NodeExpr) -> Iterator[A.NodeExpr]:
    """The predicates under and / or / not."""
    if isinstance(expr, (A.NodeAnd, A.NodeOr)):
        yield from node_leaves(expr.left)
        yield from node_leaves(expr.right)
    elif isinstance(expr, A.NodeNot):
        yield from node_leaves(expr.inner)
    else:
        yield expr


def pod_leaves(expr: A.PodExpr) -> Iterator[A.PodExpr]:
    if isinstance(expr, (A.PodAnd, A.PodOr)):
        yield from pod_leaves(expr.left)
        yield from pod_leaves(expr.right)
    elif isinstance(expr, A.PodNot):
        yield from pod_leaves(expr.inner)
    else:
        yield expr


def resource_uses(policy: A.Policy) -> Iterator[tuple[str, A.Pos]]:
    """Every resource the policy names, where: quotas, allocatable predicates, `minimize` and its prices."""
    for s in policy.statements:
        if isinstance(s, A.QuotaAmounts):
            yield from ((a.resource, a.pos) for a in s.amounts)
        elif isinstance(s, A.NodeRequirement):
            yield from ((leaf.key, leaf.pos) for leaf in node_leaves(s.expr)
                        if isinstance(leaf, (A.NodeCompare, A.NodeExists)) and leaf.attr == "allocatable")
        elif isinstance(s, A.Minimize) and s.attr == "allocatable":
            yield s.key, s.pos
        elif isinstance(s, A.MinimizeCost):
            yield from ((price.resource, price.pos) for price in s.prices)
