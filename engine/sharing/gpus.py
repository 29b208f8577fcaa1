"""Nodes, tasks and feasibility for GPU sharing, with the GPU choices within a node the policies use.

Semantics are those of the FGD paper's simulator (hkust-adsl/kubernetes-scheduler-simulator, `Open-Gpu-Share`
filter): a GPU holds 1000 milli; a task asks for `num_gpu` GPUs of `gpu_milli` each, which is 1000 (whole GPUs)
unless it shares one GPU (`num_gpu == 1`, `gpu_milli < 1000`); a GPU task runs only on a node whose GPU model it
allows (no models listed: any). CPU and memory must fit as kube-scheduler's NodeResourcesFit would have them.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, replace

MILLI = 1000  # one GPU, in milli-GPUs
# kube-scheduler's defaults for a container that requests no cpu or memory, counted by its scoring
# (pkg/scheduler/util: DefaultMilliCPURequest, DefaultMemoryRequest = 200 MiB)
DEFAULT_CPU_MILLI = 100
DEFAULT_MEMORY_MIB = 200


@dataclass(frozen=True)
class GpuTask:
    """What one task asks for. `models` empty: any GPU model (the trace's empty `gpu_spec`)."""

    cpu_milli: int
    memory_mib: int
    num_gpu: int = 0
    gpu_milli: int = 0
    models: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.cpu_milli < 0 or self.memory_mib < 0 or self.num_gpu < 0:
            raise ValueError(f"a task asks for negative resources: {self}")
        if self.num_gpu == 0 and self.gpu_milli != 0:
            raise ValueError(f"a task without GPUs asks for gpu_milli {self.gpu_milli}")
        if self.num_gpu == 1 and not 0 < self.gpu_milli <= MILLI:
            raise ValueError(f"a 1-GPU task asks for gpu_milli {self.gpu_milli}, not 1..{MILLI}")
        if self.num_gpu > 1 and self.gpu_milli != MILLI:
            raise ValueError(f"a {self.num_gpu}-GPU task asks for gpu_milli {self.gpu_milli}: only one GPU is shared")

    @property
    def shared(self) -> bool:
        """Asks for part of one GPU (a DRA claim on part of one device's consumable capacity)."""
        return self.num_gpu == 1 and self.gpu_milli < MILLI

    @property
    def gpu_total(self) -> int:
        return self.num_gpu * self.gpu_milli

    @property
    def tag(self) -> str:
        """The simulator's GPU affinity tag (GPU Clustering groups tasks by it)."""
        if self.num_gpu == 0:
            return "none"
        return "share" if self.shared else f"{self.num_gpu}-gpu"


@dataclass(frozen=True)
class GpuNode:
    """A node's capacity and what placed tasks use of it. `gpu_free[i]` is GPU i's free milli (its device index).
    `nonzero_*_used` count kube-scheduler's defaults for tasks requesting none (LeastAllocated reads them);
    `tags` counts placed GPU tasks by `GpuTask.tag` (GPU Clustering reads it)."""

    name: str
    cpu_milli: int
    memory_mib: int
    model: str = ""
    gpu_free: tuple[int, ...] = ()
    cpu_used: int = 0
    memory_used: int = 0
    nonzero_cpu_used: int = 0
    nonzero_memory_used: int = 0
    tags: tuple[tuple[str, int], ...] = ()

    @property
    def cpu_free(self) -> int:
        return self.cpu_milli - self.cpu_used

    @property
    def memory_free(self) -> int:
        return self.memory_mib - self.memory_used

    @property
    def gpu_milli_free(self) -> int:
        return sum(self.gpu_free)

    @property
    def idle_gpus(self) -> int:
        return sum(1 for free in self.gpu_free if free == MILLI)


def gpu_node(name: str, cpu_milli: int, memory_mib: int, gpus: int = 0, model: str = "") -> GpuNode:
    """An empty node with `gpus` whole GPUs of `model`."""
    return GpuNode(name, cpu_milli, memory_mib, model, (MILLI,) * gpus)


@dataclass(frozen=True)
class GpuChoice:
    """Where a policy puts a task: the node's index in the list it was given, and the GPUs' indices on it."""

    node: int
    gpus: tuple[int, ...]


def model_allowed(node: GpuNode, task: GpuTask) -> bool:
    """A GPU task runs on a GPU node of a model it allows; a task without GPUs runs anywhere (the simulator's
    filter passes it, and the trace gives such tasks no `gpu_spec`)."""
    if task.num_gpu == 0:
        return True
    return bool(node.gpu_free) and (not task.models or node.model in task.models)


def usable_gpus(node: GpuNode, task: GpuTask) -> list[int]:
    """The GPUs, in device order, with room for one of the task's GPUs (for a whole GPU: the idle ones)."""
    return [i for i, free in enumerate(node.gpu_free) if free >= task.gpu_milli] if task.num_gpu else []


def fits(node: GpuNode, task: GpuTask) -> bool:
    """CPU, memory, the model and enough GPUs with room (`usable_gpus`); written out, as the policies ask it of
    every node at every arrival."""
    if node.cpu_milli - node.cpu_used < task.cpu_milli or node.memory_mib - node.memory_used < task.memory_mib:
        return False
    if task.num_gpu == 0:
        return True
    if not node.gpu_free or (task.models and node.model not in task.models):
        return False
    if task.num_gpu == 1:
        return max(node.gpu_free) >= task.gpu_milli
    return sum(1 for free in node.gpu_free if free >= task.gpu_milli) >= task.num_gpu


def _nonzero(task: GpuTask) -> tuple[int, int]:
    return task.cpu_milli or DEFAULT_CPU_MILLI, task.memory_mib or DEFAULT_MEMORY_MIB


def _retag(tags: tuple[tuple[str, int], ...], tag: str, delta: int) -> tuple[tuple[str, int], ...]:
    counts = dict(tags)
    counts[tag] = counts.get(tag, 0) + delta
    return tuple(sorted((t, n) for t, n in counts.items() if n > 0))


def place(node: GpuNode, task: GpuTask, gpus: tuple[int, ...]) -> GpuNode:
    """The node with `task` on it, on `gpus`; ValueError if that would overcommit anything (a policy's bug)."""
    if len(gpus) != task.num_gpu or len(set(gpus)) != len(gpus) or not fits(node, task):
        raise ValueError(f"{task} does not fit on {node.name} on GPUs {gpus}")
    free = list(node.gpu_free)
    for i in gpus:
        if free[i] < task.gpu_milli:
            raise ValueError(f"GPU {i} of {node.name} has {free[i]} milli free, {task.gpu_milli} asked")
        free[i] -= task.gpu_milli
    cpu, memory = _nonzero(task)
    return replace(node, gpu_free=tuple(free), cpu_used=node.cpu_used + task.cpu_milli,
                   memory_used=node.memory_used + task.memory_mib, nonzero_cpu_used=node.nonzero_cpu_used + cpu,
                   nonzero_memory_used=node.nonzero_memory_used + memory,
                   tags=_retag(node.tags, task.tag, 1) if task.num_gpu else node.tags)


def release(node: GpuNode, task: GpuTask, gpus: tuple[int, ...]) -> GpuNode:
    """The node once `task`, placed on `gpus`, has left (the trace's deletion times)."""
    free = list(node.gpu_free)
    for i in gpus:
        free[i] += task.gpu_milli
    if any(f > MILLI for f in free) or task.cpu_milli > node.cpu_used or task.memory_mib > node.memory_used:
        raise ValueError(f"{task} on GPUs {gpus} was not on {node.name}")
    cpu, memory = _nonzero(task)
    return replace(node, gpu_free=tuple(free), cpu_used=node.cpu_used - task.cpu_milli,
                   memory_used=node.memory_used - task.memory_mib, nonzero_cpu_used=node.nonzero_cpu_used - cpu,
                   nonzero_memory_used=node.nonzero_memory_used - memory,
                   tags=_retag(node.tags, task.tag, -1) if task.num_gpu else node.tags)


def first_gpus(node: GpuNode, task: GpuTask) -> tuple[int, ...]:
    """The first GPUs in device order that fit: the simulator's `AllocateExclusiveGpuId` for whole GPUs, and DRA's
    structured allocator (devices tried in the order the slice lists them) for both kinds."""
    return tuple(usable_gpus(node, task)[:task.num_gpu])


def tightest_gpus(node: GpuNode, task: GpuTask) -> tuple[int, ...]:
    """The simulator's `best` GPU selection (`allocateGpuIdBasedOnBestFit`), the default of every baseline but
    Random-fit and FGD: a shared task on the fitting GPU with the least free milli (the first on ties), whole GPUs
    the first idle ones."""
    if not task.shared:
        return first_gpus(node, task)
    usable = usable_gpus(node, task)
    return (min(usable, key=lambda i: node.gpu_free[i]),) if usable else ()


def random_gpus(node: GpuNode, task: GpuTask, rng: random.Random) -> tuple[int, ...]:
    """The simulator's `random` GPU selection (Random-fit's): a shared task on any fitting GPU, whole GPUs the
    first idle ones."""
    if not task.shared:
        return first_gpus(node, task)
    usable = usable_gpus(node, task)
    return (rng.choice(usable),) if usable else ()
