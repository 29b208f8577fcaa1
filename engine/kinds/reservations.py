"""Reservations and backfill (issue 29): room held for a pod or gang that starts later is taken now only by pods
that end before it starts.

A reservation (engine.time.timeline) names the nodes its pods start on, when (its shadow time) and what they need
there. On each of those nodes, for each resource it needs, what is left at its start once the running pods still
running then and the reservation itself are counted. A pod placed now counts against it only if it would still be
running then (its runtime bound reaches past the start, or it has none), so short pods backfill the room while it
waits, and long ones never delay it; the holder's own pods do not count (the room is theirs once it has freed).
Where one such pod alone asks for more than is left (a gang of whole nodes leaves nothing) the node is filtered
out for it, and where several could (some room left) a capacity row counts them together — a row is a tuple per
node in the solver's problem, a filter costs nothing there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..model.cluster import Cluster, Moment, Pod, Reservation
from ..model.reasons import Code
from ..model.rejections import Rejection, Rejections
from ..time.timeline import ends, exempt, rfc3339, takes_from
from .base import Action, ClassFields, ClusterEvent, Emit, ReadsPods, Requeue, Resource
from .resources import shortage

if TYPE_CHECKING:
    from ..model.view import View
    from .context import Batch, ClassSpec, ProblemBuilder

RESERVED = "reserved for"  # a reservation row's name: "<resource> reserved for ml/train from <time>"


@dataclass(frozen=True, slots=True)
class ReservedRoom:
    """A reservation where it may bind: per resource it needs, on each of its nodes (by position) where what is left
    at its start is less than the node has free now, what is left."""

    reservation: Reservation
    left: dict[str, dict[int, int]]
    exempt: frozenset[str] = frozenset()  # its holder and those of the reservations before it in line

    def row(self, resource: str) -> str:
        return f"{resource} {RESERVED} {self.reservation.holder} from {rfc3339(self.reservation.start)}"

    def counts(self, pod: Pod, now: float) -> bool:
        """Whether a pod placed now takes from this room (engine.time.timeline.takes_from: it would still run at the
        start, and is neither the holder's nor that of a unit holding a reservation before it in line)."""
        return takes_from(self.reservation, self.exempt, pod, now)


class Reservations(ClassFields, ReadsPods, Emit, Requeue):
    name, code = "Reservations", Code.RESERVED
    # the room a reservation keeps grows as pods leave (or shrink) and as nodes join or grow
    events = (ClusterEvent(Resource.POD, Action.DELETE | Action.UPDATE_POD_SCALE_DOWN),
              ClusterEvent(Resource.NODE, Action.ADD | Action.UPDATE_NODE_ALLOCATABLE))

    def class_fields(self, pod: Pod) -> tuple:
        return (pod.runtime,)  # pods ending before a reservation starts and those running past it differ

    def class_fields_in(self, cluster: Cluster, moment: Moment, view: View) -> Callable[[Pod], tuple]:
        """Per reservation that may bind: whether a pod placed now takes from its room (`ReservedRoom.counts`, all the
        filter and rows read); nothing else (pods of any runtime then share a class)."""
        now = moment.now
        held = held_in(cluster, moment, view)
        if now is None or not held:
            return lambda pod: ()
        return lambda pod: tuple(h.counts(pod, now) for h in held)

    def filter(self, spec: ClassSpec, batch: Batch, out: Rejections) -> None:
        """The reserved nodes where one pod of the class, running past the start, asks for more than is left there
        then: what the table leaves, plus what the view's pods gone would have held then, less what its pods added
        will (a node whose room now is less than the reservation leaves is NodeResourcesFit's first)."""
        now, view, pod = batch.moment.now, batch.view, spec.sample
        if now is None:
            return
        for h in held_anywhere(batch.cluster, batch.moment, view.base()):
            if not h.counts(pod, now):
                continue
            for resource, lefts in sorted(h.left.items()):
                want = pod.requests.get(resource, 0)
                nodes = lefts if out.asked is None else [i for i in out.asked.tolist() if i in lefts]
                if want > 0 and (short := [i for i in nodes if want > lefts[i] + _moved(view, h, resource, i, now)]):
                    out.add(Rejection(self.name, (shortage(h.row(resource)),)), np.array(short, dtype=np.int64))

    def emit(self, build: ProblemBuilder) -> None:
        """A row per reserved resource where some room is left that several pods of the batch could overrun
        together (the filter kept out those one pod overruns)."""
        now = build.batch.moment.now
        if now is None:
            return
        size = len(build.view.nodes)
        for h in held_in(build.batch.cluster, build.batch.moment, build.view):
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


def held_in(cluster: Cluster, moment: Moment, view: View) -> tuple[ReservedRoom, ...]:
    """The reservations the batch is planned beside (`moment`) that may bind, with what they leave where it is less
    than the node has free now (worked out once per view: the class key, the filter and the rows all ask)."""
    every = held_anywhere(cluster, moment, view)
    return view.memo(("reservations binding", moment.now, moment.reservations), lambda: tuple(
        h for h in (ReservedRoom(h.reservation, _tight(h.left, view), h.exempt) for h in every) if h.left))


def held_anywhere(cluster: Cluster, moment: Moment, view: View) -> tuple[ReservedRoom, ...]:
    """Every reservation the batch is planned beside with what it leaves on each of its nodes at its start, binding or not: what
    the filter lays a view's changes over (a node with nothing free now binds nothing until pods leave it)."""
    now, reservations = moment.now, moment.reservations
    if now is None or not reservations:
        return ()
    pending = {p.key: p for p in cluster.pending}

    def there(q: Reservation, r: Reservation) -> bool:  # whether q's pods (some) still run at r's start
        pods = [pending.get(key) for key, _ in q.pods]
        return q.start <= r.start and any(p is None or p.runtime is None or q.start + p.runtime > r.start for p in pods)
    return view.memo(("reservations", now, reservations), lambda: tuple(
        ReservedRoom(r, _left_at_start(r, view, now, [q for q in reservations[:k] if there(q, r)]), exempt(reservations, k))
        for k, r in enumerate(reservations)))


def _moved(view: View, h: ReservedRoom, resource: str, i: int, now: float) -> int:
    """What the view's changes on node i do to what `h` leaves of `resource` at its start: the pods gone that would
    still have run then give their room back, the pods added that will take it (upstream's RemovePod/AddPod)."""
    if not view.changed:
        return 0
    start = h.reservation.start
    back = sum(p.requests.get(resource, 0) for p in view.gone_from(i) if (end := ends(p, now)) is None or end > start)
    return back - sum(p.requests.get(resource, 0) for p in view.added_to(i) if h.counts(p, now))


def _tight(left: dict[str, dict[int, int]], view: View) -> dict[str, dict[int, int]]:
    """Of what a reservation leaves at its start (`_left_at_start`), only where it is less than the node has free
    now (elsewhere the node's own capacity row already keeps pods placed now within it: the reservation binds
    nothing there, and its pods' runtimes would split classes for nothing); nothing when none of its nodes has any
    of what it needs free now (what is left at its start cannot be less)."""
    if not any(view.free(i, resource) > 0 for resource, lefts in left.items() for i in lefts):
        return {}
    out: dict[str, dict[int, int]] = {}
    for resource, lefts in left.items():
        for i, amount in lefts.items():
            if amount < view.free(i, resource):
                out.setdefault(resource, {})[i] = amount
    return out


def _left_at_start(r: Reservation, view: View, now: float, before: list[Reservation]) -> dict[str, dict[int, int]]:
    """Per resource the reservation needs, on each of its nodes (by position): what is left there at its start once
    the pods still running then, the reservations before it in line whose pods run then (`before`: their holders take
    nothing from this room, being before it in line; their own room is theirs) and the reservation itself are
    counted. Not clamped at 0: an eviction gives its room back to this figure (the filter), and a reservation its
    running pods overrun needs them all gone."""
    position = view.positions()
    needs = {position[node]: dict(amounts) for node, amounts in r.need if node in position}
    still = _running_at(view, now, r.start, list(needs))
    for q in before:
        for node, amounts in q.need:
            if (i := position.get(node)) in needs:
                for resource, amount in amounts:
                    still[i][resource] = still[i].get(resource, 0) + amount
    out: dict[str, dict[int, int]] = {}
    for i, need in needs.items():
        for resource, amount in need.items():
            out.setdefault(resource, {})[i] = view.nodes[i].allocatable.get(resource, 0) - still[i].get(resource, 0) - amount
    return out


def _running_at(view: View, now: float, start: float, nodes: list[int]) -> dict[int, dict[str, int]]:
    """Per node of `nodes` (by position), what its bound pods still running at `start` request (their positions
    found in the index's arrays, not by a walk over every bound pod)."""
    starts, bounds = view.lifetimes()
    where = view.node_array()
    asked = np.zeros(len(view.nodes), dtype=bool)
    asked[nodes] = True
    on = asked[where]
    ending = np.maximum(now, np.where(np.isnan(starts[on]), now, starts[on]) + bounds[on])
    out: dict[int, dict[str, int]] = {i: {} for i in nodes}
    for k in np.flatnonzero(on)[ending > start].tolist():
        running = out[int(where[k])]
        for resource, amount in view.pods[k].requests.items():
            running[resource] = running.get(resource, 0) + amount
    return out


KIND = Reservations()
