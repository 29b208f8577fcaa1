"""NodeVolumeLimits: a node attaches at most its CSINode's `allocatable.count` volumes per CSI driver, counting
each unique volume once (bound pods' ones included). Within the batch: a capacity row per driver."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import TYPE_CHECKING

from ..model.cluster import PodVolumes
from ..model.reasons import Code
from ..model.rejections import Rejection, Rejections
from .base import Action, ClusterEvent, Emit, ReadsPods, Requeue, Resource

if TYPE_CHECKING:
    from ..model.view import View
    from .context import Batch, ClassSpec, ProblemBuilder

ERR_REASON = "node(s) exceed max volume count"


class NodeVolumeLimits(ReadsPods, Emit, Requeue):
    name, code = "NodeVolumeLimits", Code.VOLUME
    events = (ClusterEvent(Resource.POD, Action.DELETE),
              ClusterEvent(Resource.CSI_NODE, Action.ADD | Action.UPDATE),
              ClusterEvent(Resource.PERSISTENT_VOLUME_CLAIM, Action.ADD))

    def filter(self, spec: ClassSpec, batch: Batch, out: Rejections) -> None:
        """Each node's attached volumes per driver (the view's pods: a volume is detached only when no pod left there
        uses it), plus the pod's new ones, against the node's CSI attach limits."""
        volumes = spec.sample.volumes
        if not volumes.attach and not volumes.provisioned:
            return
        limits, view = batch.cluster.storage.limits, batch.view
        nodes = range(len(view.nodes)) if out.asked is None else out.asked.tolist()
        over = []
        for i in nodes:
            limit = limits.get(view.nodes[i].name)
            if not limit:
                continue
            held = _attached_on(view, i)
            new = Counter(volumes.provisioned)
            new.update(driver for driver, volume in volumes.attach if volume not in held.get(driver, ()))
            if any(driver in limit and len(held.get(driver, ())) + k > limit[driver] for driver, k in new.items()):
                over.append(i)
        if over:
            out.add(Rejection(self.name, (ERR_REASON,)), over)

    def emit(self, build: ProblemBuilder) -> None:
        """Per driver some pod of the batch attaches: a node's volumes left under its limit, and each class's
        new volumes. A volume a bound pod holds already is left out of the row (the filter has judged each node
        for it); one several batch pods share is counted per pod."""
        drivers = sorted({d for _, info in build.checked() for d in _drivers(info.sample.volumes)})
        if not drivers:
            return  # (the bound pods' volumes are not even counted: a pass over every pod)
        limits, attached = build.batch.cluster.storage.limits, _attached(build.batch.view)
        held = {v for per_node in attached.values() for volumes in per_node.values() for v in volumes}
        for driver in drivers:
            demand = [_new_volumes(info.sample.volumes, driver, held) if a not in build.unchecked else 0
                      for a, info in enumerate(build.classes)]
            unbounded = sum(c.count * k for c, k in zip(build.problem.classes, demand)) + 1
            unlimited = [driver not in limits.get(n.name, {}) for n in build.view.nodes]
            capacity = [limits.get(n.name, {}).get(driver, unbounded) for n in build.view.nodes]
            free = [max(0, c - len(attached.get(i, {}).get(driver, ()))) for i, c in enumerate(capacity)]
            build.add_resource(f"attachable volumes: {driver}", free, capacity, demand, unlimited)


def _drivers(volumes: PodVolumes) -> set[str]:
    return {d for d, _ in volumes.attach} | set(volumes.provisioned)


def _new_volumes(volumes: PodVolumes, driver: str, held: set[str]) -> int:
    return volumes.provisioned.count(driver) + sum(1 for d, v in volumes.attach if d == driver and v not in held)


KIND = NodeVolumeLimits()


def _attached(view: View) -> dict[int, dict[str, set[str]]]:
    """Per node position, each driver's unique volumes the table's pods use there (built once per table)."""
    def make() -> dict[int, dict[str, set[str]]]:
        held: dict[int, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
        for pod, i in zip(view.table.pods, view.table.node_of):
            for driver, volume in pod.volumes.attach:
                held[i][driver].add(volume)
        return held
    return view.memo_of_table((NodeVolumeLimits.name,), make)


def _attached_on(view: View, i: int) -> dict[str, set[str]]:
    """Node i's volumes per driver, its pods gone and added counted."""
    if i not in view.touched():
        return _attached(view).get(i, {})
    held: dict[str, set[str]] = defaultdict(set)
    for p in view.pods_on(i):
        for driver, volume in p.volumes.attach:
            held[driver].add(volume)
    return held
