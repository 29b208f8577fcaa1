"""NodeDeclaredFeatures (GA in 1.37, beta and on in 1.36): a pod whose spec needs a kubelet feature (restart-all
rules, host network in a user namespace, bind mount options: engine.reading.convert.features) goes only to nodes whose
`status.declaredFeatures` lists every one of them. A node declaring none (an older kubelet) takes no such pod."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..model.cluster import Node, Pod
from ..model.reasons import Code
from ..model.rejections import Rejection, Rejections
from .base import Action, ClassFields, ClusterEvent, Filter, ModelChange, Requeue, Resource, Waiting

if TYPE_CHECKING:
    from .context import Batch, ClassSpec

ERR_REASON = "node(s) didn't match Pod's required features"


def lacks(node: Node, required: tuple[str, ...]) -> bool:
    """Whether `node` fails to declare one of the `required` features."""
    return not set(required).issubset(node.declared_features)


class NodeDeclaredFeatures(ClassFields, Filter, Requeue):
    name, code = "NodeDeclaredFeatures", Code.POLICY
    events = (ClusterEvent(Resource.NODE, Action.ADD | Action.UPDATE_NODE_DECLARED_FEATURE),)

    def class_fields(self, pod: Pod) -> tuple:
        return pod.required_features

    def filter(self, spec: ClassSpec, batch: Batch, out: Rejections) -> None:
        required = spec.sample.required_features
        if required:
            bad = [i for i, node in enumerate(batch.view.nodes) if lacks(node, required)]
            if bad:
                out.add(Rejection(self.name, (ERR_REASON,), resolvable=False), bad)

    def hint(self, waiting: Waiting, change: ModelChange) -> bool:
        """A node added or changed helps only if it declares every feature the pod needs."""
        node = change.new
        return not isinstance(node, Node) or not lacks(node, waiting.pod.required_features)


KIND = NodeDeclaredFeatures()
