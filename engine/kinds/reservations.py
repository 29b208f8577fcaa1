"""Reservations and backfill (issue 29): room held for a pod or gang that starts later is taken now only by pods
that end before it starts.

A reservation (engine.timeline) names the nodes its pods start on, when (its shadow time) and what they need
there. On each of those nodes, for each resource it needs, a capacity row: what is left at its start once the
running pods still running then and the reservation itself are counted. A pod placed now counts against it only if
it would still be running then (its runtime bound reaches past the start, or it has none), so short pods backfill
the room while it waits, and long ones never delay it; the holder's own pods do not count (the room is theirs once
it has freed). Rows only: no node is filtered out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..model import Pod
from ..timeline import ends, ends_after, rfc3339
from .base import Action, ClusterEvent, Kind, Resource

if TYPE_CHECKING:
    from .context import ProblemBuilder

RESERVED = "reserved for"  # a reservation row's name: "<resource> reserved for ml/train from <time>"


class Reservations(Kind):
    name = "Reservations"
    # the room a reservation keeps grows as pods leave (or shrink) and as nodes join or grow
    events = (ClusterEvent(Resource.POD, Action.DELETE | Action.UPDATE_POD_SCALE_DOWN),
              ClusterEvent(Resource.NODE, Action.ADD | Action.UPDATE_NODE_ALLOCATABLE))

    def class_fields(self, pod: Pod) -> tuple:
        return (pod.runtime,)  # pods ending before a reservation starts and those running past it differ

    def emit(self, build: ProblemBuilder) -> None:
        cluster = build.batch.cluster
        now = cluster.now
        if not cluster.reservations or now is None:
            return
        index = build.index
        nodes = index.nodes
        for r in cluster.reservations:
            needs = {node: dict(amounts) for node, amounts in r.need}
            still: dict[str, dict[str, int]] = {name: {} for name in needs}  # running on it at the start
            for pod, i in zip(index.pods, index.node_of):
                node = nodes[i].name
                if node in still and ((end := ends(pod, now)) is None or end > r.start):
                    for resource, amount in pod.requests.items():
                        still[node][resource] = still[node].get(resource, 0) + amount
            for resource in sorted({res for amounts in needs.values() for res in amounts}):
                demand = [info.requests.get(resource, 0) if ends_after(info.sample, now, r.start)
                          and r.holder not in (info.sample.gang, info.sample.key) else 0  # the holder: its own room
                          for info in build.classes]
                if not any(demand):
                    continue
                unbounded = sum(cls.count * d for cls, d in zip(build.problem.classes, demand)) + 1
                room = [max(0, node.allocatable.get(resource, 0) - still[node.name].get(resource, 0)
                            - needs[node.name][resource])
                        if resource in needs.get(node.name, {}) else unbounded for node in nodes]
                build.add_resource(f"{resource} {RESERVED} {r.holder} from {rfc3339(r.start)}", room, room, demand,
                                   [resource not in needs.get(node.name, {}) for node in nodes])


KIND = Reservations()
