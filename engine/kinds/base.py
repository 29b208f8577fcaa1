"""The protocol every constraint kind implements, and the cluster events a kind can name.

A kind is one module (kube-scheduler's plugin, DCM's function per policy): a static filter over every node at
once with typed rejections, a soft score, an emitter of rows into the solver's problem, the words for the
starting plans' checks its rows fail (`Check`), and the cluster events that can make a pod it rejected
schedulable. Phases a kind has nothing to say in keep the base's no-op. `engine.kinds.KINDS` lists them in
upstream's filter order; compile, explain, preemption and the loop iterate that list and name no kind.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum, Flag, auto
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from ..ir import Constraint, EvictionCap, PreemptionRules, Source
from ..model import Cluster, Node, Pod
from ..rejections import Rejection, Rejections
from ..solve.greedy import GreedyState
from ..solve.problem import Blocker, Check

if TYPE_CHECKING:
    from ..classes import ClassInfo
    from ..compile import Compiled
    from ..solve.problem import Solution
    from ..view import View
    from .context import Batch, ClassSpec, ProblemBuilder


class Resource(Enum):
    """What changed in the cluster (upstream's framework.EventResource, the kinds we watch)."""

    NODE = "Node"
    POD = "Pod"  # a pod: bound ones for most kinds; a gang's new pending member for Coscheduling
    POD_GROUP = "PodGroup"
    PERSISTENT_VOLUME = "PersistentVolume"
    PERSISTENT_VOLUME_CLAIM = "PersistentVolumeClaim"
    STORAGE_CLASS = "StorageClass"
    CSI_NODE = "CSINode"
    CSI_DRIVER = "CSIDriver"
    CSI_STORAGE_CAPACITY = "CSIStorageCapacity"
    NAMESPACE = "Namespace"  # its labels: a namespaceSelector may select it now
    PRIORITY_CLASS = "PriorityClass"  # no kind asks; a pod skipped for its missing class waits for one
    RESOURCE_CLAIM_TEMPLATE = "ResourceClaimTemplate"
    ELASTIC_QUOTA = "ElasticQuota"
    RESOURCE_CLAIM = "ResourceClaim"
    RESOURCE_SLICE = "ResourceSlice"
    DEVICE_CLASS = "DeviceClass"


class Action(Flag):
    """How it changed (upstream's framework.ActionType)."""

    ADD = auto()
    DELETE = auto()
    UPDATE_NODE_ALLOCATABLE = auto()
    UPDATE_NODE_LABEL = auto()
    UPDATE_NODE_TAINT = auto()  # taints, and spec.unschedulable (upstream counts it as a taint change)
    UPDATE_NODE_DECLARED_FEATURE = auto()  # status.declaredFeatures
    UPDATE_POD_LABEL = auto()
    UPDATE_POD_SCALE_DOWN = auto()
    UPDATE_POD_TOLERATION = auto()
    UPDATE = auto()  # any other update (a PodGroup's spec)


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    """A change that may make a pod a kind rejected schedulable (upstream's EventsToRegister entries)."""

    resource: Resource
    actions: Action

    def covers(self, resource: Resource, action: Action) -> bool:
        return resource == self.resource and bool(action & self.actions)


@dataclass(frozen=True, slots=True)
class ModelChange:
    """One change of the cluster in the model's words, for the queueing hints: a node added or changed (`old`,
    `new` Nodes), or a pod that holds a node appearing, leaving or changing (Pods, with `node` the node it is or
    was on); None where there is none (other kinds of objects are not modelled here)."""

    resource: Resource
    action: Action
    old: Node | Pod | None = None
    new: Node | Pod | None = None
    node: Node | None = None


@dataclass(frozen=True, slots=True)
class Waiting:
    """A pod left unplaced, as the scheduler loop's queue keeps it for the queueing hints: the pod, its class's
    rules (its own and its policies'), and the nodes where it could go once what rejected it there clears (they
    passed every filter, or were rejected only for reasons that running pods leaving can clear)."""

    pod: Pod
    constraints: tuple[Constraint, ...]
    nodes: frozenset[str]


@dataclass(frozen=True, slots=True)
class ScorePart:
    """One soft term in words, with its points for one pod of a class on each candidate node."""

    label: str
    points: np.ndarray


@dataclass(frozen=True, slots=True)
class Guard:
    """What a running pod's rules say about evicting it: protected (by which rule), and the eviction caps
    that count it."""

    protected: Source | None = None
    caps: tuple[EvictionCap, ...] = ()


class ReadsPods:
    """A kind whose Filter reads the pods a view holds (upstream's plugins with PreFilterExtensions AddPod/RemovePod:
    room, ports, pod affinity, spread, limits, reservations, volumes in use): preemption asks it again on a node after
    each trial, and a later time's view after pods end. The others' verdicts are the same whichever pods are bound."""


class Kind:
    """A constraint kind. `name` is the upstream plugin it follows (or ours), used in rejections;
    `events` what may help a pod it rejected; `checks` the starting-plan checks its rows raise."""

    name: ClassVar[str] = ""
    events: ClassVar[tuple[ClusterEvent, ...]] = ()
    checks: ClassVar[tuple[Check, ...]] = ()

    def label_keys(self, rule_sets: list[tuple[Constraint, ...]], view: View) -> Iterable[frozenset[str] | None]:
        """Pod labels this kind's selectors read (None: cannot say): pods differing only in other labels share
        a class."""
        return ()

    def class_fields(self, pod: Pod) -> tuple:
        """What of a pod, beyond its rules, namespace, priority and the labels selectors read, this kind's verdicts
        read: pods that differ there never share a class (a kind reading a new field says so here, not in classes)."""
        return ()

    def class_fields_in(self, cluster: Cluster, view: View) -> Callable[[Pod], tuple]:
        """`class_fields` as this cluster needs them: a kind that decides less there may read less (and split no
        pods into classes that would otherwise be one)."""
        return self.class_fields

    def prefilter(self, spec: ClassSpec, batch: Batch) -> Rejection | None:
        """A verdict for every node at once, before any filter runs (upstream's PreFilter failing): the pod
        cannot be placed anywhere now, whatever the node."""
        return None

    def filter(self, spec: ClassSpec, batch: Batch, out: Rejections) -> None:
        """Reject, in bulk, the nodes no pod of the class can use given only the bound pods."""

    def score(self, info: ClassInfo, candidates: np.ndarray, batch: Batch) -> list[ScorePart]:
        """Soft points of one pod of the class on each candidate node (terms worth nothing left out)."""
        return []

    def emit(self, build: ProblemBuilder) -> None:
        """Append this kind's rows to the solver's problem, for every checked class."""

    def explain(self, blocker: Blocker, spot: Spot) -> str:
        """Why one more pod cannot go on a node in the batch's plan, for a check of `checks`."""
        raise NotImplementedError(f"{self.name} raises no {blocker.check}")

    def pre_filter(self, compiled: Compiled, c: int) -> str | None:
        """Upstream's PreFilter rejection of the whole class before any node is looked at (a gang short of
        members): the pod is told this alone, without node counts, so its message stays the same while the
        cluster changes around it; None lets the class through."""
        return None

    def class_reason(self, compiled: Compiled, solution: Solution, c: int, state: GreedyState) -> tuple[str, bool] | None:
        """A reason for the whole class rather than node by node (a gang that did not start), and whether
        the rest of the batch is to blame; None when the kind has nothing to say. `state` is the plan replayed
        (to try pods beside it; leave it as found)."""
        return None

    def hint(self, waiting: Waiting, change: ModelChange) -> bool:
        """Upstream's QueueingHint, for a change one of `events` covers: could it make `waiting` schedulable as far
        as this kind is concerned? True unless the kind can tell it cannot (a node too small, taints not
        tolerated, a pod leaving that no rule of the pod counts)."""
        return True

    def guard(self, pod: Pod, rules: PreemptionRules | None) -> Guard:
        """What this kind's rules say about evicting running `pod` to make room."""
        return Guard()

    def reserving(self, compiled: Compiled) -> bool:
        """Whether `reserve` has anything to do for this batch (the plan skips pairing pods with nodes if none
        has)."""
        return False

    def reserve(self, compiled: Compiled, placements: list[tuple[Pod, Node]],
                reserved: dict[str, dict[str, object]]) -> dict[str, str]:
        """Upstream's Reserve, after the solve: claim what the placed pods need (in placement order), record it
        in `reserved[pod key][kind name]` for the binder, and return the pods that cannot be served after all,
        with why (the plan takes them out, and their gang with them)."""
        return {}


@dataclass(frozen=True, slots=True)
class Spot:
    """One more pod of class `c` on a node of a plan: what a Blocker's explanation reads."""

    c: int
    demand: dict[str, int]
    free: dict[str, int]
    taken: int = 0  # a BUDGET blocker: what the plan's pods of the class's group take of the row
