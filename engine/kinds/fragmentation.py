"""Less fragmentation (ours, from policies: `prefer less fragmentation of device class "gpu.openb" weight W`): each
candidate node scores by how little one pod of the class grows the node's expected fragmentation, the FGD paper's
measure (Weng et al., USENIX ATC '23; engine.sharing.fragmentation), with FGD's own score (engine.sharing.policies.Fgd:
`sigmoid((before − after) ∕ 1000) × 100`, the GPU the share grows least, whole GPUs the first idle) scaled to 0–W.
Soft only: it orders equally good plans and never costs a pod its place.

A node's GPUs are the devices of the DeviceClass only it reaches (in slice order), each 1000 milli: a device allowing
multiple allocations counts the free share of its consumable capacity (its first capacity by name), any other 1000
when free and 0 when allocated. A pod's shape is its cpu request and its claims' one request of the class (`count`
devices, and a capacity asked as that share of a device's; asking none, whole devices); a pod with none asks for no
GPU. The workload's shapes are the cluster's own pods', running and pending (engine.sharing.fragmentation.
typical_shapes), unless the rule carries its own (a sweep's trace's). The allowed models of a shape are the nodes
whose devices its selectors accept, nodes told apart by their first device's attributes
(engine.devices.dra.device_signature): a node's devices are taken alike.

Those points are what a pod earns alone on the node. In a batch, a pod's worth on a node depends on the pods the plan
puts there before it (two 500 shares fill one idle GPU; each alone breaks one), which no term per pod and node can say:
so the points are shown by explain but left out of the class's scores, and the kind hands the solver marginal scores
instead (`FragmentationScores`, engine.solve.problem.MarginalScores): each starting plan asks them pod by pod on the
nodes as it has filled them so far, FGD's own score on that state, in several orders, and the plans are judged by how
much the expected fragmentation of the nodes they fill grows (`value`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..devices.dra import Allocator, device_signature, taken_devices
from ..devices.dra_capacity import qualified
from ..model.cluster import Cluster, Device, Node, Pod, SubRequest
from ..model.ir import FragmentationPreference
from ..model.reasons import Code
from ..sharing.fragmentation import TaskShape, typical_shapes
from ..sharing.gpus import MILLI, GpuNode, GpuTask, fits, place
from ..sharing.policies import Fgd
from .base import Emit, Score, ScorePart

if TYPE_CHECKING:
    from ..model.view import View
    from ..planning.classes import ClassInfo
    from .context import Batch, ProblemBuilder

NO_NODE = "<no node>"  # the model of a shape whose selectors accept no node's devices


@dataclass(frozen=True, slots=True)
class ClassGpus:
    """The devices of one DeviceClass as the measure reads them: per node its devices (slice order), one device per
    signature (what a shape's selectors are asked of), and each device's free milli."""

    allocator: Allocator
    per_node: dict[str, list[Device]]
    kinds: dict[str, Device]
    free: dict[str, int]

    @classmethod
    def of(cls, cluster: Cluster, device_class: str) -> ClassGpus:
        allocator, taken = Allocator(cluster.devices), taken_devices(cluster.devices)
        found = cluster.devices.classes.get(device_class)
        per_node: dict[str, list[Device]] = {}
        for node, devices in allocator.pinned.items():
            mine = [d for d in devices if found is not None and _selects(allocator, d, found.selectors, device_class)]
            if mine:
                per_node[node] = mine
        kinds = {device_signature(ds[0]): ds[0] for ds in per_node.values()}
        free = {d.key: _free_milli(allocator, d, taken) for ds in per_node.values() for d in ds}
        return cls(allocator, per_node, kinds, free)

    def models(self, selectors: tuple[str, ...]) -> frozenset[str]:
        """The signatures whose devices `selectors` accept (none: any)."""
        if not selectors:
            return frozenset()
        found = frozenset(s for s, d in self.kinds.items() if _selects(self.allocator, d, selectors))
        return found or frozenset({NO_NODE})

    def node(self, node: Node, cpu_free: int) -> GpuNode:
        devices = self.per_node.get(node.name, [])
        return GpuNode(node.name, cpu_free, 0, device_signature(devices[0]) if devices else "",
                       tuple(self.free[d.key] for d in devices))

    def milli(self, sub: SubRequest) -> int:
        """What one device of `sub` takes, in milli of a device: its capacity asked as a share of a device's capacity
        (the first device that has it), else a whole device."""
        if not sub.capacity:
            return MILLI
        name, amount = sub.capacity[0]
        for device in self.kinds.values():
            value = {(d, n): v for d, n, v in device.capacity}.get(qualified(name, device.driver))
            if value:
                return min(MILLI, -(-amount * MILLI // value))
        return MILLI


def _selects(allocator: Allocator, device: Device, selectors: tuple[str, ...], device_class: str | None = None) -> bool:
    """Whether the selectors accept the device (one that errs on it does not: DynamicResources says why)."""
    from ..devices.cel import CelError  # imported where a selector is judged, as engine.devices.dra does
    try:
        return allocator.selectors.matches(device, selectors, device_class)
    except CelError:
        return False


def _free_milli(allocator: Allocator, device: Device, taken: set[str]) -> int:
    """A device's free share in milli: of its first consumable capacity when it allows multiple allocations, else all
    or nothing."""
    shares = allocator.used_shares(device, taken) if device.multiple else []
    if device.key in taken and not shares:
        return 0
    if not device.multiple or not device.capacity:
        return MILLI
    domain, name, value = sorted(device.capacity)[0]
    used = sum(m for share in shares for d, n, m in share if (d, n) == (domain, name))
    return max(0, (value - used) * MILLI // value) if value else 0


def pod_task(pod: Pod, cluster: Cluster, device_class: str, devices: ClassGpus) -> GpuTask | None:
    """A pod's shape for the measure: its cpu and its one request of the class (None: a shape it cannot have, such as
    several requests of the class or a share of several devices)."""
    subs = [r.alternatives[0] for _, name in pod.resource_claims if name
            for claim in [cluster.devices.claims.get(f"{pod.namespace}/{name}")] if claim is not None
            for r in claim.requests if r.alternatives and r.alternatives[0].device_class == device_class]
    cpu = pod.requests.get("cpu", 0)
    if not subs:
        return GpuTask(cpu, 0)
    if len(subs) > 1 or subs[0].all:
        return None
    sub = subs[0]
    milli = devices.milli(sub)
    if sub.count > 1 and milli < MILLI:
        return None
    return GpuTask(cpu, 0, sub.count, milli, devices.models(sub.selectors))


def cluster_shapes(cluster: Cluster, device_class: str, devices: ClassGpus) -> tuple[TaskShape, ...]:
    """The cluster's own pods' shapes, running and pending, as FGD weighs a workload's."""
    tasks = (pod_task(p, cluster, device_class, devices) for p in (*cluster.bound, *cluster.pending))
    return typical_shapes(t for t in tasks if t is not None)


ORDERS = 14  # shuffled orders the starting plans try besides their own two, when marginal scores are in play
VALUE_SCALE = 4 * MILLI  # FGD's points move by weight ∕ 4000 per milli of fragment (sigmoid's slope at 0 is ¼)


def _points(weight: int, score: int) -> int:
    """FGD's score (0–100) scaled to a rule's weight: a pod's points alone (Score) and on a node as a plan filled it
    (FragmentationTracker) alike."""
    return round(weight * score / 100)


@dataclass(frozen=True, slots=True)
class _Term:
    """One rule's say on one class: the rule's nodes (an index into FragmentationScores.rules), its weight, the
    class's pod as the measure reads it."""

    rule: int
    weight: int
    task: GpuTask


@dataclass(frozen=True, slots=True)
class _RuleNodes:
    """FGD over one rule's workload shapes, and every node (by solver index) as the measure reads it before the
    batch."""

    fgd: Fgd
    nodes: list[GpuNode]


@dataclass
class FragmentationScores:
    """The preference as the solver's marginal scores (engine.solve.problem.MarginalScores): a pod's points on a
    node are FGD's score on the node as the plan has filled it so far (None: no device of it has the room); a
    plan's value is, pod by pod over each node it fills (larger asks first, each on the GPUs FGD picks, as Reserve
    serves larger shares first), how little the node's expected fragment grows, weighted and scaled as the points
    are. An answer is kept per rule, node and pod shape while the node is the same state (the trackers of one
    problem share them: they all start from the same nodes)."""

    rules: list[_RuleNodes]
    terms: dict[int, tuple[_Term, ...]]
    orders: int = ORDERS
    classes: frozenset[int] = frozenset()
    _answers: dict[tuple[int, int, GpuTask], tuple[GpuNode, tuple[int, tuple[int, ...]] | None]] = field(
        default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.classes = frozenset(self.terms)

    def answer(self, term: _Term, n: int, node: GpuNode) -> tuple[int, tuple[int, ...]] | None:
        """FGD's score and GPUs for the term's pod on `node` (node n's state now), None if it does not fit."""
        key = (term.rule, n, term.task)
        known = self._answers.get(key)
        if known is None or known[0] is not node:
            found = self.rules[term.rule].fgd.score(node, term.task) if fits(node, term.task) else None
            known = self._answers[key] = (node, found)
        return known[1]

    def tracker(self) -> FragmentationTracker:
        return FragmentationTracker(self, [list(rule.nodes) for rule in self.rules])

    def value(self, placed: dict[tuple[int, int], int]) -> int:
        per_node: dict[tuple[int, int], list[_Term]] = {}
        for (c, n), k in placed.items():
            for term in self.terms.get(c, ()):
                per_node.setdefault((term.rule, n), []).extend([term] * k)
        total = 0.0
        for (r, n), terms in per_node.items():
            fgd, node = self.rules[r].fgd, self.rules[r].nodes[n]
            for term in sorted(terms, key=lambda t: (-t.task.gpu_total, -t.task.cpu_milli)):
                if not fits(node, term.task):
                    continue
                before = fgd.fragment(node.cpu_free, node.gpu_free, node.model)
                node = place(node, term.task, fgd.score(node, term.task)[1])
                total += term.weight * (before - fgd.fragment(node.cpu_free, node.gpu_free, node.model))
        return round(total / VALUE_SCALE)


@dataclass
class FragmentationTracker:
    """One starting plan's nodes as the measure reads them, per rule, changed by every pod it places."""

    scores: FragmentationScores
    nodes: list[list[GpuNode]]
    saved: list[list[GpuNode]] = field(default_factory=list)

    def points(self, c: int, n: int) -> int | None:
        total = 0
        for term in self.scores.terms[c]:
            found = self.scores.answer(term, n, self.nodes[term.rule][n])
            if found is None:
                return None
            total += _points(term.weight, found[0])
        return total

    def place(self, c: int, n: int) -> None:
        """A pod the capacity rows let in where no device has its share (a plan that is not this tracker's own
        pick) leaves the node as it was: Reserve will not serve it either."""
        saved = []
        for term in self.scores.terms[c]:
            node = self.nodes[term.rule][n]
            saved.append(node)
            found = self.scores.answer(term, n, node)
            if found is not None:
                self.nodes[term.rule][n] = place(node, term.task, found[1])
        self.saved.append(saved)

    def undo(self, c: int, n: int) -> None:
        for term, node in zip(self.scores.terms[c], self.saved.pop()):
            self.nodes[term.rule][n] = node


class FragmentationPreferences(Score, Emit):
    name, code = "LessFragmentation", Code.POLICY

    def score(self, info: ClassInfo, candidates: np.ndarray, batch: Batch) -> list[ScorePart]:
        """The points one pod earns alone on each candidate (marginal: explain shows them, the solver asks
        `FragmentationScores`)."""
        parts = []
        for rule in (c for c in info.constraints if isinstance(c, FragmentationPreference)):
            devices, fgd, nodes = self._state(batch, rule)
            task = pod_task(info.sample, batch.cluster, rule.device_class, devices)
            if task is None:
                continue
            points = [_points(rule.weight, fgd.score(nodes[i], task)[0]) for i in candidates.tolist()]
            parts.append(ScorePart(f"less fragmentation of device class {rule.device_class} [{rule.source}]",
                                   np.array(points, dtype=np.int64), marginal=True))
        return parts

    def emit(self, build: ProblemBuilder) -> None:
        """The marginal scores of every class a rule weighs (none: the problem has none)."""
        rules: dict[tuple[str, object], int] = {}
        nodes: list[_RuleNodes] = []
        terms: dict[int, tuple[_Term, ...]] = {}
        for a, info in enumerate(build.classes):
            if a in build.unchecked:
                continue
            for rule in (c for c in info.constraints if isinstance(c, FragmentationPreference)):
                devices, fgd, state = self._state(build.batch, rule)
                task = pod_task(info.sample, build.batch.cluster, rule.device_class, devices)
                if task is None:
                    continue
                key = (rule.device_class, rule.shapes)
                if key not in rules:
                    rules[key] = len(nodes)
                    nodes.append(_RuleNodes(fgd, state))
                terms[a] = (*terms.get(a, ()), _Term(rules[key], rule.weight, task))
        if terms:
            build.problem.marginal = FragmentationScores(nodes, terms, ORDERS)

    def _state(self, batch: Batch, rule: FragmentationPreference) -> tuple[ClassGpus, Fgd, list[GpuNode]]:
        """The class's devices, FGD over the workload's shapes and every node as the measure reads it, once a batch
        per rule (upstream's CycleState)."""
        memo = batch.memo.setdefault(self.name, {})
        key = (rule.device_class, rule.shapes)
        if key not in memo:
            devices = ClassGpus.of(batch.cluster, rule.device_class)
            shapes = rule.shapes if rule.shapes is not None else cluster_shapes(batch.cluster, rule.device_class,
                                                                                 devices)
            memo[key] = (devices, Fgd(tuple(shapes)), _nodes(batch.view, devices))
        return memo[key]


def _nodes(view: View, devices: ClassGpus) -> list[GpuNode]:
    cpu = view.free_of(("cpu",))[:, 0].tolist()
    return [devices.node(node, int(free)) for node, free in zip(view.nodes, cpu)]


KIND = FragmentationPreferences()
