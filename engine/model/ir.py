"""The rule IR: one kind of object per constraint kind, whatever wrote it.

A pod's own spec (the pod-spec front end) and a policy (the DSL front end) both produce these; the
compiler turns each kind into solver constraints exactly once. Every constraint says where it came from
(`Source`) so explanations can cite it, and is hashable so pods with equal constraints share a class.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from .cluster import POD_GROUP_LABEL, Node, NodeSelectorTerm, Pod, Quota, SpreadConstraint, Toleration

if TYPE_CHECKING:
    from ..sharing.fragmentation import TaskShape


class NodePredicate(Protocol):
    """Anything hashable that accepts or rejects a node: pod-spec NodeTerms, or a policy expression."""

    def matches(self, node: Node) -> bool: ...


class PodTerm(Protocol):
    """Which pods, within which topology domain: a pod spec's PodAffinityTerm or a policy's pod set.

    `label_keys` names every pod label `matches` may read, so the compiler can tell which labels can
    split pods into different classes (None: any label).
    """

    @property
    def topology_key(self) -> str: ...

    @property
    def selector(self) -> object: ...  # what explanations print of it

    def matches(self, pod: Pod) -> bool: ...

    def label_keys(self) -> frozenset[str] | None: ...


@dataclass(frozen=True, slots=True)
class Source:
    """Where a constraint came from: a pod field path, or a policy file:line:col."""

    where: str
    policy: bool = False
    file: str = ""  # for policy rules: where to point a diagnostic
    line: int = 0

    def __str__(self) -> str:
        return self.where

    @property
    def cite(self) -> str:
        """' (file:line (policy name))' to append to a rejection reason; '' for a pod's own spec."""
        return f" ({self.where})" if self.policy else ""


@dataclass(frozen=True, slots=True)
class NodeTerms:
    """A node predicate: terms ORed, each term's requirements ANDed (nodeAffinity's shape)."""

    terms: tuple[NodeSelectorTerm, ...]

    def matches(self, node: Node) -> bool:
        return any(t.matches(node) for t in self.terms)


@dataclass(frozen=True, slots=True)
class NodeRule:
    """Hard (weight None): the node must match. Soft: `weight` added to the score of matching nodes.

    `reason` is a policy's words for a node it rejects; "" for a pod's own node affinity and nodeSelector,
    which are rejected in upstream's words (engine.kinds.node_affinity)."""

    predicate: NodePredicate
    weight: int | None
    reason: str
    source: Source


@dataclass(frozen=True, slots=True)
class Tolerations:
    """Taints these tolerate stop repelling the pod (a pod's own and any a policy grants add up)."""

    tolerations: tuple[Toleration, ...]
    source: Source


@dataclass(frozen=True, slots=True)
class PodProximity:
    """Keep the pod in (or, `anti`, out of) the topology domains of pods matching `term`.

    Hard when weight is None; soft terms add/subtract `weight` per domain shared.
    """

    term: PodTerm
    anti: bool
    weight: int | None
    source: Source


@dataclass(frozen=True, slots=True)
class SpreadRule:
    spread: SpreadConstraint
    source: Source


WORKLOAD = "<workload>"  # a GangRule's `label` for `gang by workload`: the pod's workload is its gang


@dataclass(frozen=True, slots=True)
class GangRule:
    """A policy's gang statement as seen from one pod in its scope (`gang by label` / `gang by podgroup within`).

    Not a placement constraint of its own: engine.model.gangs turns these, with the pod's own PodGroup, into the
    cluster's gang identity (model.Gang) once, when the cluster is built. Members are the pods of the
    namespace whose label `label` has the value `value`; `min_member` 0 only adds `within` to a PodGroup gang, or
    (label WORKLOAD) makes the pod's workload its gang (engine.model.workload_gangs).
    """

    group: str  # namespace/label=value, or namespace/name of the PodGroup
    min_member: int
    source: Source
    namespace: str = ""
    label: str = POD_GROUP_LABEL
    value: str = ""
    within: str | None = None  # topology key: every member in one domain of it
    prefer: tuple[str, ...] = ()  # topology keys: the fewest domains of each, the first first
    least: tuple[str, int] | None = None  # (key, n): a domain of key holding a member holds at least n
    device_within: str | None = None  # device attribute: every member's devices in one value of it


@dataclass(frozen=True, slots=True)
class NodeScore:
    """Soft: prefer nodes with a low number under a label, annotation or allocatable resource.

    The cheapest candidate node scores 0 and the dearest −weight, linearly in between; a node without a
    numeric value counts as the dearest.
    """

    attr: str
    key: str
    weight: int
    source: Source


@dataclass(frozen=True, slots=True)
class PodCost:
    """Soft: prefer nodes where the pod's requests cost least, from per-unit prices on each node
    (`prices`: (resource, node attribute kind, key)); cheapest candidate 0, dearest −weight."""

    prices: tuple[tuple[str, str, str], ...]
    weight: int
    source: Source


@dataclass(frozen=True, slots=True)
class CountLimit:
    """Hard: every topology domain hosting the pod holds at most `most` pods matching `term` (itself included)."""

    term: PodTerm
    most: int
    source: Source


@dataclass(frozen=True, slots=True)
class NodeOpening:
    """Soft: each empty node the batch starts using costs `weight` (pack; negative: earns, spread)."""

    weight: int
    source: Source


@dataclass(frozen=True, slots=True)
class FragmentationPreference:
    """Soft: prefer nodes where one pod of the class grows the expected fragmentation of the devices of
    `device_class` least (the FGD paper's measure, engine.kinds.fragmentation): FGD's 0–100 score scaled to
    0–`weight`. `shapes`: the workload's task shapes to weigh (None: the cluster's own pods', running and pending)."""

    device_class: str
    weight: int
    source: Source
    shapes: tuple[TaskShape, ...] | None = None


@dataclass(frozen=True, slots=True)
class DefaultSpreading:
    """A policy's word on system-default spreading for the pods in scope: these (topology key, maxSkew) soft
    spreads instead of upstream's two (none: off). Settled into SpreadRules by podspec before any kind sees it."""

    spreads: tuple[tuple[str, int], ...]
    source: Source


Constraint = (NodeRule | Tolerations | PodProximity | SpreadRule | NodeScore | PodCost | CountLimit | NodeOpening
              | DefaultSpreading | FragmentationPreference)


# --- preemption rules: which running pods may be evicted, and how many per cycle -------------------

@dataclass(frozen=True, slots=True)
class Protected:
    """The pod is never a preemption victim."""

    source: Source


@dataclass(frozen=True, slots=True)
class EvictionCap:
    """At most `most` victims per cycle among the pods this cap covers, in total or per namespace."""

    most: int
    per_namespace: bool
    source: Source  # also the cap's identity: two pods under the same statement share its count


VictimRule = Protected | EvictionCap

PlacementRules = Callable[[Pod], tuple[Constraint, ...]]  # a pending pod's policy constraints
RuntimeRules = Callable[[Pod], int | None]  # a pod's runtime estimate in seconds (None: no policy gives one)
# the first `reserve` in scope of a pod: (the statement, for counting, its most, its horizon in seconds), or None
ReserveRules = Callable[[Pod], tuple[str, int, int] | None]
PreemptionRules = Callable[[Pod], tuple[VictimRule, ...]]  # a running pod's protection and eviction caps
GangRules = Callable[[Pod], tuple[GangRule, ...]]  # a pod's policy gang statements, in load order


@dataclass(frozen=True, slots=True)
class Rules:
    """Everything policies add, as hooks over a pod (None: no policy says anything). The pod's own spec
    comes first everywhere; these only add to it."""

    placement: PlacementRules | None = None
    victims: PreemptionRules | None = None
    gangs: GangRules | None = None
    quotas: tuple[Quota, ...] = ()  # policies' quotas, after the cluster's own (ElasticQuotas)
    runtimes: RuntimeRules | None = None  # a pod's runtime estimate when its spec has no activeDeadlineSeconds
    reserving: ReserveRules | None = None  # how many reservations a pod's scope may hold, and how far ahead
