"""The phases a constraint kind takes part in, each a small protocol, and the cluster events a kind can name.

A kind is one module (kube-scheduler's plugin, DCM's function per policy) whose class inherits `Kind` (its `name`)
and the phases it implements, as upstream's plugins implement PreFilterPlugin, FilterPlugin, ScorePlugin,
ReservePlugin, EnqueueExtensions: what splits pod classes (`ClassLabels`, `ClassFields`), a verdict for every node at
once (`PreFilter`), a filter over every node at once with typed rejections (`Filter`; `ReadsPods` when the pods a view
holds sway it), soft points (`Score`), rows of the solver's problem (`Emit`), the words for the starting plans' checks
its rows fail (`Explain`), a reason for a whole class (`ClassReason`), the cluster events that can help a pod it
rejected (`Requeue`), a word on evicting a running pod (`EvictionGuard`), and claims after the solve (`ReserveAfterSolve`). A kind
has no method of a phase it does not declare, and a phase's abstract methods must be defined to declare it.
`engine.kinds` lists the kinds in upstream's order and, per phase, those that take part (found by `isinstance`);
compile, explain, plan, preemption and the loop iterate a phase's tuple and name no kind.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum, Flag, auto
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from ..model.cluster import Cluster, Moment, Node, Pod
from ..model.ir import Constraint, EvictionCap, PreemptionRules, Source
from ..model.reasons import Code
from ..model.rejections import Rejection, Rejections
from ..solve.greedy import GreedyState
from ..solve.problem import Blocker, Check

if TYPE_CHECKING:
    from ..model.view import View
    from ..planning.classes import ClassInfo
    from ..planning.compile import Compiled
    from ..solve.problem import Solution
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
    """One soft term in words, with its points for one pod of a class on each candidate node. `marginal`: the points
    a pod would earn alone on the node, shown by explain, while the solver asks the kind's marginal scores
    (engine.solve.problem.MarginalScores) pod by pod instead, so they are no part of the class's scores."""

    label: str
    points: np.ndarray
    marginal: bool = False


@dataclass(frozen=True, slots=True)
class Guard:
    """What a running pod's rules say about evicting it: protected (by which rule), and the eviction caps
    that count it."""

    protected: Source | None = None
    caps: tuple[EvictionCap, ...] = ()


class Kind:
    """A constraint kind: `name` is the upstream plugin it follows (or ours), used in its rejections. What else it does
    is the phases below that its class inherits; it has no method of a phase it does not declare. `code` is the reason
    code (engine.model.reasons) of what it says: its rejections' and its checks' (a rejection may name another)."""

    name: ClassVar[str] = ""
    code: ClassVar[Code] = Code.POLICY


class ClassLabels(Kind, ABC):
    """Its selectors read pod labels: pods differing only in labels no kind reads share a class."""

    @abstractmethod
    def label_keys(self, rule_sets: list[tuple[Constraint, ...]], view: View) -> Iterable[frozenset[str] | None]:
        """The pod labels this kind's selectors in these rule sets read (None: cannot say)."""


class ClassFields(Kind, ABC):
    """Its verdicts read a pod field beyond its rules, namespace, priority and the labels selectors read: pods that
    differ there never share a class (a kind reading a new field says so here, not in classes)."""

    @abstractmethod
    def class_fields(self, pod: Pod) -> tuple:
        """What of `pod` this kind's verdicts read."""

    def class_fields_in(self, cluster: Cluster, moment: Moment, view: View) -> Callable[[Pod], tuple]:
        """`class_fields` as this cluster, planned at `moment`, needs them: a kind that decides less there may read
        less (and split no pods into classes that would otherwise be one)."""
        return self.class_fields


class PreFilter(Kind, ABC):
    """Upstream's PreFilter: a verdict for every node at once, before any filter runs."""

    @abstractmethod
    def prefilter(self, spec: ClassSpec, batch: Batch) -> Rejection | None:
        """Why no pod of the class can be placed anywhere now, whatever the node (None: let it through). Compile
        rejects every node with it and runs no filter; explain says it alone, without node counts."""


class Filter(Kind, ABC):
    """Upstream's Filter, for every node at once."""

    @abstractmethod
    def filter(self, spec: ClassSpec, batch: Batch, out: Rejections) -> None:
        """Reject, in bulk, the nodes of `out` no pod of the class can use on the batch's view."""


class ReadsPods(Filter):
    """A Filter that reads the pods a view holds (upstream's plugins with PreFilterExtensions AddPod/RemovePod:
    room, ports, pod affinity, spread, limits, reservations, volumes in use): preemption asks it again on a node after
    each trial, and a later time's view after pods end. The others' verdicts are the same whichever pods are bound."""


class Score(Kind, ABC):
    """Upstream's Score: soft points, in words."""

    @abstractmethod
    def score(self, info: ClassInfo, candidates: np.ndarray, batch: Batch) -> list[ScorePart]:
        """Soft points of one pod of the class on each candidate node (terms worth nothing left out)."""


class Emit(Kind, ABC):
    """Rows of the solver's problem: what the batch placed together must respect."""

    @abstractmethod
    def emit(self, build: ProblemBuilder) -> None:
        """Append this kind's rows to the solver's problem, for every checked class."""


class Explain(Kind, ABC):
    """Its rows raise starting-plan checks (`checks`; each check has one kind), said in its words."""

    checks: ClassVar[tuple[Check, ...]] = ()

    @abstractmethod
    def explain(self, blocker: Blocker, spot: Spot) -> str:
        """Why one more pod cannot go on a node in the batch's plan, for a check of `checks`."""


class ClassReason(Kind, ABC):
    """A reason for a whole class rather than node by node (a gang that did not start)."""

    @abstractmethod
    def class_reason(self, compiled: Compiled, solution: Solution, c: int, state: GreedyState) -> tuple[str, bool] | None:
        """The reason, and whether the rest of the batch is to blame; None when the kind has nothing to say. `state`
        is the plan replayed (to try pods beside it; leave it as found)."""

    def class_code(self, compiled: Compiled, c: int, crowded: bool) -> Code:
        """The code of the reason `class_reason` just gave for class c (`crowded`: the batch is to blame)."""
        return self.code


class Requeue(Kind):
    """Upstream's EnqueueExtensions: the cluster events that can make a pod this kind rejected schedulable (`events`),
    and its QueueingHint for them. The loop's queue wakes a pod only then (`engine.kinds.helped_by`)."""

    events: ClassVar[tuple[ClusterEvent, ...]] = ()

    def hint(self, waiting: Waiting, change: ModelChange) -> bool:
        """For a change one of `events` covers: could it make `waiting` schedulable as far as this kind is
        concerned? True unless the kind can tell it cannot (a node too small, taints not tolerated, a pod leaving
        that no rule of the pod counts), as upstream's event without a hint function."""
        return True


class EvictionGuard(Kind, ABC):
    """Its rules have a word on evicting running pods (protection, eviction caps): preemption asks it of each
    candidate victim."""

    @abstractmethod
    def guard(self, pod: Pod, rules: PreemptionRules | None) -> Guard:
        """What this kind's rules say about evicting running `pod` to make room."""


class ReserveAfterSolve(Kind, ABC):
    """Upstream's Reserve, after the solve: claim concretely what the placed pods need."""

    @abstractmethod
    def reserving(self, compiled: Compiled) -> bool:
        """Whether `reserve` has anything to do for this batch (the plan skips pairing pods with nodes if none
        has)."""

    @abstractmethod
    def reserve(self, compiled: Compiled, placements: list[tuple[Pod, Node]],
                reserved: dict[str, dict[str, object]]) -> dict[str, str]:
        """Claim what the placed pods need (in placement order), record it in `reserved[pod key][kind name]` for the
        binder, and return the pods that cannot be served after all, with why (the plan takes them out, and their
        gang with them)."""


PHASES: tuple[type[Kind], ...] = (ClassLabels, ClassFields, PreFilter, Filter, ReadsPods, Score, Emit, Explain,
                                  ClassReason, Requeue, EvictionGuard, ReserveAfterSolve)
"""Every phase protocol: a kind class inherits those it takes part in."""


@dataclass(frozen=True, slots=True)
class Spot:
    """One more pod of class `class_index` on a node of a plan: what a Blocker's explanation reads."""

    class_index: int
    demand: dict[str, int]
    free: dict[str, int]
    taken: int = 0  # a BUDGET blocker: what the plan's pods of the class's group take of the row
