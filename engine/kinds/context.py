"""What the constraint kinds share while one batch is compiled: the batch's classes and which of them a pod
term matches (filters and scores), and the problem under construction (emitters)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..model.cluster import Cluster, LabelSelector, Moment, Pod
from ..model.ir import Constraint, PodTerm
from ..model.view import View
from ..planning.classes import ClassInfo
from ..quotas.tenants import Asking, Usage
from ..solve.problem import NO_DOMAIN, Problem

if TYPE_CHECKING:
    from .gangs import GangInfo


@dataclass(frozen=True, slots=True)
class ClassSpec:
    """One pod class as a filter sees it: its index in the batch, a sample pod, its rules."""

    index: int
    sample: Pod
    constraints: tuple[Constraint, ...]


class ClassMatcher:
    """Which classes of the batch a pod term matches (by their sample pod): what the filters ask to know
    whether the batch itself can support a class, and the emitters to know which classes a rule counts."""

    def __init__(self, samples: list[Pod]):
        self.samples = samples
        self._all: dict[tuple[PodTerm, ...], list[int]] = {}
        self._one: dict[object, list[int]] = {}
        self._in_namespace: dict[str, list[int]] = defaultdict(list)
        self._by_label: dict[tuple[str, str], list[int]] | None = None  # (key, value) -> classes, built when asked
        for j, sample in enumerate(samples):
            self._in_namespace[sample.namespace].append(j)

    def matching(self, term: PodTerm) -> list[int]:
        """Classes whose pods `term` matches (its topology key plays no part, so terms that differ only
        there share one answer)."""
        namespaces, selector = getattr(term, "namespaces", None), getattr(term, "selector", None)
        key = (namespaces, selector) if selector is not None else term
        if key not in self._one:
            scope: Sequence[int]
            if (labelled := self._labelled(selector)) is not None:
                scope = [j for j in labelled if namespaces is None or self.samples[j].namespace in namespaces]
            elif namespaces is None:
                scope = range(len(self.samples))
            else:
                scope = sorted(j for ns in namespaces for j in self._in_namespace.get(ns, ()))
            self._one[key] = [j for j in scope if term.matches(self.samples[j])]
        return self._one[key]

    def _labelled(self, selector: object) -> list[int] | None:
        """The classes that could match a label selector with an `In` requirement (matchLabels: every pod it
        matches has one of the values under that key), in order; None when the selector has no such requirement.
        Only a narrowing: `matches` still decides, so a term costs what it may match, not every class."""
        if not isinstance(selector, LabelSelector) or selector.nothing:
            return None
        wanted = next((r for r in selector.requirements if r.operator == "In"), None)
        if wanted is None:
            return None
        if self._by_label is None:
            self._by_label = defaultdict(list)
            for j, sample in enumerate(self.samples):
                for pair in sample.labels.items():
                    self._by_label[pair].append(j)
        found = [self._by_label.get((wanted.key, value), []) for value in wanted.values]
        return found[0] if len(found) == 1 else sorted({j for js in found for j in js})

    def matching_all(self, terms: tuple[PodTerm, ...]) -> list[int]:
        """Classes whose pods match every one of `terms`."""
        if terms not in self._all:
            if not terms:
                self._all[terms] = list(range(len(self.samples)))
            else:
                rest = terms[1:]
                self._all[terms] = [j for j in self.matching(terms[0]) if all(t.matches(self.samples[j]) for t in rest)]
        return self._all[terms]


@dataclass(slots=True)
class Batch:
    """The batch being compiled, as filters and scores read it: the cluster, the view of its pods, the classes' rules
    and which classes a term matches; `memo` keeps a kind's per-batch state (upstream's CycleState), keyed by the
    kind's name. `alone`: each pod is asked about by itself, every other pod bound in the view (upstream's Filter for
    one pod, as preemption asks it after each trial), rather than as one of a batch placed together (compile)."""

    cluster: Cluster
    view: View
    rules: list[tuple[Constraint, ...]]
    matcher: ClassMatcher
    memo: dict[str, Any] = field(default_factory=dict)
    usage: Usage | None = None  # what the tenants' bound pods use (None: no quotas)
    asking: Asking | None = None  # what the batch's pods ask of their tenants
    alone: bool = False
    moment: Moment = Moment()  # the plan's now and the reservations the batch is planned beside

    @classmethod
    def alone_on(cls, cluster: Cluster, view: View, moment: Moment = Moment()) -> Batch:
        """A batch of pods each asked about alone on `view` (preemption's): no classes of its own to place together."""
        return cls(cluster, view, [], ClassMatcher([]), alone=True, moment=moment)

    def on(self, view: View) -> Batch:
        """The same batch asked about `view` (a trial's: some pods gone, some added), sharing what the kinds worked
        out of the table the views share."""
        assert view.table is self.view.table
        return Batch(self.cluster, view, self.rules, self.matcher, self.memo, self.usage, self.asking, self.alone,
                     self.moment)


WHOLE = "\x00whole cluster"  # no label key can be this: the one-domain partition's key
EACH_NODE = "\x00each node"  # nor this: the partition with one domain per node


class Partitions:
    """Topology keys -> partition indices, each a domain id per node (NO_DOMAIN where the label is absent).

    A partition is the cluster index's label column (value codes, -1 = NO_DOMAIN for nodes without it)."""

    def __init__(self, view: View):
        self.view = view
        self.index: dict[str, int] = {}
        self.parts: list[list[int]] = []
        self.values: list[dict[str, int]] = []
        self._singleton: dict[int, bool] = {}

    def of(self, key: str) -> int:
        if key not in self.index:
            column = self.view.label(key)
            self.index[key] = len(self.parts)
            self.parts.append(column.codes.tolist())
            self.values.append(column.values)
        return self.index[key]

    def of_domains(self, key: str) -> int:
        """Topology key `key` as a workload's topology reads it (1.38's TopologyAwareWorkloadScheduling): a node whose
        label is empty is in no domain (upstream: "a node labeling mistake, not a domain"), unlike a spread's or an
        affinity's key, where "" is a value like any other."""
        p = self.of(key)
        empty = self.values[p].get("")
        if empty is None:
            return p
        values = {v: c for v, c in self.values[p].items() if v != ""}
        return self.of_column(f"{key}\0nonempty", [NO_DOMAIN if c == empty else c for c in self.parts[p]], values)

    def ids(self, p: int, values) -> frozenset[int]:
        """Domain ids of partition p for label values (values no node carries are dropped)."""
        known = self.values[p]
        return frozenset(known[v] for v in values if v in known)

    def whole(self) -> int:
        """A partition with every node in one domain: for rows that count pods across the whole cluster."""
        return self.of_column(WHOLE, [0] * len(self.view.nodes), {"": 0})

    def each_node(self) -> int:
        """A partition with every node a domain of its own (whatever labels the nodes carry)."""
        nodes = self.view.nodes
        return self.of_column(EACH_NODE, list(range(len(nodes))), {n.name: i for i, n in enumerate(nodes)})

    def of_column(self, key: str, part: list[int], values: dict[str, int]) -> int:
        if key not in self.index:
            self.index[key] = len(self.parts)
            self.parts.append(part)
            self.values.append(values)
        return self.index[key]

    def singleton(self, p: int) -> bool:
        """Every node carries the key, each with its own value (as kubernetes.io/hostname does)."""
        if p not in self._singleton:
            part = self.parts[p]
            self._singleton[p] = NO_DOMAIN not in part and len(self.values[p]) == len(part)
        return self._singleton[p]


@dataclass(slots=True)
class ProblemBuilder:
    """What every emitter reads, and the one Problem they all append to. `followers` are classes a kind wants
    placed after the others by the starting plans (they need support from them); `gangs` the gangs the
    problem's Gang rows stand for, in the same order."""

    batch: Batch
    classes: list[ClassInfo]
    partitions: Partitions
    problem: Problem
    unchecked: frozenset[int] = frozenset()
    gangs: list[GangInfo] = field(default_factory=list)
    followers: set[int] = field(default_factory=set)
    memo: dict[str, Any] = field(default_factory=dict)

    @property
    def view(self) -> View:
        return self.batch.view

    @property
    def matcher(self) -> ClassMatcher:
        return self.batch.matcher

    def add_resource(self, name: str, free: list[int], capacity: list[int], demand: list[int],
                     unlimited: Sequence[bool]) -> None:
        """One more capacity row: each node's free and allocatable amount, each class's demand per pod (volumes
        a node can still take are counted like cpu); `unlimited`: the nodes whose amount only stands for "more than
        the batch can use" (a provisioner, devices several nodes reach, no attach limit)."""
        problem = self.problem
        problem.counted = {**problem.counted, name: tuple(bool(u) for u in unlimited)}
        problem.resources = problem.resources + (name,)
        problem.free = [row + (f,) for row, f in zip(problem.free, free)]
        problem.capacity = [row + (c,) for row, c in zip(problem.capacity, capacity)]
        for cls, d in zip(problem.classes, demand):
            cls.demand = cls.demand + (d,)

    def checked(self) -> Iterator[tuple[int, ClassInfo]]:
        """The classes compile checked (an unchecked class places no pod, so its own rules bind nothing)."""
        for a, info in enumerate(self.classes):
            if a not in self.unchecked:
                yield a, info
