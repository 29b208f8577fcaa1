"""Why a pod or group waits, as codes a program can read: one documented set (docs/reason-codes.md), each reason's
code given where the reason is made (each constraint kind declares the code of what it says), never parsed back from
the words.

Codes are CamelCase, as Kubernetes condition reasons are (`Unschedulable`, `PodGroupTimeout`): a client that
already matches reasons matches these the same way. The pod's `PodScheduled` condition keeps upstream's reason
`Unschedulable` (the cluster-autoscaler and kubectl read exactly that); the code opens its message instead
(`prefixed`).
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum


class Code(StrEnum):
    """What keeps a pod from a node, in kinds a user can act on; the value is what JSON, conditions and metrics say."""

    CAPACITY = "Capacity"  # no node has the room (resources, host ports)
    FRAGMENTATION = "Fragmentation"  # the room is free in total, but no single node has it
    TOPOLOGY = "Topology"  # a gang's one domain, a topology spread, an inter-pod (anti-)affinity
    QUOTA = "Quota"  # a quota's max, or a tenant's min holding the room for others
    GANG_INCOMPLETE = "GangIncomplete"  # fewer members pending than the group needs
    RESERVED = "Reserved"  # the room is held for another job's reservation (time in the plan)
    POLICY = "Policy"  # a policy rule, node selector or affinity, taints or a cordon exclude the nodes
    DEVICE = "Device"  # DRA devices: none free that the claims' selectors and counters accept
    VOLUME = "Volume"  # volumes: binding, zones, per-node limits, access modes
    PREEMPTION_PENDING = "PreemptionPending"  # placed by evicting lower-priority pods, which are on their way out
    NOT_REACHED = "NotReached"  # the cycle's time ran out before the pod was tried (or tried in full)
    INVALID_OBJECT = "InvalidObject"  # an object the pod depends on is missing or cannot be evaluated
    SCHEDULER_ERROR = "SchedulerError"  # planning this pod failed (the engine's error, upstream's SchedulerError)


# what a user can do next, per code (docs/reason-codes.md has the same table with the meaning)
NEXT_STEP: dict[Code, str] = {
    Code.CAPACITY: "add nodes or free room on them, lower the pod's requests, or raise its priority so it may preempt",
    Code.FRAGMENTATION: "enough is free in total but split across nodes: lower the per-pod request, or consolidate "
                        "(drain or deschedule small pods) so one node has the room",
    Code.TOPOLOGY: "free room in one domain, or relax the gang's domain key, the spread's maxSkew or the (anti-)affinity",
    Code.QUOTA: "wait for the quota's pods to finish, or raise the quota's max (or the tenant's min) named",
    Code.GANG_INCOMPLETE: "create the missing members, or lower the group's minMember/minCount",
    Code.RESERVED: "wait for the reservation to start, or raise the pod's priority above the reserving job's",
    Code.POLICY: "check the rule named, the pod's nodeSelector, affinity and tolerations against the nodes' labels, "
                 "taints and cordons",
    Code.DEVICE: "free or add devices the claims accept, or relax the claims' selectors (check the DeviceClass)",
    Code.VOLUME: "check the PersistentVolumeClaims: bound or bindable, in a zone the nodes are in, within node limits",
    Code.PREEMPTION_PENDING: "nothing: lower-priority pods are being evicted for it; it binds once they are gone",
    Code.NOT_REACHED: "nothing: it is tried again next cycle; a larger --time-limit tries more pods per cycle",
    Code.INVALID_OBJECT: "create or fix the object named (claim, DeviceClass, volume, group)",
    Code.SCHEDULER_ERROR: "report it with the scheduler's log: the pods are refused until planning them succeeds",
}


@dataclass(frozen=True, slots=True)
class Ref:
    """An object a reason names: kind, name and namespace ("" for cluster-scoped objects and policy rules)."""

    kind: str
    name: str
    namespace: str = ""

    @classmethod
    def namespaced(cls, kind: str, key: str) -> Ref:
        """From a "namespace/name" key (a pod's, a group's)."""
        namespace, _, name = key.rpartition("/")
        return cls(kind, name, namespace)

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, **({"namespace": self.namespace} if self.namespace else {}), "name": self.name}


@dataclass(frozen=True, slots=True)
class Cause:
    """One code of a waiting pod: the nodes it kept the pod off (0: said of the pod as a whole) and the objects it
    names."""

    code: Code
    nodes: int = 0
    objects: tuple[Ref, ...] = ()

    def to_dict(self) -> dict[str, object]:
        return {"code": self.code.value, **({"nodes": self.nodes} if self.nodes else {}),
                "objects": [o.to_dict() for o in self.objects], "next": NEXT_STEP[self.code]}


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """A waiting pod's (or group's) causes, the dominant one first, each code once."""

    causes: tuple[Cause, ...]

    @property
    def code(self) -> Code:
        return self.causes[0].code

    @classmethod
    def of(cls, causes: Iterable[Cause]) -> Diagnosis:
        """Causes in the order given, a code said twice merged into its first (nodes added, objects joined)."""
        merged: dict[Code, Cause] = {}
        for cause in causes:
            if (old := merged.get(cause.code)) is None:
                merged[cause.code] = cause
            else:
                objects = old.objects + tuple(o for o in cause.objects if o not in old.objects)
                merged[cause.code] = Cause(cause.code, old.nodes + cause.nodes, objects)
        return cls(tuple(merged.values()))

    @classmethod
    def one(cls, code: Code, objects: tuple[Ref, ...] = ()) -> Diagnosis:
        return cls((Cause(code, 0, objects),))

    def first(self, cause: Cause) -> Diagnosis:
        """`cause` made the dominant one (the rest keep their order)."""
        return Diagnosis.of((cause, *self.causes))

    def to_dict(self) -> dict[str, object]:
        return {"code": self.code.value, "causes": [c.to_dict() for c in self.causes]}


PREFIX = re.compile(r"^\[([A-Za-z]+)\] ")  # how a condition's message opens with its code (`prefixed`)
# …and then, for a pod the plan has a time for, its `ExpectedStart` ("[start=2026-11-29T12:20:00Z reserved=n3] ")
EXPECTED = re.compile(r"^\[[A-Za-z]+\] \[((?:[a-z]+=[^\s\]]+ ?)+)\] ")
NEXT_CYCLE = "next-cycle"  # the start of a pod that lost only to its own batch's competition


@dataclass(frozen=True, slots=True)
class ExpectedStart:
    """When a waiting pod is expected to start, as its condition's message says it for programs (the `queue` view):
    the reservation's start and node when room is held for it, else its estimate; `next_cycle` when it lost only to
    its batch's competition. A pod the plan has no time for has none."""

    start: float | None = None  # seconds since the epoch
    reserved: str = ""  # the node its reservation holds room on ("": no reservation)
    next_cycle: bool = False

    def start_text(self) -> str | None:
        """The start as the message says it: RFC3339, or `next-cycle` (None: not known)."""
        return NEXT_CYCLE if self.next_cycle else None if self.start is None else _rfc3339(self.start)

    def tag(self) -> str:
        """`start=RFC3339` (or `start=next-cycle`) and `reserved=NODE`, space-separated ("" when it says nothing)."""
        pairs = (("start", self.start_text()), ("reserved", self.reserved))
        return " ".join(f"{key}={value}" for key, value in pairs if value)

    @classmethod
    def parse(cls, message: str) -> ExpectedStart | None:
        """The expected start a `prefixed` message carries (None: it has none)."""
        found = EXPECTED.match(message)
        if found is None:
            return None
        fields = dict(item.split("=", 1) for item in found.group(1).split())
        start = fields.get("start")
        try:
            at = None if start in (None, NEXT_CYCLE) else datetime.datetime.strptime(
                str(start), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC).timestamp()
        except ValueError:
            return None
        return cls(at, fields.get("reserved", ""), start == NEXT_CYCLE)


def prefixed(code: Code, message: str, expected: ExpectedStart | None = None) -> str:
    """A condition message opened with its code, in the one fixed form a program can parse ("[Capacity] 0/3 nodes
    are available: …"): the condition's reason stays upstream's. An `expected` start follows the code in a second bracket
    ("[Capacity] [start=2026-11-29T12:20:00Z reserved=n3] 0/3 nodes …"), before the words, so a message cut at the
    API's limit keeps it."""
    tag = expected.tag() if expected is not None else ""
    return f"[{code.value}] [{tag}] {message}" if tag else f"[{code.value}] {message}"


def code_of(message: str) -> Code | None:
    """The code a `prefixed` message opens with (None: it has none)."""
    found = PREFIX.match(message)
    return Code(found.group(1)) if found and found.group(1) in Code._value2member_map_ else None


def words_of(message: str) -> str:
    """A `prefixed` message's words, without its code and expected start."""
    found = EXPECTED.match(message) or PREFIX.match(message)
    return message[found.end():] if found else message


def _rfc3339(at: float) -> str:
    return datetime.datetime.fromtimestamp(at, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
