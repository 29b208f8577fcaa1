"""Compile the cluster model plus rule IR into the solver's class-level problem, in named steps.

Pending pods become classes (`classes.py`); every constraint kind's static filter rejects the nodes a class
cannot use and its score rates the rest; then every kind emits its rows into one `ProblemBuilder` (as DCM
has one function per constraint kind). The kinds are `engine.kinds`' tuples per phase; nothing here names one.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from ..kinds import EMITTERS, FILTERS, PRE_FILTERS, ScorePart, fields_in, score_parts, visible_label_keys
from ..kinds.context import Batch, ClassMatcher, ClassSpec, Partitions, ProblemBuilder
from ..model.cluster import Cluster, Moment, Pod
from ..model.rejections import Rejections
from ..model.view import View
from ..quotas.tenants import Asking, Usage
from ..solve.problem import PodClass, Problem
from .classes import ClassInfo, Level, PolicyRules, group_pods, priority_weights, queue_positions

if TYPE_CHECKING:
    from ..kinds.gangs import GangInfo

__all__ = ["ClassInfo", "Compiled", "Deadline", "PolicyRules", "compile_cluster"]


@dataclass(slots=True)
class Compiled:
    cluster: Cluster
    problem: Problem
    classes: list[ClassInfo]
    gangs: list[GangInfo]
    view: View  # the cluster's pods as compile read them
    notes: list[str] = field(default_factory=list)
    usage: Usage | None = None  # what the tenants' bound pods use before the plan (None: no quotas)
    moment: Moment = Moment()  # when the batch is planned, and the reservations it is planned beside
    # answers explanations reuse across the batch's classes (kinds.gangs: a gang's members that fit, by shape)
    memo: dict[tuple, object] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class Deadline:
    """When compile stops checking more pod classes: `at` on `clock` (None: never)."""

    at: float | None = None
    clock: Callable[[], float] = time.perf_counter

    @classmethod
    def after(cls, seconds: float | None) -> Deadline:
        """`seconds` from now (None: never)."""
        return cls(None if seconds is None else time.perf_counter() + seconds)

    def passed(self) -> bool:
        return self.at is not None and self.clock() >= self.at


@dataclass(frozen=True, slots=True)
class Candidates:
    """A class's candidate nodes (those passing every static filter) and one pod's soft score on each."""

    nodes: tuple[int, ...] = ()
    scores: tuple[int, ...] = ()  # () when every candidate scores 0


class NodeTuples:
    """Candidate node tuples, shared: classes with the same candidates get the same tuple, made of one
    set of int objects. At 20,000 nodes and hundreds of classes, a fresh tuple of fresh ints per class is
    millions of objects (memory, and time whenever the garbage collector walks them)."""

    def __init__(self, size: int):
        self.ints = list(range(size))
        self.known: dict[bytes, tuple[int, ...]] = {}

    def of(self, nodes: np.ndarray) -> tuple[int, ...]:
        key = nodes.tobytes()
        if key not in self.known:
            ints = self.ints
            self.known[key] = tuple([ints[i] for i in nodes.tolist()])
        return self.known[key]


@dataclass(slots=True)
class ClassesChecked:
    """The classes after the static filters: each class's facts, rejections and candidates, and which
    classes compile left unchecked because the time limit came first."""

    infos: list[ClassInfo]
    candidates: list[Candidates]
    unchecked: list[int]


def compile_cluster(cluster: Cluster, policy: PolicyRules | None = None, deadline: Deadline | None = None,
                    view: View | None = None, usage: Usage | None = None, moment: Moment = Moment()) -> Compiled:
    """The class-level problem of a cluster snapshot (and policies).

    Classes are checked (static filters, candidates, scores) highest priority first; once `deadline` has
    passed the rest are left unchecked — no candidates, every node rejected as not checked, and the
    solver's status and strategy say so — so compile cannot overrun a time limit on any input. The caller
    gives it the time limit of the whole solve (`Deadline.after(time_limit)`): the starting plans that
    follow cost a fraction of compile. `view` is the view of the cluster's bound pods when the caller has it
    already (preemption re-plans on views of one table); it must describe `cluster.nodes` and `cluster.bound`;
    `usage`, what the bound pods use of `cluster.quotas`, likewise (the loop keeps it across cycles). `moment`:
    the plan's now and the reservations the batch is planned beside (none: no time in the plan).
    """
    return _compile(cluster, policy, deadline or Deadline(), view or View.of(cluster.nodes, cluster.bound), usage,
                    moment)


def _compile(cluster: Cluster, policy: PolicyRules | None, deadline: Deadline, view: View,
             usage: Usage | None, moment: Moment) -> Compiled:
    if usage is None and cluster.quotas:
        usage = Usage.of(cluster.quotas, cluster.bound)
    asking = Asking.of(usage, cluster.pending, cluster.gangs) if usage is not None else None
    lending = asking.borrowing if asking is not None else frozenset()
    grouped = group_pods(cluster, policy, lambda rule_sets: visible_label_keys(rule_sets, view), fields_in(cluster, moment, view),
                         lending)
    batch = Batch(cluster, view, [rules for _, rules in grouped], ClassMatcher([pods[0] for pods, _ in grouped]),
                  usage=usage, asking=asking, moment=moment)
    checked = _check_classes(grouped, batch, deadline, lending)
    classes = checked.infos
    notes: list[str] = []
    problem = Problem(resources=(), free=[])
    problem.classes = _pod_classes(cluster, classes, checked.candidates, notes)
    build = ProblemBuilder(batch, classes, Partitions(view), problem, frozenset(checked.unchecked))
    for kind in EMITTERS:
        kind.emit(build)
    if problem.keeps:
        _weigh_keeps(build, notes)
    _rank(build)
    problem.partitions = build.partitions.parts
    problem.unchecked = tuple(checked.unchecked)
    if checked.unchecked:
        skip = set(checked.unchecked)
        notes.append(f"compile reached the time limit: {len(classes) - len(skip)} of {len(classes)} pod classes "
                     f"checked (highest priority first); {sum(len(classes[a].pods) for a in skip)} pod(s) of "
                     "the rest are left unplaced")
    return Compiled(cluster, problem, classes, build.gangs, view, notes, usage, moment)


# -- steps ----------------------------------------------------------------------------------------

def _check_classes(grouped: list[tuple[list[Pod], tuple]], batch: Batch, deadline: Deadline,
                   lending: frozenset[str]) -> ClassesChecked:
    """Rejected nodes, candidates and soft scores per class, highest priority first, while the deadline
    allows; classes after it are left unchecked (every node rejected as not checked)."""
    size, nodes = len(grouped), len(batch.view.nodes)
    infos: list[ClassInfo | None] = [None] * size
    candidates = [Candidates()] * size
    shared = NodeTuples(nodes)
    unchecked: list[int] = []
    for a in sorted(range(size), key=lambda a: -grouped[a][0][0].priority):
        pods, rules = grouped[a]
        borrows = pods[0].key in lending
        if deadline.passed():
            infos[a] = ClassInfo(pods, rules, Rejections.unchecked(nodes), borrows)
            unchecked.append(a)
            continue
        spec = ClassSpec(a, pods[0], rules)
        rejected = _filtered(spec, batch, nodes)
        info = infos[a] = ClassInfo(pods, rules, rejected, borrows)
        passing = rejected.passing_array()
        info.score_parts = score_parts(info, passing, batch)  # kept: explain says from them why a node won
        candidates[a] = Candidates(shared.of(passing), node_scores(info.score_parts))
    return ClassesChecked([info for info in infos if info is not None], candidates, sorted(unchecked))


def _filtered(spec: ClassSpec, batch: Batch, nodes: int) -> Rejections:
    """Every kind's verdict on every node: the first PreFilter that fails rejects them all (upstream stops
    there), else each filter in order."""
    rejected = Rejections(nodes)
    for pre in PRE_FILTERS:
        if (verdict := pre.prefilter(spec, batch)) is not None:
            rejected.add(replace(verdict, pre_filter=True), np.ones(nodes, dtype=bool))
            return rejected
    for kind in FILTERS:
        kind.filter(spec, batch, rejected)
    return rejected


def node_scores(parts: tuple[ScorePart, ...]) -> tuple[int, ...]:
    """Per-pod soft score of each candidate node (the sum of every kind's parts but the marginal ones, which the
    solver asks pod by pod); () when every candidate scores 0."""
    parts = tuple(part for part in parts if not part.marginal)
    if not parts:
        return ()
    scores = tuple(np.sum([part.points for part in parts], axis=0).tolist())
    return scores if any(scores) else ()


def _pod_classes(cluster: Cluster, classes: list[ClassInfo], candidates: list[Candidates],
                 notes: list[str]) -> list[PodClass]:
    """One solver class per pod class: its pods, weight, candidates, scores and queue; the kinds' emitters
    complete it (demand, gang, per-node cap)."""
    weights = priority_weights(classes, notes)
    queues = queue_positions(classes, cluster)
    return [PodClass(count=len(info.pods), demand=(), weight=weights[info.level], candidates=candidates[a].nodes,
                     scores=candidates[a].scores, queue=queues[a]) for a, info in enumerate(classes)]


def _weigh_keeps(build: ProblemBuilder, notes: list[str]) -> None:
    """The weights again with the Keep rows' levels counted (each row's shortfall as `least` pods of its level), set
    on the classes and the rows."""
    more: dict[Level, int] = defaultdict(int)
    for keep in build.problem.keeps:
        more[keep.level] += keep.least
    weights = priority_weights(build.classes, notes, dict(more))
    for info, cls in zip(build.classes, build.problem.classes):
        cls.weight = weights[info.level]
    build.problem.keeps = [replace(keep, weight=weights[keep.level]) for keep in build.problem.keeps]


def _rank(build: ProblemBuilder) -> None:
    """Greedy order (ascending; the greedy takes the highest first): priority, the holders of reservations (a
    promise is kept first among its priority, as the line that made it; pods alike but for the room a reservation
    keeps are classes apart, and a younger class must not take the room its holder waits for), gangs (the first in
    line first, engine.model.queue_order), supporters before followers. Within a rank the greedy itself
    orders by pod size."""
    gangs = build.gangs
    age = {g: k for k, g in enumerate(sorted(range(len(gangs)), key=lambda g: (gangs[g].created, gangs[g].key)))}
    holders = {r.holder for r in build.batch.moment.reservations}
    keys = []
    for a, (info, cls) in enumerate(zip(build.classes, build.problem.classes)):
        gang_age = age.get(cls.gang) if cls.gang is not None else None
        holds = bool(holders) and any((p.gang or p.key) in holders for p in info.pods)
        keys.append((info.level, holds, gang_age is not None, -(gang_age or 0), a not in build.followers))
    rank = {k: r for r, k in enumerate(sorted(set(keys)))}
    for cls, key in zip(build.problem.classes, keys):
        cls.rank = rank[key]
