"""TaintToleration: NoSchedule and NoExecute taints repel pods that do not tolerate them; PreferNoSchedule
only costs points. A pod's own tolerations and any a policy grants (`tolerate`) add up."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..model.cluster import HARD_EFFECTS, Node, Taint, Toleration, tolerated
from ..model.ir import Constraint, Tolerations
from ..model.reasons import Code
from ..model.rejections import Rejection, Rejections
from .base import Action, ClusterEvent, Filter, ModelChange, Requeue, Resource, Score, ScorePart, Waiting

if TYPE_CHECKING:
    from ..model.view import View
    from ..planning.classes import ClassInfo
    from .context import Batch, ClassSpec

PREFER_NO_SCHEDULE_PENALTY = 50  # per untolerated PreferNoSchedule taint, on the 1..100 preference scale


def tolerations(constraints: tuple[Constraint, ...]) -> tuple[Toleration, ...]:
    """Every toleration the class has: its own and those policies grant."""
    return tuple(t for c in constraints if isinstance(c, Tolerations) for t in c.tolerations)


def untolerated(taint: Taint) -> str:
    return f"node(s) had untolerated taint {taint}"


def repelling(taints: tuple[Taint, ...], have: tuple[Toleration, ...]) -> Taint | None:
    """The first NoSchedule/NoExecute taint `have` does not tolerate (upstream's order), or None."""
    return next((t for t in taints if t.effect in HARD_EFFECTS and not tolerated(have, t)), None)


class TaintToleration(Filter, Score, Requeue):
    name, code = "TaintToleration", Code.POLICY
    events = (ClusterEvent(Resource.NODE, Action.ADD | Action.UPDATE_NODE_TAINT),
              ClusterEvent(Resource.POD, Action.UPDATE_POD_TOLERATION))

    def filter(self, spec: ClassSpec, batch: Batch, out: Rejections) -> None:
        have = tolerations(spec.constraints)
        for taints, members in batch.view.taint_groups().items():  # nodes with equal taints answer alike
            taint = repelling(taints, have)
            if taint is not None:
                out.add(Rejection(self.name, (untolerated(taint),), resolvable=False), members)

    def hint(self, waiting: Waiting, change: ModelChange) -> bool:
        """A node added or retainted helps only if the pod (with what its policies grant) tolerates its taints."""
        if not isinstance(change.new, Node):
            return True
        return repelling(change.new.taints, tolerations(waiting.constraints)) is None

    def score(self, info: ClassInfo, candidates: np.ndarray, batch: Batch) -> list[ScorePart]:
        view = batch.view
        if not view.soft_tainted:
            return []
        return [ScorePart("untolerated PreferNoSchedule taint(s)", _prefer_no_schedule(info, view)[candidates])]


def _prefer_no_schedule(info: ClassInfo, view: View) -> np.ndarray:
    """Per node: the penalty of its PreferNoSchedule taints the class does not tolerate (one check per
    distinct taint set)."""
    out = np.zeros(len(view.nodes), dtype=np.int64)
    have = tolerations(info.constraints)
    for taints, members in view.taint_groups().items():
        count = sum(1 for t in taints if t.effect == "PreferNoSchedule" and not tolerated(have, t))
        if count:
            out[members] = -PREFER_NO_SCHEDULE_PENALTY * count
    return out


KIND = TaintToleration()
