"""The FGD paper's fragmentation measure (§3): the GPU milli on a node that a task drawn from the workload's
distribution of task shapes could not use, in expectation.

For one task shape (the simulator's `GetNodePodFrag` and `NodeGpuShareFragAmount`, pkg/utils/frag.go):
- it fits the node's GPUs and CPU: only the GPUs with less free milli than it asks for per GPU are fragment;
- otherwise (it asks for no GPU, is not allowed on the node's model, or lacks GPU or CPU room): every free milli
  of the node is fragment for it.
A node's fragmentation is the sum over shapes of share × that amount; the cluster's, the sum over nodes. Memory
plays no part, as in the simulator (its task shapes have none).
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .gpus import DEFAULT_CPU_MILLI, GpuNode, GpuTask

# The artifact's typical-pod settings (scripts/generate_config_and_run.py): the most frequent shapes covering 95%
# of the tasks, non-GPU tasks included.
POPULARITY_PERCENT = 95


@dataclass(frozen=True)
class TaskShape:
    """One shape of task (memory aside) and its share of the workload; shares of a workload sum to 1."""

    task: GpuTask
    share: float


def _shape_key(task: GpuTask) -> tuple[int, int, int, str]:
    """The simulator's PodResource: cpu (kube-scheduler's non-zero request), milli per GPU, GPUs, model list."""
    return task.cpu_milli or DEFAULT_CPU_MILLI, task.gpu_milli, task.num_gpu, "|".join(sorted(task.models))


def typical_shapes(tasks: Iterable[GpuTask], popularity_percent: int = POPULARITY_PERCENT) -> tuple[TaskShape, ...]:
    """The workload's task shapes as FGD weighs them (`GetTypicalPods`): counted, most frequent first (ties: the
    larger shape first, as the simulator sorts), the top ones whose counts reach `popularity_percent` of all tasks, with
    their shares renormalised to sum to 1."""
    counts = Counter(_shape_key(task) for task in tasks)
    ranked = sorted(counts.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
    total = sum(counts.values())
    kept: list[tuple[tuple[int, int, int, str], int]] = []
    covered = 0
    for key, count in ranked:
        if covered * 100 >= popularity_percent * total:
            break
        kept.append((key, count))
        covered += count
    return tuple(TaskShape(GpuTask(cpu, 0, num, milli, frozenset(models.split("|")) - {""}), count / covered)
                 for (cpu, milli, num, models), count in kept)


def shape_fragment(cpu_free: int, gpu_free: Sequence[int], model: str, task: GpuTask) -> int:
    """The free GPU milli `task` could not use on a node with this much free (the simulator's `GetNodePodFrag`)."""
    total = sum(gpu_free)
    if task.gpu_milli == 0 or (task.models and model not in task.models):
        return total  # a task without GPUs uses none of them; one of another model cannot reach them
    usable = sum(1 for free in gpu_free if free >= task.gpu_milli)
    if usable >= task.num_gpu and cpu_free >= task.cpu_milli:
        return sum(free for free in gpu_free if free < task.gpu_milli)
    return total


def node_fragmentation(node: GpuNode, shapes: Sequence[TaskShape]) -> float:
    """The node's expected fragment, in GPU milli."""
    return free_fragmentation(node.cpu_free, node.gpu_free, node.model, shapes)


def free_fragmentation(cpu_free: int, gpu_free: Sequence[int], model: str, shapes: Sequence[TaskShape]) -> float:
    """`node_fragmentation` of a node with this much free (FGD asks it of hypothetical nodes)."""
    return sum(shape.share * shape_fragment(cpu_free, gpu_free, model, shape.task) for shape in shapes)


def cluster_fragmentation(nodes: Iterable[GpuNode], shapes: Sequence[TaskShape]) -> float:
    """The cluster's expected fragment, in GPU milli: the paper's fragmented GPUs (÷ 1000)."""
    return sum(node_fragmentation(node, shapes) for node in nodes)
