"""Coscheduling gangs: at least minMember pods of a group (bound members included) start in one batch, or
none. A gang with fewer members pending than it needs is rejected before any node is looked at (upstream's
PreEnqueue for native gangs, Coscheduling's PreFilter); a PodGroup's minResources beyond the cluster's free room keeps
the gang out too, said with the nodes; `within` keeps every member in one topology domain. Which gang a pod belongs to
is model data (engine.model.gangs), decided once when the cluster is built."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from ..model.cluster import SCHEDULING_GROUP, Cluster, Gang, Pod
from ..model.queue_order import entered
from ..model.reasons import Code
from ..model.rejections import Rejection, joined
from ..model.view import View
from ..solve.greedy import GreedyState, greedy, members_that_fit
from ..solve.problem import GangRow, Problem, Solution, Status
from .base import Action, ClassFields, ClassReason, ClusterEvent, Emit, ModelChange, PreFilter, Requeue, Resource, Waiting

if TYPE_CHECKING:
    from ..planning.classes import ClassInfo
    from ..planning.compile import Compiled
    from .context import Batch, ClassSpec, ProblemBuilder


@dataclass(slots=True)
class GangInfo:
    """One gang of the batch: its quorum, members bound and pending, and the classes its pending pods form."""

    key: str
    min_member: int
    bound: int
    pending: int
    classes: list[int] = field(default_factory=list)
    within: str | None = None
    bound_domains: frozenset[str] = frozenset()  # values of `within` where bound members run
    short_of: tuple[str, ...] = ()  # minResources the cluster's free room cannot cover (Coscheduling PreFilter)
    created: str = ""  # when the gang entered the line (engine.model.queue_order.entered): older gangs go first
    quorum: str = "minMember"  # what the group calls its minimum: minCount for a scheduling.k8s.io PodGroup


class Coscheduling(ClassFields, PreFilter, Emit, ClassReason, Requeue):
    name, code = "Coscheduling", Code.GANG_INCOMPLETE
    events = (ClusterEvent(Resource.POD, Action.ADD), ClusterEvent(Resource.POD_GROUP, Action.ADD | Action.UPDATE))

    def class_fields(self, pod: Pod) -> tuple:
        return (pod.gang,)  # its gang (members are placed all or nothing)

    def hint(self, waiting: Waiting, change: ModelChange) -> bool:
        """A gang waits for members: a new pending member wakes it in the queue itself (its unit is the gang), so a
        pod taking a node helps no gang; a PodGroup added or changed may."""
        return change.resource is not Resource.POD

    def emit(self, build: ProblemBuilder) -> None:
        """One Gang row per gang that still needs pending members; its classes point at it."""
        build.gangs = gang_infos(build.batch.cluster, build.view, build.classes)
        for g, gi in enumerate(build.gangs):
            partition = domains = None
            if gi.within is not None:
                partition = build.partitions.of_domains(gi.within)
                if gi.bound_domains:
                    domains = build.partitions.ids(partition, gi.bound_domains)
            need = max(0, gi.min_member - gi.bound)
            if gi.short_of:
                need = gi.pending + 1  # cannot start: the cluster lacks the room its minResources asks for
            build.problem.gangs.append(GangRow(tuple(gi.classes), need, partition, domains))
            for a in gi.classes:
                build.problem.classes[a].gang = g

    def prefilter(self, spec: ClassSpec, batch: Batch) -> Rejection | None:
        """A gang with fewer members pending than it needs (upstream's PreEnqueue for native gangs, Coscheduling's
        PreFilter): no node is looked at, as no node can start it (UnschedulableAndUnresolvable, as upstream's)."""
        reason = _waiting_in(batch).get(spec.sample.gang) if spec.sample.gang is not None else None
        return None if reason is None else Rejection(self.name, (reason,), resolvable=False)

    def class_reason(self, compiled: Compiled, solution: Solution, c: int, state: GreedyState) -> tuple[str, bool] | None:
        g = compiled.problem.classes[c].gang
        return None if g is None else _reason(compiled, solution, g, state)

    def class_code(self, compiled: Compiled, c: int, crowded: bool) -> Code:
        """A gang that did not start for its one domain (it does not fit in one, even alone): Topology; for room (the
        batch took it, or the cluster lacks it): Capacity. A gang short of members is its PreFilter's (GangIncomplete)."""
        gi = compiled.gangs[compiled.problem.classes[c].gang or 0]
        return Code.TOPOLOGY if gi.within and not crowded and not gi.short_of else Code.CAPACITY


def gang_infos(cluster: Cluster, view: View, classes: list[ClassInfo]) -> list[GangInfo]:
    """The batch's gangs in order of their first class, with their bound members counted; gangs whose quorum
    bound members already reach are not gangs of this batch, nor those the cluster does not list (preemption asks
    the filters alone of a few members of a gang, without it)."""
    members: dict[str, list[int]] = defaultdict(list)
    for a, info in enumerate(classes):
        if info.sample.gang is not None and info.sample.gang in cluster.gangs:
            members[info.sample.gang].append(a)
    if not members:
        return []
    bound: dict[str, list[Pod]] = defaultdict(list)
    for pod in cluster.bound:
        if pod.gang in members:
            bound[pod.gang].append(pod)
    out = []
    times = entered(cluster.pending, cluster.gangs)
    for key, in_batch in members.items():
        gang = cluster.gangs[key]
        found = GangInfo(key, gang.min_member, len(bound[key]), sum(len(classes[a].pods) for a in in_batch), in_batch,
                         gang.within, _domains(cluster, gang.within, bound[key]), _short_of(view, gang.min_resources),
                         times.get(key, gang.created), quorum_name(gang))
        if found.min_member - found.bound > 0:
            out.append(found)
    return out


def _domains(cluster: Cluster, within: str | None, members: list[Pod]) -> frozenset[str]:
    """The `within` values where the gang's bound members run. A member on a node without a value ("", which
    `Partitions.of_domains` counts as no domain) leaves the gang none to grow in, as upstream's placement refuses a
    group whose scheduled pods are in no domain."""
    if not within or not members:
        return frozenset()
    labels = {n.name: n.labels for n in cluster.nodes}
    return frozenset(labels[p.node_name].get(within, "") for p in members if p.node_name in labels)


def _short_of(view: View, min_resources: tuple[tuple[str, int], ...]) -> tuple[str, ...]:
    """Resources of a PodGroup's minResources beyond the cluster's total free room: Coscheduling's
    PreFilter rejects such a gang before trying any member."""
    if not min_resources:
        return ()
    free = np.maximum(view.free_of(tuple(r for r, _ in min_resources)), 0).sum(axis=0).tolist()
    return tuple(f"{r} {want} > {room} free" for (r, want), room in zip(min_resources, free) if want > room)


def fit_alone(problem: Problem, g: int) -> int:
    """How many pending members of gang g could be placed if the rest of the batch did not exist
    (within one domain, the best one, for a gang that must stay in one)."""
    gang = problem.gangs[g]
    alone = _members_only(problem, gang)
    if alone is None:  # a row ties a member to other classes: keep every class, the others emptied
        members = set(gang.classes)
        classes = [replace(cls, count=cls.count if i in members else 0, gang=None)
                   for i, cls in enumerate(problem.classes)]
        alone = replace(problem, classes=classes, gangs=[])
    else:
        gang = replace(gang, classes=tuple(range(len(gang.classes))))
    if gang.partition is None:
        return sum(greedy(alone).values())
    return members_that_fit(GreedyState(alone), alone, gang)


def _members_only(problem: Problem, gang: GangRow) -> Problem | None:
    """The gang's classes alone, as a problem of their own (numbered from 0), when no row of the problem names
    one of them (else None): explaining a batch of many gangs asked a greedy over every class once per gang."""
    members = set(gang.classes)
    rows: list[tuple[int, ...]] = [
        *((s.subject, *s.others) for s in problem.separations),
        *((*c.carriers, *c.supporters, *c.seeders) for c in problem.colocations),
        *((s.subject, *s.counted) for s in problem.spreads),
        *((s.subject, *s.counted) for s in problem.limits),
        *(b.classes for b in problem.budgets), *(s.classes for s in problem.shares),
        *(classes for classes, _ in problem.openings), *problem.exclusive]
    if any(members.intersection(row) for row in rows):
        return None
    classes = [replace(problem.classes[c], gang=None) for c in gang.classes]
    return replace(problem, classes=classes, gangs=[], separations=[], colocations=[], spreads=[], limits=[],
                   budgets=[], shares=[], openings=[], exclusive=[])


def _members_shape(problem: Problem, g: int) -> tuple | None:
    """What `fit_alone` and `members_that_fit` read of gang g, when that is all (no row names a member; None
    otherwise): gangs of one shape get one answer (626 equal gangs left out on 5,000 nodes ran 626 greedies)."""
    gang = problem.gangs[g]
    if _members_only(problem, gang) is None:
        return None
    members = sorted(gang.classes, key=lambda c: -problem.classes[c].rank)  # the greedy's order, not its ranks
    return (tuple((problem.classes[c].demand, problem.classes[c].candidates, problem.classes[c].max_per_node,
                   problem.classes[c].count, problem.classes[c].per_node_check) for c in members),
            gang.need, gang.partition, gang.domains)


def _asked(compiled: Compiled, key: tuple, answer: Callable[[], int]) -> int:
    """`answer()`, once per key that has a shape (compiled.memo)."""
    if key[-1] is None:
        return answer()
    if key not in compiled.memo:
        compiled.memo[key] = answer()
    return int(compiled.memo[key])  # type: ignore[call-overload]


def _waiting_in(batch: Batch) -> dict[str, str]:
    """The batch's gangs that cannot start whatever the nodes hold, with why (`waiting_for_members`): their pending members
    (the batch's pods) and bound ones (the cluster's) counted once per batch (`batch.memo`)."""
    if (known := batch.memo.get(Coscheduling.name)) is not None:
        return known
    pending: dict[str, int] = defaultdict(int)
    for pod in batch.cluster.pending:
        if pod.gang is not None:
            pending[pod.gang] += 1
    bound: dict[str, int] = defaultdict(int)
    for pod in batch.cluster.bound:
        if pod.gang in pending:
            bound[pod.gang] += 1
    out = {}
    for key, count in pending.items():
        gang = batch.cluster.gangs.get(key)
        if gang is not None and (reason := waiting_for_members(GangInfo(key, gang.min_member, bound[key], count,
                                                                         quorum=quorum_name(gang)))) is not None:
            out[key] = reason
    batch.memo[Coscheduling.name] = out
    return out


def waiting_for_members(gi: GangInfo) -> str | None:
    """Why gang gi cannot start whatever the nodes hold: fewer members pending than it needs, None if enough are. No
    count of the members pending: the message stays the same while they arrive one by one, so the loop patches each
    member's condition once, not once per arrival (a gang of n created pod by pod: n, not n²/2). Only a new member or
    its group can help (the kind's hint), so the queue wakes its pods only then."""
    need = gi.min_member - gi.bound
    if gi.pending < need:
        return f"gang {gi.key} could not be completed: waiting for {need} of its members to be pending " \
               f"({_quorum(gi)})"
    return None


def quorum_name(gang: Gang) -> str:
    """What the group calls its minimum: minCount for a scheduling.k8s.io PodGroup, else minMember."""
    return "minCount" if gang.label == SCHEDULING_GROUP else "minMember"


def _quorum(gi: GangInfo) -> str:
    """The gang's quorum as every message cites it: "minMember 4, 1 already bound"."""
    bound = f", {gi.bound} already bound" if gi.bound else ""
    return f"{gi.quorum} {gi.min_member}{bound}"


def _held_back(compiled: Compiled, gi: GangInfo) -> str:
    """Members refused before any node is looked at (a PreFilter: a claim not created yet, or missing), said with the
    first one's reason: it, not the nodes, is what the gang waits for ("" if none is)."""
    held = [(a, r) for a in gi.classes for r in compiled.classes[a].rejected.keys if r.pre_filter]
    if not held:
        return ""
    a, rejection = held[0]
    count = sum(len(compiled.classes[b].pods) for b, _ in held)
    return (f", and {count} member(s) cannot go on any node yet ({compiled.classes[a].pods[0].key}: "
            f"{joined(rejection.reasons)})")


def _reason(compiled: Compiled, solution: Solution, g: int, state: GreedyState) -> tuple[str, bool] | None:
    """Why gang g did not start, and whether the rest of the batch is to blame (None if it started); `state` is
    the plan replayed, to count the members that fit beside it."""
    gi = compiled.gangs[g]
    need = gi.min_member - gi.bound
    placed = sum(solution.class_counts().get(m, 0) for m in gi.classes)
    if placed >= need:
        return None
    if gi.short_of:  # said with the nodes: room freed anywhere may help it
        return (f"gang {gi.key} could not be started: its PodGroup's minResources exceed the cluster's free room "
                f"({', '.join(gi.short_of)})"), False
    head = f"gang {gi.key} could not be completed: needs {need}"
    shape = _members_shape(compiled.problem, g)
    fit = _asked(compiled, ("alone", shape), lambda: fit_alone(compiled.problem, g))
    where = f" in one {gi.within} domain" if gi.within else ""
    if fit < need:
        return f"{head}{where} ({_quorum(gi)}); only {fit} fit{where}, even alone{_held_back(compiled, gi)}", False
    beside = _asked(compiled, ("beside", state, shape),
                    lambda: members_that_fit(state, compiled.problem, compiled.problem.gangs[g]))
    if solution.status is Status.OPTIMAL and beside < need:
        return (f"{head}{where} ({_quorum(gi)}); only {beside} of its {gi.pending} pending "
                f"member(s) fit beside the rest of the plan ({fit} fit alone), and the plan is proven optimal: making "
                "room for the whole gang would leave out pods that count more (higher priority, or more of them)"), True
    return (f"{head}{where} ({_quorum(gi)}); {need} fit alone, but the rest of the batch took "
            "the room"), True


KIND = Coscheduling()
