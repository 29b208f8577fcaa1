"""One-task-at-a-time placement policies for GPU-sharing workloads: the FGD paper's baselines and FGD itself, as its
simulator scores them (hkust-adsl/kubernetes-scheduler-simulator, pkg/simulator/plugin/*_score.go, with the
artifact's settings), and kube-scheduler v1.37's default scoring of such pods.

Each policy's `choose(nodes, task)` returns where the task goes (a node among those it fits, and GPUs on it) or
None when it fits nowhere. Scores are the plugins' integers, rounding included, so ties fall as they do there: the
simulator takes the smallest node name among the best scores; kube-scheduler a random one (`rng`; without one, the
smallest name).
"""
from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import ClassVar, Generic, Protocol, TypeVar

from .fragmentation import TaskShape, free_fragmentation
from .gpus import (
    DEFAULT_CPU_MILLI,
    DEFAULT_MEMORY_MIB,
    MILLI,
    GpuChoice,
    GpuNode,
    GpuTask,
    first_gpus,
    fits,
    place,
    random_gpus,
    tightest_gpus,
)

MAX_SCORE = 100  # framework.MaxNodeScore
# the simulator's normalisers (open-gpu-share/utils/const.go): the largest node's CPU and GPUs
MAX_SPEC_CPU = 128000
MAX_SPEC_GPU = 8000

Scorer = Callable[[GpuNode, GpuTask], int]
GpuPicker = Callable[[GpuNode, GpuTask], tuple[int, ...]]


class PlacementPolicy(Protocol):
    @property
    def name(self) -> str: ...

    def choose(self, nodes: Sequence[GpuNode], task: GpuTask) -> GpuChoice | None: ...


def feasible(nodes: Sequence[GpuNode], task: GpuTask) -> list[int]:
    return [i for i, node in enumerate(nodes) if fits(node, task)]


S = TypeVar("S")


@dataclass
class NodeCache(Generic[S]):
    """What a policy worked out for a task on a node (its score, None where the task does not fit), kept while
    the node is unchanged: a run changes one node per arrival, so at the next arrival of a task of the same shape
    every other node's answer is already known. A row per task, an entry per node index holding the node it was
    computed for (compared by identity, so a changed node is recomputed)."""

    rows: dict[GpuTask, list[tuple[GpuNode, S | None] | None]] = field(default_factory=dict)

    def scores(self, nodes: Sequence[GpuNode], task: GpuTask, score: Callable[[GpuNode, GpuTask], S | None]) -> dict[int, S]:
        """{index: score} of the nodes the task fits, in index order."""
        row = self.rows.get(task)
        if row is None or len(row) != len(nodes):
            row = self.rows[task] = [None] * len(nodes)
        out: dict[int, S] = {}
        for i, node in enumerate(nodes):
            entry = row[i]
            if entry is None or entry[0] is not node:
                entry = row[i] = (node, score(node, task))
            if entry[1] is not None:
                out[i] = entry[1]
        return out


def best_index(nodes: Sequence[GpuNode], scores: dict[int, int], rng: random.Random | None = None) -> int | None:
    """The index with the highest score; ties: uniformly at random with `rng` (kube-scheduler), else the smallest
    node name (the simulator's `selectHost`)."""
    if not scores:
        return None
    top = max(scores.values())
    tied = [i for i, score in scores.items() if score == top]
    return rng.choice(tied) if rng is not None else min(tied, key=lambda i: nodes[i].name)


def pick(nodes: Sequence[GpuNode], task: GpuTask, score: Scorer, gpus: GpuPicker,
         rng: random.Random | None = None, cache: NodeCache[int] | None = None) -> GpuChoice | None:
    """Score every node the task fits (the unchanged ones' scores from `cache`), take the best, choose its GPUs."""
    if cache is None:
        scores = {i: score(nodes[i], task) for i in feasible(nodes, task)}
    else:
        scores = cache.scores(nodes, task, lambda node, t: score(node, t) if fits(node, t) else None)
    best = best_index(nodes, scores, rng)
    return None if best is None else GpuChoice(best, gpus(nodes[best], task))


def best_fit_score(node: GpuNode, task: GpuTask) -> int:
    """`getBestFitScore`: 100 × (1 − Σ ½ × (free − asked) / max spec) over CPU and the node's total free GPU milli;
    the tighter the node left, the higher. (Its min-max NormalizeScore keeps the order, so it is left out.)"""
    left = 0.0
    for free, asked, spec in ((node.cpu_free, task.cpu_milli or DEFAULT_CPU_MILLI, MAX_SPEC_CPU),
                              (node.gpu_milli_free, task.gpu_total, MAX_SPEC_GPU)):
        left += (free - asked) / spec * 0.5
    return math.trunc((1.0 - left) * MAX_SCORE)


def dot_product_score(node: GpuNode, task: GpuTask) -> int:
    """`calculateDotProductScore` with the artifact's `merge` dimensions and `max` normalisation: 100 × (1 − ½ ×
    ⟨free, asked⟩), both as (CPU, total GPU milli) over the max spec; the less aligned, the higher (Tetris)."""
    cpu = task.cpu_milli or DEFAULT_CPU_MILLI
    if node.cpu_free < cpu:
        return 0
    dot = 0.0
    for free, asked, spec in ((node.cpu_free, cpu, MAX_SPEC_CPU), (node.gpu_milli_free, task.gpu_total, MAX_SPEC_GPU)):
        dot += (free / spec) * (asked / spec)
    return math.trunc(MAX_SCORE * (1 - dot / 2))


def gpu_packing_score(node: GpuNode, task: GpuTask) -> int:
    """`getPackingScore`: partly used GPUs first (50–100, fewer free milli on them higher), then idle GPUs of a
    partly used node (33–50, fewer of them higher), then an idle node (0–33, fewer GPUs higher)."""
    if task.gpu_milli <= 0:
        return 0
    idle = node.idle_gpus
    if idle == len(node.gpu_free):
        return max(MAX_SCORE // 3 - idle, idle)
    by_free = sorted(range(len(node.gpu_free)), key=lambda i: node.gpu_free[i])  # stable: device order on ties
    chosen = [i for i in by_free if node.gpu_free[i] >= task.gpu_milli][:task.num_gpu]
    idle_used = sum(1 for i in chosen if node.gpu_free[i] == MILLI)
    if idle_used:
        return max(MAX_SCORE // 2 - idle_used, MAX_SCORE // 3)
    ratio = sum(node.gpu_free[i] * 100 // MILLI for i in chosen)
    return max(MAX_SCORE - ratio // 10, MAX_SCORE // 2)


def gpu_clustering_score(node: GpuNode, task: GpuTask) -> int:
    """`GpuClusteringScorePlugin`: a GPU task goes where tasks of its kind (shared, or n whole GPUs) already run —
    only they (75–100), among others (50–75) — else to a node without GPU tasks (25–50), else anywhere (0–25);
    within a band, the less GPU left the higher. Tasks without GPUs score 0 everywhere."""
    if task.num_gpu == 0:
        return 0
    kinds = dict(node.tags)
    same = kinds.get(task.tag, 0) > 0
    band = (3 if len(kinds) == 1 else 2) if same else (0 if kinds else 1)
    return MAX_SCORE // 4 * (MAX_SPEC_GPU - node.gpu_milli_free) // MAX_SPEC_GPU + MAX_SCORE * band // 4


def least_allocated_score(node: GpuNode, task: GpuTask) -> int:
    """NodeResourcesFit's default LeastAllocated over cpu and memory (weights 1): the mean of (capacity −
    requested) × 100 ∕ capacity, integer, with requests counted non-zero (`GetNonZeroRequested`)."""
    cpu, memory = task.cpu_milli or DEFAULT_CPU_MILLI, task.memory_mib or DEFAULT_MEMORY_MIB
    total = weights = 0
    for requested, capacity in ((node.nonzero_cpu_used + cpu, node.cpu_milli),
                                (node.nonzero_memory_used + memory, node.memory_mib)):
        if capacity == 0:
            continue
        total += 0 if requested > capacity else (capacity - requested) * MAX_SCORE // capacity
        weights += 1
    return total // weights if weights else 0


def _balance(requested: Sequence[int], capacity: Sequence[int]) -> int:
    """`balancedResourceScore`: 100 × (1 − the spread of the requested fractions), two resources."""
    fractions = [min(r / c, 1.0) for r, c in zip(requested, capacity) if c != 0]
    std = abs((fractions[0] - fractions[1]) / 2) if len(fractions) == 2 else 0.0
    return math.trunc((1 - std) * MAX_SCORE)


def balanced_allocation_score(node: GpuNode, task: GpuTask) -> int:
    """NodeResourcesBalancedAllocation as of v1.37 (`balancedResourceScorer`): 50 + (50 + balance with the task −
    balance without it) / 2, on actual requests; 0 for a task requesting neither cpu nor memory (skipped)."""
    if task.cpu_milli == 0 and task.memory_mib == 0:
        return 0
    capacity = (node.cpu_milli, node.memory_mib)
    allocated = (node.cpu_used, node.memory_used)
    with_task = _balance((node.cpu_used + task.cpu_milli, node.memory_used + task.memory_mib), capacity)
    # never negative (a balance is 50..100), so Go's truncating division is Python's floor
    return MAX_SCORE // 2 + (MAX_SCORE // 2 + with_task - _balance(allocated, capacity)) // 2


def kube_default_score(node: GpuNode, task: GpuTask) -> int:
    """kube-scheduler's default score for these pods: NodeResourcesFit (weight 1) + BalancedAllocation (weight 1);
    the other default scorers give every node the same for a bare pod with no affinities, spread or images, and
    DynamicResources scores only prioritized-list subrequests, which these claims have none of."""
    return least_allocated_score(node, task) + balanced_allocation_score(node, task)


@dataclass(frozen=True)
class RandomFit:
    """The simulator's RandomScore: a feasible node uniformly at random, a fitting GPU at random."""

    rng: random.Random
    name: ClassVar[str] = "random-fit"
    _cache: NodeCache[bool] = field(default_factory=NodeCache, init=False, compare=False, repr=False)

    def choose(self, nodes: Sequence[GpuNode], task: GpuTask) -> GpuChoice | None:
        candidates = list(self._cache.scores(nodes, task, lambda node, t: True if fits(node, t) else None))
        if not candidates:
            return None
        node = self.rng.choice(candidates)
        return GpuChoice(node, random_gpus(nodes[node], task, self.rng))


@dataclass(frozen=True)
class ScoredFit:
    """One of the simulator's score plugins (Best-fit, Dot-product, GPU Packing, GPU Clustering): the feasible node
    `score` ranks highest (ties: the smallest name), the tightest GPUs there."""

    name: str
    score: Scorer
    _cache: NodeCache[int] = field(default_factory=NodeCache, init=False, compare=False, repr=False)

    def choose(self, nodes: Sequence[GpuNode], task: GpuTask) -> GpuChoice | None:
        return pick(nodes, task, self.score, tightest_gpus, cache=self._cache)


BEST_FIT = ScoredFit("best-fit", best_fit_score)
DOT_PRODUCT = ScoredFit("dot-product", dot_product_score)
GPU_PACKING = ScoredFit("gpu-packing", gpu_packing_score)
GPU_CLUSTERING = ScoredFit("gpu-clustering", gpu_clustering_score)


@dataclass(frozen=True)
class KubeDefault:
    """kube-scheduler's default one pod at a time: score every feasible node (as percentageOfNodesToScore: 100
    would), ties at random; the GPUs DRA's allocator gives, the first devices that fit in order."""

    rng: random.Random | None = None
    name: ClassVar[str] = "kube-default"
    _cache: NodeCache[int] = field(default_factory=NodeCache, init=False, compare=False, repr=False)

    def choose(self, nodes: Sequence[GpuNode], task: GpuTask) -> GpuChoice | None:
        return pick(nodes, task, kube_default_score, first_gpus, self.rng, self._cache)


def _sigmoid_score(before: float, after: float) -> int:
    """`int64(sigmoid((before − after) / 1000) × 100)`: 50 when the fragment does not change, more as it shrinks."""
    return math.trunc(MAX_SCORE / (1.0 + math.exp(-(before - after) / 1000)))


@dataclass(frozen=True)
class Fgd:
    """Fragmentation Gradient Descent (the paper's §4, the simulator's FGDScore): the node, and for a shared task
    the GPU, where the node's expected fragment (`fragmentation`, over `shapes`) grows least; whole GPUs the first
    idle ones. A node's fragment depends only on its free CPU, the multiset of its GPUs' free milli and its model,
    so it is memoised on those."""

    shapes: tuple[TaskShape, ...]
    name: ClassVar[str] = "fgd"
    _memo: dict[tuple[int, tuple[int, ...], str], float] = field(default_factory=dict, compare=False, repr=False)
    _cache: NodeCache[tuple[int, tuple[int, ...]]] = field(default_factory=NodeCache, init=False, compare=False,
                                                           repr=False)

    def fragment(self, cpu_free: int, gpu_free: Sequence[int], model: str) -> float:
        key = (cpu_free, tuple(sorted(gpu_free)), model)
        if key not in self._memo:
            self._memo[key] = free_fragmentation(cpu_free, gpu_free, model, self.shapes)
        return self._memo[key]

    def score(self, node: GpuNode, task: GpuTask) -> tuple[int, tuple[int, ...]]:
        """`calculateGpuShareFragExtendScore`: the score and the GPUs that give it (the first GPU on ties)."""
        before = self.fragment(node.cpu_free, node.gpu_free, node.model)
        cpu_after = node.cpu_free - (task.cpu_milli or DEFAULT_CPU_MILLI)
        if task.shared:
            best: tuple[int, tuple[int, ...]] | None = None
            for i, free in enumerate(node.gpu_free):
                if free >= task.gpu_milli:
                    after = node.gpu_free[:i] + (free - task.gpu_milli,) + node.gpu_free[i + 1:]
                    score = _sigmoid_score(before, self.fragment(cpu_after, after, node.model))
                    if best is None or score > best[0]:
                        best = (score, (i,))
            return best if best is not None else (0, ())
        gpus = first_gpus(node, task)
        after = tuple(free - task.gpu_milli if i in gpus else free for i, free in enumerate(node.gpu_free))
        return _sigmoid_score(before, self.fragment(cpu_after, after, node.model)), gpus

    def choose(self, nodes: Sequence[GpuNode], task: GpuTask) -> GpuChoice | None:
        scored = self._cache.scores(nodes, task, lambda node, t: self.score(node, t) if fits(node, t) else None)
        best = best_index(nodes, {i: score for i, (score, _) in scored.items()})
        return None if best is None else GpuChoice(best, scored[best][1])


def schedule(policy: PlacementPolicy, nodes: Sequence[GpuNode], task: GpuTask) -> tuple[tuple[GpuNode, ...], GpuChoice | None]:
    """One arrival: the nodes after `policy` places `task` (unchanged if it fits nowhere), and where it went."""
    choice = policy.choose(nodes, task)
    if choice is None:
        return tuple(nodes), None
    placed = place(nodes[choice.node], task, choice.gpus)
    return tuple(placed if i == choice.node else node for i, node in enumerate(nodes)), choice


POLICY_NAMES = ("random-fit", "best-fit", "dot-product", "gpu-packing", "gpu-clustering", "fgd", "kube-default")


def make_policy(name: str, *, seed: int | None = None, shapes: Sequence[TaskShape] = ()) -> PlacementPolicy:
    """A new policy by its name (POLICY_NAMES), with caches of its own; `seed` for Random-fit's draws and
    kube-default's ties, `shapes` (the workload's `typical_shapes`) for FGD."""
    rng = random.Random(seed) if seed is not None else None
    policies: dict[str, Callable[[], PlacementPolicy]] = {
        "random-fit": lambda: RandomFit(rng or random.Random(0)), "best-fit": lambda: replace(BEST_FIT),
        "dot-product": lambda: replace(DOT_PRODUCT), "gpu-packing": lambda: replace(GPU_PACKING),
        "gpu-clustering": lambda: replace(GPU_CLUSTERING),
        "fgd": lambda: Fgd(tuple(shapes)),
        "kube-default": lambda: KubeDefault(rng)}
    if name not in policies:
        raise ValueError(f"unknown placement policy {name!r}: one of {', '.join(POLICY_NAMES)}")
    if name == "fgd" and not shapes:
        raise ValueError("fgd needs the workload's task shapes (typical_shapes)")
    return policies[name]()
