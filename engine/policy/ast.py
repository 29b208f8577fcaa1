"""The typed AST of the policy language; expressions evaluate themselves against pods and nodes.

Every node is a frozen dataclass (hashable, so a node predicate can serve directly as the rule IR's
predicate and be cached) and carries its position for error messages and explanations.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from ..model.cluster import Node, Pod
from ..model.quantity import QuantityError, to_int, to_milli


@dataclass(frozen=True, slots=True)
class Pos:
    file: str
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


Value = str | int | float


def _number(value: object) -> float | None:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def compare(have: float, op: str, want: float) -> bool:
    return {"==": have == want, "!=": have != want, "<": have < want, "<=": have <= want,
            ">": have > want, ">=": have >= want}[op]


# --- pod scope expressions -----------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class AllPods:
    pos: Pos | None = field(default=None, compare=False, hash=False)

    def matches(self, pod: Pod) -> bool:
        return True

    def __str__(self) -> str:
        return "all pods"


@dataclass(frozen=True, slots=True)
class PodAnd:
    left: PodExpr
    right: PodExpr
    pos: Pos | None = field(default=None, compare=False, hash=False)

    def matches(self, pod: Pod) -> bool:
        return self.left.matches(pod) and self.right.matches(pod)

    def __str__(self) -> str:
        return f"({self.left} and {self.right})"


@dataclass(frozen=True, slots=True)
class PodOr:
    left: PodExpr
    right: PodExpr
    pos: Pos | None = field(default=None, compare=False, hash=False)

    def matches(self, pod: Pod) -> bool:
        return self.left.matches(pod) or self.right.matches(pod)

    def __str__(self) -> str:
        return f"({self.left} or {self.right})"


@dataclass(frozen=True, slots=True)
class PodNot:
    inner: PodExpr
    pos: Pos | None = field(default=None, compare=False, hash=False)

    def matches(self, pod: Pod) -> bool:
        return not self.inner.matches(pod)

    def __str__(self) -> str:
        return f"not {self.inner}"


def _set_test(have: str | None, op: str, values: tuple[str, ...]) -> bool:
    """==, != (one value), in, not in; a missing value never equals and is never in."""
    if op in ("==", "in"):
        return have is not None and have in values
    return have is None or have not in values


@dataclass(frozen=True, slots=True)
class PodField:
    """namespace / owner kind / label "k" compared with ==, !=, in, not in."""

    field: str  # "namespace", "owner kind" or "label"
    key: str
    op: str
    values: tuple[str, ...]
    pos: Pos = dataclasses.field(compare=False, hash=False)  # `field` here is the attribute above

    def matches(self, pod: Pod) -> bool:
        if self.field == "namespace":
            have: str | None = pod.namespace
        elif self.field == "owner kind":
            have = pod.owner[0] if pod.owner else None
        else:
            have = pod.labels.get(self.key)
        return _set_test(have, self.op, self.values)

    def __str__(self) -> str:
        what = f'label "{self.key}"' if self.field == "label" else self.field
        return f"{what} {self.op} {list(self.values) if self.op in ('in', 'not in') else self.values[0]!r}"


@dataclass(frozen=True, slots=True)
class PodLabelExists:
    key: str
    exists: bool
    pos: Pos = field(compare=False, hash=False)

    def matches(self, pod: Pod) -> bool:
        return (self.key in pod.labels) == self.exists

    def __str__(self) -> str:
        return f'label "{self.key}" {"exists" if self.exists else "not exists"}'


@dataclass(frozen=True, slots=True)
class PodPriority:
    op: str
    value: Value
    pos: Pos = field(compare=False, hash=False)

    def matches(self, pod: Pod) -> bool:
        want = _number(self.value)
        return want is not None and compare(pod.priority, self.op, want)

    def __str__(self) -> str:
        return f"priority {self.op} {self.value}"


PodExpr = AllPods | PodAnd | PodOr | PodNot | PodField | PodLabelExists | PodPriority


# --- node predicates ------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class NodeAnd:
    left: NodeExpr
    right: NodeExpr
    pos: Pos | None = field(default=None, compare=False, hash=False)

    def matches(self, node: Node) -> bool:
        return self.left.matches(node) and self.right.matches(node)

    def __str__(self) -> str:
        return f"({self.left} and {self.right})"


@dataclass(frozen=True, slots=True)
class NodeOr:
    left: NodeExpr
    right: NodeExpr
    pos: Pos | None = field(default=None, compare=False, hash=False)

    def matches(self, node: Node) -> bool:
        return self.left.matches(node) or self.right.matches(node)

    def __str__(self) -> str:
        return f"({self.left} or {self.right})"


@dataclass(frozen=True, slots=True)
class NodeNot:
    inner: NodeExpr
    pos: Pos | None = field(default=None, compare=False, hash=False)

    def matches(self, node: Node) -> bool:
        return not self.inner.matches(node)

    def __str__(self) -> str:
        return f"not {self.inner}"


def quantity_value(resource: str, value: Value) -> int:
    """A literal in an allocatable comparison, in the model's units (cpu in millicores)."""
    return to_milli(value) if resource == "cpu" else to_int(value)


@dataclass(frozen=True, slots=True)
class NodeCompare:
    """node <attr> "key" <op> value: text for == and !=, numbers for < <= > >=, quantities for allocatable."""

    attr: str
    key: str
    op: str
    value: Value
    pos: Pos = field(compare=False, hash=False)

    def matches(self, node: Node) -> bool:
        have = node.attribute(self.attr, self.key)
        if have is None and self.attr == "allocatable":
            have = 0  # a node that does not list a resource has none of it
        if have is None:
            return self.op == "!="
        if self.attr == "allocatable":
            try:
                want = quantity_value(self.key, self.value)
            except QuantityError:
                return False
            return compare(float(have), self.op, want)
        if self.op in ("==", "!="):  # labels are text: == compares text, like `in`
            return (str(have) == str(self.value)) == (self.op == "==")
        have_n, want_n = _number(have), _number(self.value)
        return have_n is not None and want_n is not None and compare(have_n, self.op, want_n)

    def __str__(self) -> str:
        return f'node {self.attr} "{self.key}" {self.op} {self.value!r}'


@dataclass(frozen=True, slots=True)
class NodeMember:
    attr: str
    key: str
    op: str  # in / not in
    values: tuple[str, ...]
    pos: Pos = field(compare=False, hash=False)

    def matches(self, node: Node) -> bool:
        have = node.attribute(self.attr, self.key)
        return _set_test(None if have is None else str(have), self.op, self.values)

    def __str__(self) -> str:
        return f'node {self.attr} "{self.key}" {self.op} {list(self.values)}'


@dataclass(frozen=True, slots=True)
class NodeExists:
    attr: str
    key: str
    exists: bool
    pos: Pos = field(compare=False, hash=False)

    def matches(self, node: Node) -> bool:
        if self.attr == "taint":
            present = any(t.key == self.key for t in node.taints)
        else:
            present = node.attribute(self.attr, self.key) is not None
        return present == self.exists

    def __str__(self) -> str:
        return f'node {self.attr} "{self.key}" {"exists" if self.exists else "not exists"}'


@dataclass(frozen=True, slots=True)
class NodeName:
    op: str
    values: tuple[str, ...]
    pos: Pos = field(compare=False, hash=False)

    def matches(self, node: Node) -> bool:
        return _set_test(node.name, self.op, self.values)

    def __str__(self) -> str:
        return f"node name {self.op} {list(self.values)}"


NodeExpr = NodeAnd | NodeOr | NodeNot | NodeCompare | NodeMember | NodeExists | NodeName


# --- statements -----------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Scope:
    expr: PodExpr
    pos: Pos


@dataclass(frozen=True, slots=True)
class NodeRequirement:
    """require / forbid (hard) and prefer / avoid (soft, weighted)."""

    verb: str  # require, forbid, prefer, avoid
    expr: NodeExpr
    weight: float | None
    pos: Pos


@dataclass(frozen=True, slots=True)
class LessFragmentation:
    """prefer less fragmentation of device class "c" weight W: nodes where a pod of the scope grows the expected
    fragmentation of the class's devices least (the FGD paper's measure, engine.kinds.fragmentation)."""

    device_class: str
    weight: float
    pos: Pos


@dataclass(frozen=True, slots=True)
class TaintPattern:
    key: str  # "" with exists=True: every taint
    value: str | None  # None: any value (operator Exists)
    effect: str  # "" = every effect
    pos: Pos


@dataclass(frozen=True, slots=True)
class Tolerate:
    taints: tuple[TaintPattern, ...]
    pos: Pos


@dataclass(frozen=True, slots=True)
class Minimize:
    attr: str
    key: str
    weight: float
    pos: Pos


@dataclass(frozen=True, slots=True)
class Price:
    """A node's price per unit of a resource (cpu: per core; memory and storage: per GiB; others: per unit)."""

    resource: str
    attr: str
    key: str
    pos: Pos


@dataclass(frozen=True, slots=True)
class MinimizeCost:
    """minimize cost "cpu" at node annotation "k", …: what the pod's requests would cost on each node."""

    prices: tuple[Price, ...]
    weight: float
    pos: Pos


@dataclass(frozen=True, slots=True)
class SameLabel:
    key: str
    pos: Pos


@dataclass(frozen=True, slots=True)
class PodsWhere:
    expr: PodExpr
    pos: Pos


@dataclass(frozen=True, slots=True)
class Domain:
    """A topology domain: a node label key (`per node` is kubernetes.io/hostname)."""

    key: str
    pos: Pos


@dataclass(frozen=True, slots=True)
class Proximity:
    """separate from … (anti) / keep with … (together); hard unless weighted."""

    anti: bool
    pods: SameLabel | PodsWhere
    domain: Domain
    weight: float | None
    pos: Pos


@dataclass(frozen=True, slots=True)
class AtLeastPer:
    """with at least N per D: a domain of D that holds a member of the gang holds at least N of them."""

    least: int
    domain: Domain
    pos: Pos


@dataclass(frozen=True, slots=True)
class GangBy:
    """gang by label "k" min N [within D] [prefer within D1, D2…] [with at least K per D3], or the same by podgroup
    (the PodGroup keeps its minMember and adds these to its own topology), or by workload (each pod's Job, JobSet,
    … is its gang, of the size its object says: engine.model.workload_gangs)."""

    label: str  # "" for a PodGroup
    min_member: int  # 0 for a PodGroup
    pos: Pos
    within: Domain | None = None  # all members in one domain of this topology key
    prefer: tuple[Domain, ...] = ()  # the fewest domains of each, the first first
    least: AtLeastPer | None = None
    device: DeviceAttribute | None = None  # all members' devices in one value of this device attribute
    workload: bool = False  # by workload (label "", min_member 0)


@dataclass(frozen=True, slots=True)
class DeviceAttribute:
    """`within device attribute "gpu.example.com/clique"`: a DRA device attribute as a gang's domain."""

    name: str
    pos: Pos


@dataclass(frozen=True, slots=True)
class AtMost:
    """at most K per domain of pods …: no domain hosting the pod holds more than K of them."""

    most: int
    domain: Domain
    pods: SameLabel | PodsWhere
    pos: Pos


@dataclass(frozen=True, slots=True)
class PackOrSpread:
    """pack nodes (each node the batch starts using costs `weight`) / spread nodes (earns it)."""

    pack: bool
    weight: float
    pos: Pos


@dataclass(frozen=True, slots=True)
class Protect:
    """protect from preemption: no pod in scope is ever chosen as a victim."""

    pos: Pos


@dataclass(frozen=True, slots=True)
class EvictionsPerCycle:
    """at most N evictions [per namespace] per cycle: victims in scope, counted in total or per namespace."""

    most: int
    per_namespace: bool
    pos: Pos


@dataclass(frozen=True, slots=True)
class DefaultSpread:
    """One soft spread of `default spreading …`: max skew per domain."""

    domain: Domain
    max_skew: int
    pos: Pos


@dataclass(frozen=True, slots=True)
class DefaultSpreadingRule:
    """default spreading off / default spreading per zone max skew 2, …: replaces upstream's system-default
    spreading (per node max skew 3, per zone max skew 5) for the pods in scope that it applies to."""

    spreads: tuple[DefaultSpread, ...]  # () is off
    pos: Pos


@dataclass(frozen=True, slots=True)
class Amount:
    """"cpu" 4 / "memory" "64Gi": an amount of one resource, as written."""

    resource: str
    value: Value
    pos: Pos

    def quantity(self) -> int:
        """In the model's units (cpu in millicores); raises QuantityError for a malformed one."""
        return quantity_value(self.resource, self.value)


@dataclass(frozen=True, slots=True)
class QuotaAmounts:
    """quota min … / quota max …: the tenant's guaranteed amounts, or the cap over every pod in scope."""

    bound: str  # "min" or "max"
    amounts: tuple[Amount, ...]
    pos: Pos


@dataclass(frozen=True, slots=True)
class QuotaWeight:
    """quota weight N: the tenant's weight in fair sharing (its dominant share is divided by it)."""

    weight: float
    pos: Pos


@dataclass(frozen=True, slots=True)
class Runtime:
    """runtime 4h: the pods in scope run at most this long unless their spec says (activeDeadlineSeconds)."""

    seconds: int
    pos: Pos


@dataclass(frozen=True, slots=True)
class Reserve:
    """reserve at most N within 1d: the pods in scope hold at most N reservations at once, none further ahead."""

    most: int
    horizon: int  # seconds
    pos: Pos


Statement = (Scope | NodeRequirement | Tolerate | Minimize | MinimizeCost | Proximity | GangBy | AtMost | PackOrSpread
             | Protect | EvictionsPerCycle | DefaultSpreadingRule | QuotaAmounts | QuotaWeight | Runtime | Reserve
             | LessFragmentation)


@dataclass(frozen=True, slots=True)
class Policy:
    name: str
    statements: tuple[Statement, ...]
    pos: Pos

    @property
    def scope(self) -> Scope | None:
        return next((s for s in self.statements if isinstance(s, Scope)), None)
