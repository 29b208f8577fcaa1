"""Coscheduling gangs: at least minMember pods of a group (bound members included) start in one batch, or
none. A gang with fewer members pending than it needs is rejected before any node is looked at (upstream's
PreEnqueue for native gangs, Coscheduling's PreFilter); a PodGroup's minResources beyond the cluster's free room keeps
the gang out too, said with the nodes; `within` keeps every member in one topology domain. Which gang a pod belongs to
is model data (engine.model.gangs), decided once when the cluster is built."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from ..devices.dra_domains import DeviceDomain, device_domain
from ..model.cluster import SCHEDULING_GROUP, Cluster, Gang, Pod
from ..model.queue_order import entered
from ..model.reasons import Code
from ..model.rejections import Rejection, joined
from ..model.view import View
from ..solve import topology
from ..solve.greedy import GreedyState, greedy, members_that_fit
from ..solve.problem import NO_DOMAIN, GangRow, GangSet, LeastPerDomain, PreferredLevel, Problem, Solution, Status
from .base import Action, ClassFields, ClassReason, ClusterEvent, Emit, ModelChange, PreFilter, Requeue, Resource, Waiting

if TYPE_CHECKING:
    from ..planning.classes import ClassInfo
    from ..planning.compile import Compiled
    from .context import Batch, ClassSpec, Partitions, ProblemBuilder


@dataclass(slots=True)
class GangInfo:
    """One gang of the batch: its quorum, members bound and pending, and the classes its pending pods form."""

    key: str
    min_member: int
    bound: int
    pending: int
    classes: list[int] = field(default_factory=list)
    within: str | None = None
    bound_on: tuple[dict[str, str], ...] = ()  # the labels of the node each bound member runs on
    short_of: tuple[str, ...] = ()  # minResources the cluster's free room cannot cover (Coscheduling PreFilter)
    created: str = ""  # when the gang entered the line (engine.model.queue_order.entered): older gangs go first
    quorum: str = "minMember"  # what the group calls its minimum: minCount for a scheduling.k8s.io PodGroup
    prefer: tuple[str, ...] = ()  # topology keys: the fewest domains of each, the first first
    least: tuple[str, int] | None = None  # (key, n): a domain of key holding a member holds at least n

    def bound_values(self, key: str) -> list[str]:
        """The values of topology key `key` where bound members run, one per member ("": a node without one, which
        `Partitions.of_domains` counts as no domain: upstream's placement refuses a group whose scheduled pods are
        in none)."""
        return [labels.get(key, "") for labels in self.bound_on]
    device: DeviceDomain | None = None  # `within device attribute`: every member's devices in one value of it
    device_values: frozenset[str] = frozenset()  # its values on the devices bound members hold
    device_source: str = ""  # the policy that asked for it


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
            need = max(0, gi.min_member - gi.bound)
            if gi.short_of:
                need = gi.pending + 1  # cannot start: the cluster lacks the room its minResources asks for
            build.problem.gangs.append(_row(build, gi, need))
            for a in gi.classes:
                build.problem.classes[a].gang = g
        for gang_set in gang_sets(build.batch.cluster, build.gangs, build.partitions):
            for g in gang_set.gangs:
                build.problem.gangs[g].in_set = len(build.problem.gang_sets)
            build.problem.gang_sets.append(gang_set)

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


def _row(build: ProblemBuilder, gi: GangInfo, need: int) -> GangRow:
    """Gang gi as the solver's row: its classes, quorum and topology levels over the partitions of their keys (the
    required one paired with a device attribute's values, when it has one)."""
    partitions = build.partitions
    partition = domains = None
    if gi.within is not None:
        partition = partitions.of_domains(gi.within)
        if gi.bound_on:
            domains = partitions.ids(partition, gi.bound_values(gi.within))
    partition, domains = _device_partition(build, gi, partition, domains)
    prefer = tuple(PreferredLevel(p, partitions.ids(p, gi.bound_values(key)))
                   for key in gi.prefer for p in [partitions.of_domains(key)])
    least = None
    if gi.least is not None:
        p = partitions.of_domains(gi.least[0])
        bound = Counter(d for v in gi.bound_values(gi.least[0]) for d in partitions.ids(p, (v,)))
        least = LeastPerDomain(p, gi.least[1], tuple(sorted(bound.items())))
    return GangRow(tuple(gi.classes), need, partition, domains, prefer, least)


def gang_sets(cluster: Cluster, gangs: list[GangInfo], partitions: Partitions) -> list[GangSet]:
    """The batch's CompositePodGroup gangs (`gang.minGroupCount`): their children in the batch, started together,
    counting children already started (bound members at their quorum), in one domain of the composite's key (where
    bound members of any child run, if some do)."""
    by_composite: dict[str, list[int]] = defaultdict(list)
    for g, gi in enumerate(gangs):
        parent = cluster.gangs[gi.key].composite
        if parent is not None and parent in cluster.composite_groups:
            by_composite[parent].append(g)
    out = []
    labels = {n.name: n.labels for n in cluster.nodes} if by_composite and cluster.bound else {}
    for key, members in by_composite.items():
        composite = cluster.composite_groups[key]
        children = [group for group in cluster.native_groups.values()
                    if group.namespace == composite.namespace and group.parent == composite.name]
        names = {c.name for c in children}
        bound = [p for p in cluster.bound if p.namespace == composite.namespace and p.scheduling_group in names]
        counts = Counter(p.scheduling_group for p in bound)
        started = sum(1 for c in children if c.min_member and counts[c.name] >= c.min_member)
        need = max(0, composite.min_groups - started)
        partition = domains = None
        if composite.topology_key is not None:
            partition = partitions.of_domains(composite.topology_key)
            if bound:
                domains = partitions.ids(partition, [labels.get(p.node_name or "", {}).get(composite.topology_key, "")
                                                     for p in bound])
        if need or partition is not None:
            out.append(GangSet(tuple(members), need, partition, domains))
    return out


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
    labels = {n.name: n.labels for n in cluster.nodes} if bound else {}
    memo: dict = {}
    times = entered(cluster.pending, cluster.gangs)
    for key, in_batch in members.items():
        gang = cluster.gangs[key]
        found = GangInfo(key, gang.min_member, len(bound[key]), sum(len(classes[a].pods) for a in in_batch), in_batch,
                         gang.within, tuple(labels[p.node_name] for p in bound[key] if p.node_name in labels),
                         _short_of(view, gang.min_resources), times.get(key, gang.created), quorum_name(gang),
                         gang.prefer, gang.least)
        if found.min_member - found.bound > 0:
            out.append(_with_device(found, gang, cluster, bound[key], memo))
    return out


def _with_device(gi: GangInfo, gang: Gang, cluster: Cluster, members: list[Pod], memo: dict) -> GangInfo:
    """The gang with its device attribute's domains (engine.devices.dra_domains) and the values of it on the devices
    its bound members hold: as bound members fix a label's domain, their allocated devices fix the value (a bound
    member holding a device of those drivers without a value leaves the gang none, "")."""
    if gang.device_within is None:
        return gi
    domain = device_domain(memo, cluster.devices, gang.device_within)
    claims = cluster.devices.claims
    held: set[str] = set()
    for pod in members:
        for _, name in pod.resource_claims:
            claim = claims.get(f"{pod.namespace}/{name}") if name else None
            if claim is not None and claim.allocated:
                held |= domain.values_held(claim.allocated)
    return replace(gi, device=domain, device_values=frozenset(held), device_source=gang.device_source)


def _device_partition(build: ProblemBuilder, gi: GangInfo, partition: int | None,
                      domains: frozenset[int] | None) -> tuple[int | None, frozenset[int] | None]:
    """The gang's partition with its device attribute's values (each node in the value of its devices; with a
    `within` label too, in the pair of both), and the domains its bound members leave it."""
    if gi.device is None:
        return partition, domains
    nodes = build.view.nodes
    label = build.partitions.parts[partition] if partition is not None else [0] * len(nodes)
    names = {c: f"{v}, " for v, c in build.partitions.values[partition].items()} if partition is not None else {}
    values: dict[str, int] = {}  # a domain's name: its value ("z1, A" with a label's)
    column, allowed = [], set()
    for node, code in zip(nodes, label):
        value = gi.device.node_value(node)
        if not value or code == NO_DOMAIN:
            column.append(NO_DOMAIN)
            continue
        d = values.setdefault(f"{names.get(code, '')}{value}", len(values))
        column.append(d)
        if (domains is None or code in domains) and (not gi.device_values or value in gi.device_values):
            allowed.add(d)
    key = f"\0device {gi.device.attribute}\0{partition}"
    fixed = domains is not None or bool(gi.device_values)
    return build.partitions.of_column(key, column, values), frozenset(allowed) if fixed else None


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
    alone, gang = _alone(problem, g)
    if gang.partition is None and gang.least is None:
        return sum(greedy(alone).values())
    return members_that_fit(GreedyState(alone), alone, gang)


def _alone(problem: Problem, g: int) -> tuple[Problem, GangRow]:
    """Gang g's members as a problem without the rest of the batch, and the gang's row in it."""
    gang = problem.gangs[g]
    alone = _members_only(problem, gang)
    if alone is None:  # a row ties a member to other classes: keep every class, the others emptied
        members = set(gang.classes)
        classes = [replace(cls, count=cls.count if i in members else 0, gang=None)
                   for i, cls in enumerate(problem.classes)]
        return replace(problem, classes=classes, gangs=[], gang_sets=[]), gang
    return alone, replace(gang, classes=tuple(range(len(gang.classes))))


def best_domain(problem: Problem, g: int, partition: int) -> tuple[int, int]:
    """(members, domain): the domain of `partition` where the most of gang g's pending members fit, the rest of the
    batch aside (NO_DOMAIN when none fits anywhere): what an explanation names ("rack r3 has room for 6")."""
    alone, gang = _alone(problem, g)
    level = replace(gang, prefer=(PreferredLevel(partition),), in_set=None)
    state = GreedyState(alone)
    at = [(d, region) for region in topology.regions(alone, level, state, enough=1)
          for p, d in region if p == partition]  # the regions inside one domain of the level
    fits = topology.fit_by_region(state, alone, level, [region for _, region in at])
    count, d = max(((k, -d) for k, (d, _) in zip(fits, at)), default=(0, NO_DOMAIN))
    return (count, -d) if count else (0, NO_DOMAIN)


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
    return replace(problem, classes=classes, gangs=[], gang_sets=[], separations=[], colocations=[], spreads=[], limits=[],
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
            gang.need, gang.partition, gang.domains, gang.prefer, gang.least)


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
    """What the group calls its minimum: minCount for a scheduling.k8s.io PodGroup, size for a workload's gang (its
    object's pods at once), else minMember."""
    return "minCount" if gang.label == SCHEDULING_GROUP else "size" if gang.workload else "minMember"


def _quorum(gi: GangInfo) -> str:
    """The gang's quorum as every message cites it: "minMember 4, 1 already bound"."""
    bound = f", {gi.bound} already bound" if gi.bound else ""
    asked = f"; device attribute asked by {gi.device_source}" if gi.device_source else ""
    return f"{gi.quorum} {gi.min_member}{bound}{asked}"


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


def _where(gi: GangInfo) -> str:
    """Where the gang must stay, in words naming its domain (`_quorum` cites the policy asking for a device
    attribute)."""
    where = f" in one {gi.within} domain" if gi.within else ""
    if gi.device is not None:
        where += f"{' and' if where else ''} in one value of device attribute {gi.device.attribute}"
    return where


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
    if (held := _set_reason(compiled, solution, g)) is not None:
        return held, False
    shape = _members_shape(compiled.problem, g)
    fit = _asked(compiled, ("alone", shape), lambda: fit_alone(compiled.problem, g))
    where = _where(gi)
    if fit < need:
        return (f"{head}{where} ({_quorum(gi)}); only {fit} fit{where}, even alone{_most_room(compiled, g)}"
                f"{_held_back(compiled, gi)}"), False
    beside = _asked(compiled, ("beside", state, shape),
                    lambda: members_that_fit(state, compiled.problem, compiled.problem.gangs[g]))
    if solution.status is Status.OPTIMAL and beside < need:
        return (f"{head}{where} ({_quorum(gi)}); only {beside} of its {gi.pending} pending "
                f"member(s) fit beside the rest of the plan ({fit} fit alone), and the plan is proven optimal: making "
                "room for the whole gang would leave out pods that count more (higher priority, or more of them)"), True
    return (f"{head}{where} ({_quorum(gi)}); {need} fit alone, but the rest of the batch took "
            "the room"), True


def _value(compiled: Compiled, partition: int, d: int, key: str) -> str:
    """Domain d of a partition by its label value (the first node in it says)."""
    part = compiled.problem.partitions[partition]
    return next((compiled.cluster.nodes[n].labels.get(key, "") for n in range(len(part)) if part[n] == d), "")


def _most_room(compiled: Compiled, g: int) -> str:
    """Where a gang held to one domain fits best, in words: " (rack r3 has room for 6, the most)"."""
    row, gi = compiled.problem.gangs[g], compiled.gangs[g]
    if row.partition is None or gi.within is None:
        return ""
    count, d = best_domain(compiled.problem, g, row.partition)
    return "" if d == NO_DOMAIN else f" ({gi.within} {_value(compiled, row.partition, d, gi.within)} has room for " \
                                      f"{count}, the most)"


@dataclass(frozen=True, slots=True)
class GangSpan:
    """Where a started gang with topology levels runs: per level (its required one first), the domains its members
    occupy (bound ones included); and, when it spans more than one domain of its first preferred level, why."""

    levels: tuple[tuple[str, tuple[str, ...]], ...]
    note: str = ""

    def to_dict(self) -> dict[str, object]:
        return {"levels": {key: list(values) for key, values in self.levels}, **({"note": self.note} if self.note else {})}


def gang_spans(compiled: Compiled, solution: Solution) -> dict[str, GangSpan]:
    """Each started gang's spans over its levels (the dry-run's `topology`; gangs without levels are left out)."""
    out = {}
    counts = solution.class_counts()
    on: dict[int, list[int]] = defaultdict(list)  # class -> the nodes it is placed on
    for (c, n), k in solution.placed.items():
        if k:
            on[c].append(n)
    for g, gi in enumerate(compiled.gangs):
        row = compiled.problem.gangs[g]
        if not (gi.within or gi.prefer) or sum(counts.get(c, 0) for c in gi.classes) < row.need:
            continue
        labels = [compiled.cluster.nodes[n].labels for c in gi.classes for n in on[c]]
        labels += list(gi.bound_on)
        keys = ([gi.within] if gi.within else []) + list(gi.prefer)
        levels = tuple((key, tuple(sorted({lab.get(key, "") for lab in labels}))) for key in keys)
        out[gi.key] = GangSpan(levels, _span_note(compiled, solution, g, dict(levels)))
    return out


def _span_note(compiled: Compiled, solution: Solution, g: int, levels: dict[str, tuple[str, ...]]) -> str:
    """Why a gang spans more than one domain of its first preferred level (empty when it does not)."""
    gi, row = compiled.gangs[g], compiled.problem.gangs[g]
    if not gi.prefer or len(levels[gi.prefer[0]]) < 2:
        return ""
    key, partition = gi.prefer[0], row.prefer[0].partition
    count, d = best_domain(compiled.problem, g, partition)
    most = f" ({key} {_value(compiled, partition, d, key)} has room for {count}, the most)" if d != NO_DOMAIN else ""
    fewest = ("the fewest that fit" if solution.status is Status.OPTIMAL
              else "not proven the fewest within the time limit")
    return (f"gang {gi.key} spans {len(levels[key])} {key} domains ({', '.join(levels[key])}): no one {key} domain "
            f"has room for its {gi.pending} pending member(s){most}; {fewest}; preferred level {key} not held")


def _set_reason(compiled: Compiled, solution: Solution, g: int) -> str | None:
    """Why gang g waits for its CompositePodGroup (None: it starts with none, or its set started)."""
    s = compiled.problem.gangs[g].in_set
    if s is None:
        return None
    gang_set = compiled.problem.gang_sets[s]
    counts = solution.class_counts()
    started = sum(1 for h in gang_set.gangs
                  if sum(counts.get(c, 0) for c in compiled.problem.gangs[h].classes) >= compiled.problem.gangs[h].need)
    if started >= gang_set.need:
        return None
    gi = compiled.gangs[g]
    composite = compiled.cluster.composite_groups[compiled.cluster.gangs[gi.key].composite or ""]
    where = f", in one {composite.topology_key} domain" if composite.topology_key else ""
    return (f"composite pod group {composite.key} could not be completed: needs {gang_set.need} of its "
            f"{len(gang_set.gangs)} pod group(s) with pending pods started together{where} (minGroupCount "
            f"{composite.min_groups}), and only {started} could be")


KIND = Coscheduling()
