"""The rule IR: one kind of object per constraint kind, whatever wrote it.

A pod's own spec (the pod-spec front end) and a policy (the DSL front end) both produce these; the
compiler turns each kind into solver constraints exactly once. Every constraint says where it came from
(`Source`) so explanations can cite it, and is hashable so pods with equal constraints share a class.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from .model import Node, NodeSelectorTerm, PodAffinityTerm, SpreadConstraint, Toleration


@dataclass(frozen=True, slots=True)
class Source:
    """Where a constraint came from: a pod field path, or a policy file:line:col."""

    where: str
    policy: bool = False

    def __str__(self) -> str:
        return self.where


@dataclass(frozen=True, slots=True)
class NodeTerms:
    """A node predicate: terms ORed, each term's requirements ANDed (nodeAffinity's shape)."""

    terms: tuple[NodeSelectorTerm, ...]

    def matches(self, node: Node) -> bool:
        return any(t.matches(node) for t in self.terms)


@dataclass(frozen=True, slots=True)
class NodeRule:
    """Hard (weight None): the node must match. Soft: `weight` added to the score of matching nodes."""

    predicate: NodeTerms
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

    term: PodAffinityTerm
    anti: bool
    weight: int | None
    source: Source


@dataclass(frozen=True, slots=True)
class SpreadRule:
    spread: SpreadConstraint
    source: Source


@dataclass(frozen=True, slots=True)
class GangRule:
    """All-or-nothing: at least `min_member` pods of the group (bound ones included) or none."""

    group: str  # namespace/name
    min_member: int
    source: Source


Constraint = Union[NodeRule, Tolerations, PodProximity, SpreadRule, GangRule]
