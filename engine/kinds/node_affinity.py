"""NodeAffinity: nodeSelector and required node affinity (and a policy's `require` / `forbid`) keep a pod off
nodes that do not match; preferred terms (and `prefer` / `avoid`) add or take points."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..model.cluster import Node
from ..model.ir import Constraint, NodeRule
from ..model.reasons import Code
from ..model.rejections import Rejection, Rejections
from .base import Action, ClusterEvent, Filter, ModelChange, Requeue, Resource, Score, ScorePart, Waiting

if TYPE_CHECKING:
    from ..planning.classes import ClassInfo
    from .context import Batch, ClassSpec

ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"


def hard_rules(constraints: tuple[Constraint, ...]) -> tuple[NodeRule, ...]:
    """The node rules a class must satisfy (its own and its policies')."""
    return tuple(c for c in constraints if isinstance(c, NodeRule) and c.weight is None)


def rejection(rule: NodeRule) -> Rejection:
    """A hard rule's no: upstream's words for the pod's own affinity, the policy's (cited) for a policy rule."""
    return Rejection(NodeAffinity.name, ((rule.reason or ERR_REASON_POD) + rule.source.cite,), resolvable=False,
                     source=rule.source if rule.source.policy else None)


class NodeAffinity(Filter, Score, Requeue):
    name, code = "NodeAffinity", Code.POLICY
    events = (ClusterEvent(Resource.NODE, Action.ADD | Action.UPDATE_NODE_LABEL),)

    def filter(self, spec: ClassSpec, batch: Batch, out: Rejections) -> None:
        for rule in hard_rules(spec.constraints):
            out.add(rejection(rule), ~batch.view.matching_mask(rule.predicate))

    def hint(self, waiting: Waiting, change: ModelChange) -> bool:
        """A node added or relabelled helps only if it matches every hard rule (the pod's own and its policies')."""
        node = change.new
        return not isinstance(node, Node) or all(rule.predicate.matches(node) for rule in hard_rules(waiting.constraints))

    def score(self, info: ClassInfo, candidates: np.ndarray, batch: Batch) -> list[ScorePart]:
        view = batch.view
        parts = []
        for rule in info.constraints:
            if not isinstance(rule, NodeRule) or rule.weight is None:
                continue
            members = view.matching_mask(rule.predicate)[candidates]  # cached per rule
            what = rule.reason if rule.source.policy else "preferred node affinity"
            parts.append(ScorePart(f"{what} [{rule.source}]", np.where(members, rule.weight, 0)))
        return parts


KIND = NodeAffinity()
