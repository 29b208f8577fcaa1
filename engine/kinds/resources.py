"""NodeResourcesFit: a pod's requests (and one `pods` slot) must fit the node's free allocatable; the
solver's capacity rows. Reasons as upstream: "Insufficient cpu", "Too many pods"."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..model.cluster import Node, Pod
from ..model.reasons import Code
from ..model.rejections import Rejection, Rejections
from ..solve.problem import Blocker, Check
from .base import Action, ClassFields, ClusterEvent, Emit, Explain, ModelChange, ReadsPods, Requeue, Resource, Spot, Waiting

if TYPE_CHECKING:
    from .context import Batch, ClassSpec, ProblemBuilder


def shortage(resource: str) -> str:
    return "Too many pods" if resource == "pods" else f"Insufficient {resource}"


def shortages(requests: dict[str, int], free: Callable[[str], int]) -> list[str]:
    """Upstream's reasons for the requests that exceed `free(resource)`."""
    return [shortage(r) for r, want in requests.items() if want > free(r)]


class NodeResourcesFit(ClassFields, ReadsPods, Emit, Explain, Requeue):
    name, code = "NodeResourcesFit", Code.CAPACITY
    events = (ClusterEvent(Resource.POD, Action.DELETE | Action.UPDATE_POD_SCALE_DOWN),
              ClusterEvent(Resource.NODE, Action.ADD | Action.UPDATE_NODE_ALLOCATABLE))
    checks = (Check.RESOURCES,)

    def filter(self, spec: ClassSpec, batch: Batch, out: Rejections) -> None:
        """Upstream's Fit on the view's free room (its pods gone and added counted); a node whose allocatable is below
        a request is unresolvable (no eviction helps)."""
        requests = spec.sample.requests
        beyond = None
        for short, members in batch.view.short_of(requests, out.asked).items():
            reasons = tuple(shortage(r) for r in short)
            if beyond is None:
                beyond = batch.view.beyond_allocatable(requests)
            hopeless = beyond[members]
            if hopeless.any():
                out.add(Rejection(self.name, reasons, resolvable=False), members[hopeless])
            if not hopeless.all():
                out.add(Rejection(self.name, reasons), members[~hopeless])

    def class_fields(self, pod: Pod) -> tuple:
        return tuple(sorted(pod.requests.items()))

    def hint(self, waiting: Waiting, change: ModelChange) -> bool:
        """Upstream's: a node helps only if its allocatable fits the requests (and, when it changed, grew in one
        of them); a pod leaving or shrinking helps only on a node the pod could use were there room."""
        requests = waiting.pod.requests
        if isinstance(change.new, Node):
            node, old = change.new, change.old
            if any(v > node.allocatable.get(r, 0) for r, v in requests.items()):
                return False
            return not isinstance(old, Node) or any(node.allocatable.get(r, 0) > old.allocatable.get(r, 0)
                                                    for r in requests)
        return isinstance(change.old, Pod) and (change.node is None or change.node.name in waiting.nodes)

    def emit(self, build: ProblemBuilder) -> None:
        """The resources the batch asks for, each node's free and allocatable amounts, each class's demand."""
        problem, view = build.problem, build.view
        resources = tuple(sorted({r for info in build.classes for r in info.requests}))
        problem.resources = resources
        problem.free = list(map(tuple, view.free_of(resources).tolist()))
        problem.capacity = list(map(tuple, view.allocatable_of(resources).tolist()))
        for info, cls in zip(build.classes, problem.classes):
            cls.demand = tuple(info.requests.get(r, 0) for r in resources)
        if any(info.sample.running_on for info in build.classes):
            _room_by_priority(build)

    def explain(self, blocker: Blocker, spot: Spot) -> str:
        return "node(s) had no room left in this batch's plan (" + ", ".join(shortages(spot.demand, spot.free.__getitem__)) + ")"


def _room_by_priority(build: ProblemBuilder) -> None:
    """The batch model of preemption (engine.preempt.model): a preemptor may use only the room of running pods it
    may evict, those of a lower priority (upstream's rule), though the model weighs every pending pod above every
    running one. Per preemptor priority t below some pinned pod's, each resource again as a dimension in which the
    preemptors of priority t or less and the pinned pods below t count, and the pinned pods of t or more hold their
    room whether kept or not: what those preemptors place fits beside the pods they may not evict."""
    problem, classes = build.problem, build.classes
    pinned = [(info, cls) for info, cls in zip(classes, problem.classes) if info.sample.running_on]
    top = max(info.priority for info, _ in pinned)
    thresholds = sorted({info.priority for info in classes if not info.sample.running_on and info.priority <= top})
    if not thresholds:
        return
    where = build.view.node_table.positions()
    names, free = list(problem.resources), [list(f) for f in problem.free]
    capacity, demands = [list(c) for c in problem.capacity], [list(cls.demand) for cls in problem.classes]
    for t in thresholds:
        for k, resource in enumerate(problem.resources):
            names.append(f"{resource} beside pods of priority {t} or more")
            held: dict[int, int] = defaultdict(int)
            for info, cls in pinned:
                if info.priority >= t:
                    held[where[info.sample.running_on or ""]] += cls.demand[k] * cls.count
            for n, row in enumerate(free):
                row.append(problem.free[n][k] - held.get(n, 0))
                capacity[n].append(problem.capacity[n][k])
            for info, cls, demand in zip(classes, problem.classes, demands):
                counted = info.priority < t if info.sample.running_on else info.priority <= t
                demand.append(cls.demand[k] if counted else 0)
    problem.guards = len(names) - len(problem.resources)
    problem.resources, problem.free, problem.capacity = tuple(names), [tuple(f) for f in free], [tuple(c) for c in capacity]
    for cls, demand in zip(problem.classes, demands):
        cls.demand = tuple(demand)


KIND = NodeResourcesFit()
