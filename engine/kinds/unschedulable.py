"""NodeUnschedulable: a cordoned node (`spec.unschedulable`) takes no pod unless the pod tolerates the
node.kubernetes.io/unschedulable:NoSchedule taint."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..model.cluster import UNSCHEDULABLE_TAINT_KEY, Node, Taint, tolerated
from ..model.reasons import Code
from ..model.rejections import Rejection, Rejections
from .base import Action, ClusterEvent, Filter, ModelChange, Requeue, Resource, Waiting
from .taints import tolerations

if TYPE_CHECKING:
    from .context import Batch, ClassSpec

ERR_REASON = "node(s) were unschedulable"
CORDON = Taint(UNSCHEDULABLE_TAINT_KEY, "", "NoSchedule")


class NodeUnschedulable(Filter, Requeue):
    name, code = "NodeUnschedulable", Code.POLICY
    events = (ClusterEvent(Resource.NODE, Action.ADD | Action.UPDATE_NODE_TAINT),
              ClusterEvent(Resource.POD, Action.UPDATE_POD_TOLERATION))

    def filter(self, spec: ClassSpec, batch: Batch, out: Rejections) -> None:
        cordoned = batch.view.cordoned
        if cordoned and not tolerated(tolerations(spec.constraints), CORDON):
            out.add(Rejection(self.name, (ERR_REASON,), resolvable=False), cordoned)

    def hint(self, waiting: Waiting, change: ModelChange) -> bool:
        """A node helps only if it is not cordoned, or the pod tolerates the cordon."""
        node = change.new
        return not isinstance(node, Node) or not node.unschedulable or tolerated(tolerations(waiting.constraints), CORDON)


KIND = NodeUnschedulable()
