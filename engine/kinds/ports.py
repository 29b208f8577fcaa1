"""NodePorts: no two pods on one node with the same (protocol, hostPort) and overlapping host IPs. Against the
bound pods a static filter; within the batch one pod per node of a class with host ports, and classes sharing a
port in one exclusive group."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from ..model.cluster import Pod
from ..model.reasons import Code
from ..model.rejections import Rejection, Rejections
from ..solve.problem import Blocker, Check
from .base import Action, ClassFields, ClusterEvent, Emit, Explain, ModelChange, ReadsPods, Requeue, Resource, Spot, Waiting

if TYPE_CHECKING:
    from .context import Batch, ClassSpec, ProblemBuilder

ERR_REASON = "node(s) didn't have free ports for the requested pod ports"


class NodePorts(ClassFields, ReadsPods, Emit, Explain, Requeue):
    name, code = "NodePorts", Code.CAPACITY
    events = (ClusterEvent(Resource.POD, Action.DELETE), ClusterEvent(Resource.NODE, Action.ADD))
    checks = (Check.PORTS,)

    def filter(self, spec: ClassSpec, batch: Batch, out: Rejections) -> None:
        """The ports the node's pods hold (its pods gone and added counted) against the pod's."""
        wanted = spec.sample.host_ports
        if not wanted:
            return
        view = batch.view
        nodes = view.with_ports() if out.asked is None else out.asked.tolist()
        clash = [i for i in nodes if any(p.conflicts(q) for p in wanted for q in view.ports_on(i))]
        if clash:
            out.add(Rejection(self.name, (ERR_REASON,)), clash)

    def class_fields(self, pod: Pod) -> tuple:
        return pod.host_ports

    def hint(self, waiting: Waiting, change: ModelChange) -> bool:
        """A pod leaving helps only if it held a port the pod wants, on a node the pod could use."""
        gone = change.old
        if not isinstance(gone, Pod):
            return True  # a node added
        wanted = waiting.pod.host_ports
        return (any(p.conflicts(q) for p in wanted for q in gone.host_ports)
                and (change.node is None or change.node.name in waiting.nodes))

    def emit(self, build: ProblemBuilder) -> None:
        """A node takes one pod of a class with host ports, and one pod of all the classes sharing a port."""
        by_port: dict[tuple[str, int], list[int]] = defaultdict(list)
        for a, info in enumerate(build.classes):
            if info.sample.host_ports:
                cls = build.problem.classes[a]
                cls.max_per_node, cls.per_node_check = 1, Check.PORTS
            for hp in {(hp.protocol, hp.port) for hp in info.sample.host_ports}:
                by_port[hp].append(a)
        build.problem.exclusive.extend(tuple(m) for m in by_port.values() if len(m) > 1)

    def explain(self, blocker: Blocker, spot: Spot) -> str:
        return ERR_REASON + " in this batch's plan"


KIND = NodePorts()
