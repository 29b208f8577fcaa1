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

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ..model import Cluster, Pod, Reservation
from ..timeline import ends_after, rfc3339
from .base import Action, ClusterEvent, Kind, Resource

if TYPE_CHECKING:
    from ..index import BoundState
    from .context import ProblemBuilder

RESERVED = "reserved for"  # a reservation row's name: "<resource> reserved for ml/train from <time>"


class Reservations(Kind):
    name = "Reservations"
    # the room a reservation keeps grows as pods leave (or shrink) and as nodes join or grow
    events = (ClusterEvent(Resource.POD, Action.DELETE | Action.UPDATE_POD_SCALE_DOWN),
              ClusterEvent(Resource.NODE, Action.ADD | Action.UPDATE_NODE_ALLOCATABLE))

    def class_fields(self, pod: Pod) -> tuple:
        return (pod.runtime,)  # pods ending before a reservation starts and those running past it differ

    def class_fields_in(self, cluster: Cluster, index: BoundState) -> Callable[[Pod], tuple]:
        """Per reservation that may bind: whether a pod would still run at its start, and whether it is its holder's
        (what the rows read); nothing else (pods of any runtime then share a class)."""
        now = cluster.now
        held = [r for r in cluster.reservations if now is not None and _tight(r, index, now)]
        if now is None or not held:
            return lambda pod: ()
        return lambda pod: tuple((ends_after(pod, now, r.start), r.holder in (pod.gang, pod.key)) for r in held)

    def emit(self, build: ProblemBuilder) -> None:
        cluster = build.batch.cluster
        now = cluster.now
        if not cluster.reservations or now is None:
            return
        index = build.index
        for r in cluster.reservations:
            for resource, left in sorted(_tight(r, index, now).items()):
                demand = [info.requests.get(resource, 0) if ends_after(info.sample, now, r.start)
                          and r.holder not in (info.sample.gang, info.sample.key) else 0  # the holder: its own room
                          for info in build.classes]
                unbounded = sum(cls.count * d for cls, d in zip(build.problem.classes, demand)) + 1
                if all(v >= unbounded - 1 for v in left.values()):
                    continue  # the whole batch fits beside it there (and no pod of it counts: demand all 0)
                room = np.full(len(index.nodes), unbounded, dtype=np.int64)
                room[list(left)] = list(left.values())
                unlimited = np.ones(len(index.nodes), dtype=bool)
                unlimited[list(left)] = False
                build.add_resource(f"{resource} {RESERVED} {r.holder} from {rfc3339(r.start)}", room.tolist(),
                                   room.tolist(), demand, unlimited.tolist())


def _tight(r: Reservation, index: BoundState, now: float) -> dict[str, dict[int, int]]:
    """Per resource the reservation needs, on each of its nodes (by position): what is left there at its start once
    the pods still running then and the reservation itself are counted — only where it is less than the node has free
    now (elsewhere the node's own capacity row already keeps pods placed now within it, and a row would never
    bind: a row is a tuple per node, and its pods' runtimes would split classes)."""
    position = index.positions()
    needs = {position[node]: dict(amounts) for node, amounts in r.need if node in position}
    still = _running_at(index, now, r.start, list(needs))
    out: dict[str, dict[int, int]] = {}
    for i, need in needs.items():
        for resource, amount in need.items():
            left = max(0, index.nodes[i].allocatable.get(resource, 0) - still[i].get(resource, 0) - amount)
            if left < index.free(i, resource):
                out.setdefault(resource, {})[i] = left
    return {resource: {i: lefts.get(i, index.free(i, resource)) for i in needs if resource in needs[i]}
            for resource, lefts in out.items()}


def _running_at(index: BoundState, now: float, start: float, nodes: list[int]) -> dict[int, dict[str, int]]:
    """Per node of `nodes` (by position), what its bound pods still running at `start` request (their positions
    found in the index's arrays, not by a walk over every bound pod)."""
    starts, bounds = index.lifetimes()
    where = index.node_array()
    on = np.isin(where, nodes)
    ending = np.maximum(now, np.where(np.isnan(starts[on]), now, starts[on]) + bounds[on])
    out: dict[int, dict[str, int]] = {i: {} for i in nodes}
    for k in np.flatnonzero(on)[ending > start].tolist():
        running = out[int(where[k])]
        for resource, amount in index.pods[k].requests.items():
            running[resource] = running.get(resource, 0) + amount
    return out


KIND = Reservations()
