"""Time in the plan (issue 29): when running pods end, and when a pod or gang that cannot start now will. Pure.

A pod's runtime bound is `spec.activeDeadlineSeconds` (Kubernetes' own time limit, as Slurm uses a job's time
limit) or a policy's estimate; a running pod ends by `status.startTime` + it, a pod with neither is taken as never
ending. Room only grows as pods end, so the earliest time a unit fits — its shadow time — is found by bisecting
the running pods' end times, asking at each the same planner that places pods now (`Fits`: every constraint kind
takes part). The first units in line (priority, then age) get a reservation there; room reserved is taken by
pods placed meanwhile only if they end before it starts (engine.kinds.reservations: backfill).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import chain
from math import ceil
from typing import Protocol

from ..model import queue_order
from ..model.cluster import Cluster, Pod, Reservation, ResourceClaim


@dataclass(frozen=True, slots=True)
class Placed:
    """Where pods start (pod key -> node) and the ResourceClaims each allocated there (pod key -> its claims as the
    plan's Reserve allocated them: the devices it holds while it runs)."""

    where: dict[str, str]
    claims: dict[str, tuple[ResourceClaim, ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Begun:
    """A waiting pod the plan starts on `node` at a time ≥ now (`begin`), holding its claims' devices until it ends."""

    pod: Pod  # as it waits
    node: str
    begin: float
    claims: tuple[ResourceClaim, ...] = ()

    @property
    def until(self) -> float | None:
        """When it ends at the latest (None: it has no bound)."""
        return None if self.pod.runtime is None else self.begin + self.pod.runtime

    def runs_at(self, t: float) -> bool:
        return self.pod.runtime is None or self.begin + self.pod.runtime > t

    def bound(self) -> Pod:
        """The pod as it runs: bound to its node, started at `begin` (made only where a plan needs it: a copy of a
        pod costs more than the rest of what a cycle asks of it)."""
        return replace(self.pod, node_name=self.node, gang=None, started=rfc3339(self.begin))


class FutureCluster(Protocol):
    """The planner's answers about the cluster at a time t ≥ now (engine.time.timed_plan), as the planner would see it
    then: the running pods that end by t gone (and the devices their claims hold freed), each `held` reservation
    whose start has come bound where it starts (until its pods end), those still ahead keeping their room from
    pods that would run past their starts (backfill), `running` pods bound where they run."""

    def times(self, horizon: float, held: Sequence[Reservation] = ()) -> list[float]:
        """The distinct times within the horizon at which a running pod, or a pod of a `held` reservation, ends,
        earliest first."""
        ...

    def place(self, t: float, held: Sequence[Reservation], pods: Sequence[Pod], running: Sequence[Begun] = ()
              ) -> Placed:
        """Where those of `pods` that fit at t go, every constraint kind taking part."""
        ...

    def enough(self, t: float, held: Sequence[Reservation], pods: Sequence[Pod], running: Sequence[Begun] = ()
               ) -> bool:
        """Whether capacity alone could take `pods` at t: a necessary condition for `place` to place them all."""
        ...

    def holds(self, reservation: Reservation, held: Sequence[Reservation]) -> bool:
        """Whether what `reservation` needs on its nodes (its devices too) is still free there at its start, beside
        `held`."""
        ...

    def before(self, t: float) -> float | None:
        """The latest time before t at which a running pod ends (None: none ends before t)."""
        ...


def fits(future: FutureCluster, t: float, held: Sequence[Reservation], unit: Sequence[Pod]) -> Placed | None:
    """Where each pod of `unit` starts at t, or None when it does not fit there whole."""
    if not future.enough(t, held, unit):
        return None
    got = future.place(t, held, unit)
    return got if len(got.where) == len(unit) else None


def exempt(reservations: Sequence[Reservation], k: int) -> frozenset[str]:
    """Whose pods take nothing from the room reservations[k] keeps: its holder and those of the reservations before
    it in line (room that frees early goes to the head of the line, as it would with no reservation after it: a
    younger unit's promise never holds back an older)."""
    return frozenset(r.holder for r in reservations[:k + 1])


def takes_from(reservation: Reservation, exempted: frozenset[str], pod: Pod, now: float) -> bool:
    """Whether a pod placed at `now` takes from the room `reservation` keeps (the backfill rule): it would still run
    at its start, and its unit is not `exempted` (`exempt`)."""
    return (ends_after(pod, now, reservation.start) and pod.key not in exempted
            and (pod.gang is None or pod.gang not in exempted))


DEFAULT_RESERVATIONS = 2  # units holding a reservation at once (a policy sets another number)
DEFAULT_HORIZON = 7 * 24 * 3600  # seconds ahead a reservation or an estimate may reach
ESTIMATE_STEPS = 12  # times the estimate sweep plans the waiting pods at, besides now
LOOKED_AT = 4  # units in line looked at per reservation held at most (each costs a plan or a few: a batch left
# waiting by competition, not time, is not tried one unit at a time)


def seconds(rfc3339: str) -> float | None:
    """An RFC 3339 time in seconds since the epoch (None: empty or unreadable)."""
    if not rfc3339:
        return None
    try:
        at = datetime.datetime.fromisoformat(rfc3339.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (at if at.tzinfo else at.replace(tzinfo=datetime.UTC)).timestamp()


def rfc3339(at: float) -> str:
    return datetime.datetime.fromtimestamp(at, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def ends(pod: Pod, now: float, runtime: int | None = None) -> float | None:
    """When a running pod ends at the latest: its start (now, if it has none yet) plus its runtime bound (`runtime`
    where a policy estimates one its spec does not set), and not before now (a pod past its bound is being
    stopped); None without a bound."""
    bound = pod.runtime if pod.runtime is not None else runtime
    if bound is None:
        return None
    started = seconds(pod.started)
    return max(now, (now if started is None else started) + bound)


def ends_after(pod: Pod, now: float, start: float) -> bool:
    """Whether a pending pod started now would still run at `start` (a pod without a bound always would)."""
    return pod.runtime is None or now + pod.runtime > start


def with_estimates(cluster: Cluster, now: float | None, runtimes: Callable[[Pod], int | None] | None) -> Cluster:
    """The cluster with the policies' runtime estimates on the pods whose spec sets no bound (a `runtime`
    statement in scope; engine.policy.lower.runtime_rules), when it is planned with time (a `now`)."""
    if runtimes is None or now is None:
        return cluster

    def estimated(pods: list[Pod]) -> list[Pod]:
        return [replace(p, runtime=est) if p.runtime is None and (est := runtimes(p)) is not None else p for p in pods]
    return replace(cluster, bound=estimated(cluster.bound), pending=estimated(cluster.pending))


FLAG, CLOCK, SNAPSHOT = "flag", "clock", "snapshot"  # where a plan's now came from (`Now.source`)
OUTLIER_GAP = 24 * 3600  # a pod time this far (and farther than the rest spread) after the others is not "now"


@dataclass(frozen=True, slots=True)
class Now:
    """The plan's now and where it came from: `--now`, a live cluster's clock, or a snapshot's newest pod time
    (then whose, which field, and the pods whose times lie so far beyond the rest that they were left out). The
    table and `stats.now` show it, so a plan's times can be read against it."""

    at: float
    source: str  # FLAG, CLOCK or SNAPSHOT
    pod: str = ""  # SNAPSHOT: the pod whose time it is
    field: str = ""  # SNAPSHOT: creationTimestamp or startTime
    outliers: tuple[tuple[str, str, float], ...] = ()  # SNAPSHOT: (pod, field, time) left out, newest last

    def to_dict(self) -> dict[str, object]:
        """`stats.now` (docs/dry-run-contract.md)."""
        return {"at": rfc3339(self.at), "source": self.source, **({"pod": self.pod, "field": self.field}
                if self.pod else {}), **({"ignored": {pod: rfc3339(t) for pod, _, t in self.outliers}}
                                         if self.outliers else {})}

    def words(self) -> str:
        """"2026-11-25T12:00:00Z, the snapshot's newest pod time (default/p's creationTimestamp)", and so on."""
        why = {FLAG: "from --now", CLOCK: "the clock (a live cluster's state)"}.get(
            self.source, f"the snapshot's newest pod time ({self.pod}'s {self.field}"
            f"{f'; {len(self.outliers)} pod time(s) far beyond the rest left out' if self.outliers else ''})")
        return f"{rfc3339(self.at)}, {why}"

    def notes(self) -> list[str]:
        """What a reader must know: pod times that were not taken as now, and why."""
        if not self.outliers:
            return []
        shown = ", ".join(f"{pod} ({field} {rfc3339(t)})" for pod, field, t in self.outliers[-3:])
        more = f" and {len(self.outliers) - 3} more" if len(self.outliers) > 3 else ""
        return [f"now is {rfc3339(self.at)} ({self.pod}'s {self.field}), not the snapshot's newest pod time: "
                f"{len(self.outliers)} pod time(s) far beyond the rest were left out: {shown}{more}; --now plans "
                "from another time"]


def choose_now(cluster: Cluster, flag: float | None = None, clock: float | None = None) -> Now | None:
    """The plan's now: `--now` when given, else a live cluster's clock, else the snapshot's (None: none known)."""
    if flag is not None:
        return Now(flag, FLAG)
    if clock is not None:
        return Now(clock, CLOCK)
    return snapshot_now(cluster)


def snapshot_now(cluster: Cluster) -> Now | None:
    """A snapshot's time, as near as it says: its newest pod creation or start (None: it has no times), leaving
    out pod times far beyond the rest (`first_outlier`): a clock set wrong or a hand-edited year would otherwise
    end every running pod at once."""
    times = sorted((newest[0], pod.key, newest[1]) for pod in (*cluster.bound, *cluster.pending)
                   if (newest := _newest(pod)) is not None)
    if not times:
        return None
    cut = first_outlier([t for t, _, _ in times])
    at, pod, field = times[cut - 1]
    return Now(at, SNAPSHOT, pod, field, tuple((p, f, t) for t, p, f in times[cut:]))


def _newest(pod: Pod) -> tuple[float, str] | None:
    """A pod's newest time and the field it is in (None: it has none)."""
    times = [(t, name) for t, name in ((seconds(pod.created), "creationTimestamp"), (seconds(pod.started), "startTime"))
             if t is not None]
    return max(times, default=None)


def first_outlier(times: Sequence[float]) -> int:
    """Where the times (sorted) far beyond the rest begin (len(times): none are). The newest few — fewer than the
    rest — are left out when they all come more than OUTLIER_GAP after the rest, and more than the rest's newer
    half spans (a cluster that ran for weeks and was quiet for two days is not suspect; one whose pods came within
    an hour and one a year later is); of several such gaps, the widest."""
    n, cut, widest = len(times), len(times), 0.0
    for i in range(n // 2 + 1, n):  # times[i:] are fewer than times[:i]
        gap, spread = times[i] - times[i - 1], times[i - 1] - times[(i - 1) // 2]
        if gap > max(OUTLIER_GAP, spread) and gap > widest:
            cut, widest = i, gap
    return cut


def snapshot_time(cluster: Cluster) -> float | None:
    """A snapshot's time (`snapshot_now`), in seconds since the epoch."""
    now = snapshot_now(cluster)
    return None if now is None else now.at


def timed(cluster: Cluster, now: float | None) -> bool:
    """Whether time is in the plan: a "now" is known and some pod, running or waiting, has a runtime bound (a
    cluster where no one declares one plans as it always has, at no cost)."""
    return now is not None and any(p.runtime is not None for p in chain(cluster.bound, cluster.pending))


def end_times(cluster: Cluster, now: float, horizon: float) -> list[float]:
    """The distinct times within the horizon at which a running pod ends, earliest first."""
    return sorted({end for p in cluster.bound if (end := ends(p, now)) is not None and end <= now + horizon})


@dataclass(frozen=True, slots=True)
class Shadow:
    """When a unit fits whole, and where its pods go then (and the devices they get)."""

    start: float
    placed: Placed


def shadow(future: FutureCluster, unit: tuple[Pod, ...], horizon: float, held: tuple[Reservation, ...] = ()) -> Shadow | None:
    """The earliest end time of a running pod (within the horizon) after which `unit` fits whole, beside the room
    `held` reservations keep; None if it does not fit even once every bounded pod has ended. Room grows as pods
    end, but the backfill rule changes at a held reservation's start and where the unit, started then, would first
    run past it (a unit ending before it fits in its room, and not a little later): between those times it
    bisects, earliest part first."""
    times = future.times(horizon, held)
    for part in _segments(times, unit, held):
        found = _bisect(future, unit, part, held)
        if found is not None:
            return found
    return None


def _segments(times: list[float], unit: tuple[Pod, ...], held: tuple[Reservation, ...]) -> list[list[float]]:
    """`times` cut where the backfill rule changes for `unit`: each held reservation's start, and the times from
    which a pod of it would run past that start."""
    cuts = sorted({cut for r in held for cut in (r.start, *(r.start - p.runtime for p in unit if p.runtime is not None))})
    out: list[list[float]] = [[]]
    k = 0
    for t in times:
        if k < len(cuts) and t >= cuts[k]:
            while k < len(cuts) and t >= cuts[k]:
                k += 1
            out.append([])
        out[-1].append(t)
    return [part for part in out if part]


def _bisect(future: FutureCluster, unit: tuple[Pod, ...], times: list[float], held: tuple[Reservation, ...]) -> Shadow | None:
    """The earliest of `times` at which `unit` fits whole, room growing over them: first on capacity alone (no
    plan), then with plans from where capacity suffices — where capacity is all that stands in the way, one plan."""
    low, high = 0, len(times)
    while low < high:  # the first time capacity suffices
        mid = (low + high) // 2
        if future.enough(times[mid], held, unit):
            high = mid
        else:
            low = mid + 1
    if low == len(times):
        return None
    where = fits(future, times[low], held, unit)
    if where is not None:
        return Shadow(times[low], where)
    low, high, found = low + 1, len(times) - 1, None
    while low <= high:
        mid = (low + high) // 2
        where = fits(future, times[mid], held, unit)
        if where is None:
            low = mid + 1
        else:
            found, high = Shadow(times[mid], where), mid - 1
    return found


def in_line(cluster: Cluster, waiting: Iterable[str]) -> list[tuple[Pod, ...]]:
    """The units (a gang's pending pods, or a pod) among the `waiting` pod keys, first in line first
    (engine.model.queue_order)."""
    pods = {p.key: p for p in cluster.pending}
    return queue_order.in_line((pods[key] for key in waiting if key in pods), cluster.gangs, cluster.pending)


def reservation(holder: str, unit: tuple[Pod, ...], found: Shadow, scope: str = "") -> Reservation:
    """A reservation for `unit` at its shadow: its pods' nodes, what they need on each and the devices their claims
    get there; `scope`: the `reserve` statement it counts under."""
    need: dict[str, dict[str, int]] = {}
    where = found.placed.where
    for pod in unit:
        node = where.get(pod.key)
        if node is None:
            continue
        for resource, amount in pod.requests.items():
            need.setdefault(node, {})[resource] = need.get(node, {}).get(resource, 0) + amount
    claims = {c.key: c for pod in unit for c in found.placed.claims.get(pod.key, ())}
    return Reservation(holder, tuple(sorted(where.items())), found.start,
                       tuple((node, tuple(sorted(amounts.items()))) for node, amounts in sorted(need.items())), scope,
                       tuple(claims[k] for k in sorted(claims)))


# a unit's reservation limits (engine.model.ir.ReserveRules: a `reserve` statement in scope), or None for the defaults
Limits = Callable[[Pod], tuple[str, int, int] | None]
DEFAULT_LIMITS = ("", DEFAULT_RESERVATIONS, DEFAULT_HORIZON)


def reserve(cluster: Cluster, waiting: Iterable[str], now: float, future: FutureCluster, limits: Limits | None = None,
            kept: tuple[Reservation, ...] = (), placed: Iterable[str] = (), prior: Iterable[Reservation] = (),
            earlier: bool = True) -> tuple[Reservation, ...]:
    """Reservations for the units first in line that wait, each beside the ones before it: where it fits alone now,
    from now, if it lost its room to smaller pods `placed` now or to ones behind it in line (a stream of them must not
    keep the head of the line waiting for ever; one that lost to pods like it and before it waits on competition),
    else where and when it will fit within its horizon (its shadow): at most `most`
    for the units a `reserve` statement covers (its pods share the count; the rest: 2 within 7 days), only the
    first units in line looked at (LOOKED_AT per reservation the defaults allow). `kept`: reservations held already
    (the last cycle's, for units not planned now), first among them and counted; `prior`: the last cycle's for
    units planned now, each kept while its room is still there at its start (a reservation moves only when the
    cluster changes under it, and costs no search meanwhile), their units first among those of their priority (an
    older unit back in line does not take the place of a promise made; a higher priority does), and from now if
    they fit now; with `earlier` False, one still holding is kept without asking whether its unit could start any
    earlier (the loop asks only now and then)."""
    held: list[Reservation] = list(kept)
    before = {r.holder: r for r in prior}
    pods = {p.key: p for p in cluster.pending}
    count: dict[str, int] = {}
    for r in kept:  # (their pods are not in this batch: each says what it counts under)
        count[r.scope] = count.get(r.scope, 0) + 1
    now_placed = set(placed)
    others = [pods[k] for k in now_placed if k in pods]
    times = queue_order.entered(cluster.pending, cluster.gangs)
    line = in_line(cluster, waiting)  # those holding one first among their priority: a promise is kept while it can
    line.sort(key=lambda u: (-max(p.priority for p in u), (u[0].gang or u[0].key) not in before))
    objects = waits_for_objects(cluster)
    for unit in line[:DEFAULT_RESERVATIONS * LOOKED_AT]:
        scope, most, horizon = _limits(unit[0], limits)
        if count.get(scope, 0) >= most or any(p.key in objects for p in unit):
            continue  # (no time helps a unit waiting for objects: it holds no room)
        alone = fits(future, now, held, unit)
        promised = before.get(unit[0].gang or unit[0].key)
        if alone is not None and promised is None and (all(p.key in now_placed for p in unit)
                                                       or not _passed_over(unit, others, times)):
            continue  # it starts now, or lost to pods like it and before it in line: competition, not starvation
        found = _reservation(future, unit, now, alone, horizon, tuple(held), promised, scope, earlier)
        if found is not None:
            held.append(found)
            count[scope] = count.get(scope, 0) + 1
    return tuple(held)


def _reservation(future: FutureCluster, unit: tuple[Pod, ...], now: float, alone: Placed | None, horizon: float,
                 held: tuple[Reservation, ...], prior: Reservation | None, scope: str, earlier: bool = True
                 ) -> Reservation | None:
    """A unit's reservation: from now where it fits alone now; else its last one while that still holds and
    capacity alone could not take the unit any earlier (pods that ended early: then it moves earlier; asked only
    with `earlier`); else at its shadow (None: none within the horizon)."""
    holder = unit[0].gang or unit[0].key
    if alone is not None:
        return reservation(holder, unit, Shadow(now, alone), scope)
    if prior is not None and prior.start > now and {key for key, _ in prior.pods} == {p.key for p in unit}:
        before = future.before(prior.start) if earlier else None
        if (before is None or before <= now or not future.enough(before, held, unit)) and future.holds(prior, held):
            return prior
    found = shadow(future, unit, horizon, held)
    return None if found is None else reservation(holder, unit, found, scope)


def _passed_over(unit: tuple[Pod, ...], placed: list[Pod], times: Mapping[str, str]) -> bool:
    """Whether a unit that fits alone now lost its room to pods placed now that should not come first: it is a
    gang, or some placed pod asks for no more of anything it asks for and is smaller (less of one) or behind it in
    line (a lower priority, or the same and younger). Kept waiting by them, a stream of small or newer pods could
    keep it waiting for ever (the starvation reservations are for), or start it later than it was promised."""
    if len(unit) > 1:
        return True
    pod = unit[0]
    wants = pod.requests
    place = queue_order.place_of(pod, times)
    return any(all(p.requests.get(r, 0) <= v for r, v in wants.items()) and
               (any(p.requests.get(r, 0) < v for r, v in wants.items() if r != "pods")
                or queue_order.place_of(p, times) > place) for p in placed)


def _limits(pod: Pod | None, limits: Limits | None) -> tuple[str, int, int]:
    found = limits(pod) if limits is not None and pod is not None else None
    return found if found is not None else DEFAULT_LIMITS


@dataclass(frozen=True, slots=True)
class Estimate:
    """When a waiting pod is expected to start (None: it cannot be estimated), and the words that say so."""

    start: float | None
    why: str
    next_cycle: bool = False  # placed at now: it lost only to the batch's competition (start is the sweep's now)


def waits_for_objects(cluster: Cluster) -> dict[str, str]:
    """The waiting pods whose wait no running pod's end can shorten, by key, with what they wait for: a
    ResourceClaim not created yet, missing or being deleted, or members of their gang not yet pending. They get
    neither a reservation nor an estimate (an estimate would say they do not fit once every running pod has ended)."""
    out = {p.key: "not estimated: it waits for its ResourceClaims, not for running pods to end"
           for p in cluster.pending if p.dra.blocked}
    members: dict[str, int] = {}
    for pod in cluster.pending:
        if pod.gang is not None:
            members[pod.gang] = members.get(pod.gang, 0) + 1
    short = {key for key, count in members.items() if (g := cluster.gangs.get(key)) is not None and count < g.min_member}
    if not short:
        return out
    for pod in cluster.bound:  # (bound members count toward the quorum)
        if pod.gang in short:
            members[pod.gang] += 1
    for pod in cluster.pending:
        gang = cluster.gangs.get(pod.gang) if pod.gang is not None else None
        if gang is not None and members.get(gang.key, 0) < gang.min_member and pod.key not in out:
            out[pod.key] = (f"not estimated: it waits for members of its gang {gang.key} to be pending, not for "
                            "running pods to end")
    return out


def next_time(times: list[float], after: float, steps: int) -> float | None:
    """The next time the estimate sweep plans at, after `after`, with `steps` plans left: the next of `times`
    (sorted) while there are steps enough for each, else one spread over those left so that the last is reached."""
    left = [t for t in times if t > after]
    if not left or steps <= 0:
        return None
    return left[0] if len(left) <= steps else left[ceil(len(left) / steps) - 1]


def estimate(cluster: Cluster, waiting: Iterable[str], now: float, future: FutureCluster, held: tuple[Reservation, ...],
             started: Placed, horizon: float = DEFAULT_HORIZON, steps: int = ESTIMATE_STEPS,
             waiting_for: Mapping[str, str] | None = None) -> dict[str, Estimate]:
    """An estimated start for each waiting pod that holds no reservation: the earliest time the same planner,
    stepped forward with every pod keeping its bound, starts it. At now (beside the pods `started` now) and then at
    the times pods end (running ones, the reservations' once started, and those the sweep starts: at most `steps`
    of them, spread when there are more), the waiting pods are planned together as a batch, as a cycle then would:
    beside the reservations started by then, backfilling those still ahead, and beside the pods started earlier
    (while they run, with the devices their claims got); a reservation's holder joins the batch at its start, its
    room kept for it, and may start elsewhere, as a cycle would plan it. A pod placed at a time is expected to start
    then (at the latest, where the sweep stepped over some ends). The batch decides among them as it does now
    (priority, gangs whole). `waiting_for`: pods the planner found waiting for objects too, with what they are told
    instead (those waits_for_objects finds are told so without it)."""
    reserved = {key for r in held for key, _ in r.pods}
    wanted = set(waiting) - reserved
    objects = {**(waiting_for or {}), **waits_for_objects(cluster)}
    out = {key: Estimate(None, why) for key, why in objects.items() if key in wanted}
    left = [p for p in cluster.pending if p.key in wanted and p.key not in out]
    pods = {p.key: p for p in cluster.pending}
    if not left:
        return out
    begun = [Begun(pods[k], n, now, started.claims.get(k, ())) for k, n in started.where.items() if k in pods]
    times = {*future.times(horizon, held), *(u for b in begun if (u := b.until) is not None)}
    ahead = list(held)  # the reservations whose holders the sweep has not started yet
    t: float | None = now
    last, budget = now, steps
    while t is not None and left:
        last = t
        running = [b for b in begun if b.runs_at(t)]
        due = [pods[key] for r in ahead if r.start <= t for key, _ in r.pods if key in pods]  # planned with the batch
        if due or any(future.enough(t, ahead, [p], running) for p in _shapes(left)):  # else no plan: nothing fits yet
            got = future.place(t, ahead, [*due, *left], running)
            for pod in (p for p in [*due, *left] if p.key in got.where):
                if pod.key in wanted:
                    out[pod.key] = Estimate(t, _expected(t, now), t == now)
                begun.append(Begun(pod, got.where[pod.key], t, got.claims.get(pod.key, ())))
                times.update(u for u in (begun[-1].until,) if u is not None and u <= now + horizon)
            ahead = [r for r in ahead if not all(key in got.where for key, _ in r.pods)]
            left = [p for p in left if p.key not in got.where]
        t, budget = next_time(sorted(times), t, budget), budget - 1
    for pod in left:
        out[pod.key] = Estimate(None, f"not estimated: it does not fit by {rfc3339(last)}, the last of the {steps} "
                                      "times the estimate sweep plans at" if any(u > last for u in times) else
                                      "not estimated: it does not fit even once every running pod with a runtime "
                                      "bound has ended (pods without activeDeadlineSeconds or a policy's runtime "
                                      f"are taken as never ending), within {horizon / 3600:g} h")
    return out


def _expected(t: float, now: float) -> str:
    if t == now:
        return "expected to start in the next cycle (pods of this batch took the room first)"
    return f"expected to start by {rfc3339(t)}, when enough running pods have ended (their runtime bounds)"


def _shapes(pods: list[Pod]) -> list[Pod]:
    """One pod per distinct request shape and runtime (the backfill rule reads it)."""
    return list({(tuple(sorted(p.requests.items())), p.runtime): p for p in pods}.values())
