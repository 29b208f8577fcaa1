"""Reservations and backfill (issue 29): room held for a pod or gang that starts later is taken now only by pods
that end before it starts.

A reservation (engine.timeline) names the nodes its pods start on, when (its shadow time) and what they need
there. On each of those nodes, for each resource it needs, what is left at its start once the running pods still
running then and the reservation itself are counted. A pod placed now counts against it only if it would still be
running then (its runtime bound reaches past the start, or it has none), so short pods backfill the room while it
waits, and long ones never delay it; the holder's own pods do not count (the room is theirs once it has freed).
Where one such pod alone asks for more than is left (a gang of whole nodes leaves nothing) the node is filtered
out for it, and where several could (some room left) a capacity row counts them together — a row is a tuple per
node in the solver's problem, a filter costs nothing there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..model import Cluster, Pod, Reservation
from ..rejections import Rejection, Rejections
from ..timeline import ends, exempt, rfc3339, takes_from
from .base import Action, ClusterEvent, Kind, Moves, Resource
from .resources import shortage

if TYPE_CHECKING:
    from ..index import BoundState
    from .context import Batch, ClassSpec, ProblemBuilder

RESERVED = "reserved for"  # a reservation row's name: "<resource> reserved for ml/train from <time>"


@dataclass(frozen=True, slots=True)
class Held:
    """A reservation where it may bind: per resource it needs, on each of its nodes (by position) where what is left
    at its start is less than the node has free now, what is left."""

    reservation: Reservation
    left: dict[str, dict[int, int]]
    exempt: frozenset[str] = frozenset()  # its holder and those of the reservations before it in line

    def row(self, resource: str) -> str:
        return f"{resource} {RESERVED} {self.reservation.holder} from {rfc3339(self.reservation.start)}"

    def counts(self, pod: Pod, now: float) -> bool:
        """Whether a pod placed now takes from this room (engine.timeline.takes_from: it would still run at the
        start, and is neither the holder's nor that of a unit holding a reservation before it in line)."""
        return takes_from(self.reservation, self.exempt, pod, now)


class Reservations(Kind):
    name = "Reservations"
    # the room a reservation keeps grows as pods leave (or shrink) and as nodes join or grow
    events = (ClusterEvent(Resource.POD, Action.DELETE | Action.UPDATE_POD_SCALE_DOWN),
              ClusterEvent(Resource.NODE, Action.ADD | Action.UPDATE_NODE_ALLOCATABLE))

    def class_fields(self, pod: Pod) -> tuple:
        return (pod.runtime,)  # pods ending before a reservation starts and those running past it differ

    def class_fields_in(self, cluster: Cluster, index: BoundState) -> Callable[[Pod], tuple]:
        """Per reservation that may bind: whether a pod placed now takes from its room (`Held.counts`, all the
        filter and rows read); nothing else (pods of any runtime then share a class)."""
        now = cluster.now
        held = held_in(cluster, index)
        if now is None or not held:
            return lambda pod: ()
        return lambda pod: tuple(h.counts(pod, now) for h in held)

    def filter(self, spec: ClassSpec, batch: Batch, out: Rejections) -> None:
        """The reserved nodes where one pod of the class, running past the start, asks for more than is left."""
        for h, resource, lefts, want in _asks(batch, spec.sample):
            if short := [i for i, left in lefts.items() if want > left]:
                out.add(Rejection(self.name, (shortage(h.row(resource)),)), np.array(short, dtype=np.int64))

    def after(self, spec: ClassSpec, batch: Batch, i: int, moves: Moves) -> Rejection | None:
        """Node i once `moves` happened: the evicted pods that would have run at the start give their room back,
        the arriving ones that will take theirs."""
        now = batch.cluster.now
        for h, resource, lefts, want in _asks(batch, spec.sample):
            if now is None or i not in lefts:
                continue
            start = h.reservation.start
            back = sum(p.requests.get(resource, 0) for p in moves.gone_from(i)
                       if (end := ends(p, now)) is None or end > start)
            taken = sum(p.requests.get(resource, 0) for p in moves.come_to(i) if h.counts(p, now))
            if want > lefts[i] + back - taken:
                return Rejection(self.name, (shortage(h.row(resource)),))
        return None

    def sways(self, spec: ClassSpec, batch: Batch, pod: Pod) -> bool:
        return any(pod.requests.get(resource, 0) for h in held_in(batch.cluster, batch.index) for resource in h.left)

    def emit(self, build: ProblemBuilder) -> None:
        """A row per reserved resource where some room is left that several pods of the batch could overrun
        together (the filter kept out those one pod overruns)."""
        now = build.batch.cluster.now
        if now is None:
            return
        size = len(build.index.nodes)
        for h in held_in(build.batch.cluster, build.index):
            for resource, lefts in sorted(h.left.items()):
                rows = {i: left for i, left in lefts.items() if left > 0}
                on = list(rows)
                demand = [info.requests.get(resource, 0) if h.counts(info.sample, now)
                          and (info.rejected.code[on] < 0).any() else 0  # (a class no row node takes counts 0)
                          for info in build.classes]
                unbounded = sum(cls.count * d for cls, d in zip(build.problem.classes, demand)) + 1
                if all(left >= unbounded - 1 for left in rows.values()):
                    continue  # the whole batch fits beside it there (and on the others no pod that counts goes)
                room = np.full(size, unbounded, dtype=np.int64)
                room[on] = list(rows.values())
                unlimited = np.ones(size, dtype=bool)
                unlimited[on] = False
                build.add_resource(h.row(resource), room.tolist(), room.tolist(), demand, unlimited.tolist())


def held_in(cluster: Cluster, index: BoundState) -> tuple[Held, ...]:
    """The cluster's reservations that may bind, with what they leave (worked out once per index: the class key,
    the filter and the rows all ask)."""
    now = cluster.now
    if now is None or not cluster.reservations:
        return ()
    reservations = tuple(cluster.reservations)
    pending = {p.key: p for p in cluster.pending}

    def there(q: Reservation, r: Reservation) -> bool:  # whether q's pods (some) still run at r's start
        pods = [pending.get(key) for key, _ in q.pods]
        return q.start <= r.start and any(p is None or p.runtime is None or q.start + p.runtime > r.start for p in pods)
    return index.memo(("reservations", now, reservations), lambda: tuple(
        h for k, r in enumerate(reservations)
        if (h := Held(r, _tight(r, index, now, [q for q in reservations[:k] if there(q, r)]),
                      exempt(reservations, k))).left))


def _asks(batch: Batch, pod: Pod) -> Iterator[tuple[Held, str, dict[int, int], int]]:
    """Each reserved resource one pod of a class placed now would take from: the reservation, the resource, what
    is left of it per node, what the pod asks."""
    now = batch.cluster.now
    for h in held_in(batch.cluster, batch.index):
        if now is not None and h.counts(pod, now):
            for resource, lefts in sorted(h.left.items()):
                if (want := pod.requests.get(resource, 0)) > 0:
                    yield h, resource, lefts, want


def _tight(r: Reservation, index: BoundState, now: float, before: list[Reservation]) -> dict[str, dict[int, int]]:
    """Per resource the reservation needs, on each of its nodes (by position): what is left there at its start once
    the pods still running then, the reservations before it in line whose pods run then (`before`: their holders take
    nothing from this room, being before it in line; their own room is theirs) and the reservation itself are
    counted —
    only where it is less than the node has free now (elsewhere the node's own capacity row already keeps pods placed
    now within it: the reservation binds nothing there, and its pods' runtimes would split classes for nothing)."""
    position = index.positions()
    needs = {position[node]: dict(amounts) for node, amounts in r.need if node in position}
    if not any(index.free(i, resource) > 0 for i, need in needs.items() for resource in need):
        return {}  # nothing free there now: what is left at its start cannot be less
    still = _running_at(index, now, r.start, list(needs))
    for q in before:
        for node, amounts in q.need:
            if (i := position.get(node)) in needs:
                for resource, amount in amounts:
                    still[i][resource] = still[i].get(resource, 0) + amount
    out: dict[str, dict[int, int]] = {}
    for i, need in needs.items():
        for resource, amount in need.items():
            left = max(0, index.nodes[i].allocatable.get(resource, 0) - still[i].get(resource, 0) - amount)
            if left < index.free(i, resource):
                out.setdefault(resource, {})[i] = left
    return out


def _running_at(index: BoundState, now: float, start: float, nodes: list[int]) -> dict[int, dict[str, int]]:
    """Per node of `nodes` (by position), what its bound pods still running at `start` request (their positions
    found in the index's arrays, not by a walk over every bound pod)."""
    starts, bounds = index.lifetimes()
    where = index.node_array()
    asked = np.zeros(len(index.nodes), dtype=bool)
    asked[nodes] = True
    on = asked[where]
    ending = np.maximum(now, np.where(np.isnan(starts[on]), now, starts[on]) + bounds[on])
    out: dict[int, dict[str, int]] = {i: {} for i in nodes}
    for k in np.flatnonzero(on)[ending > start].tolist():
        running = out[int(where[k])]
        for resource, amount in index.pods[k].requests.items():
            running[resource] = running.get(resource, 0) + amount
    return out


KIND = Reservations()
