"""The FGD paper's evaluation protocol (issue 52, point 2) as a pure harness over `GpuNode` state: the workload
inflated to a share of the cluster's GPU capacity with a seed, tasks arriving one at a time or in batches, with no
departures or at the trace's deletion times, and after each arrival step the GPUs allocated, unallocated and
fragmented and the tasks refused so far.

Any scheduler plugs in as a `BatchPlacer`: handed the nodes and a batch of tasks, it says where each goes. The
harness applies its choices with `gpus.place`, which raises on any overcommitment, so a placer's bug cannot pass
as a good figure. A one-task-at-a-time `PlacementPolicy` is a BatchPlacer through `OneAtATime`.
"""
from __future__ import annotations

import bisect
import heapq
import itertools
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from .fragmentation import TaskShape, free_fragmentation
from .gpus import MILLI, GpuChoice, GpuNode, GpuTask, place, release
from .policies import PlacementPolicy


class BatchPlacer(Protocol):
    """Where each task of a batch goes (a choice per task, in order; None: refused), on `nodes` as they stand
    before the batch. `name` is read only (a ClassVar or a field serves)."""

    @property
    def name(self) -> str: ...

    def place(self, nodes: tuple[GpuNode, ...], tasks: Sequence[GpuTask]) -> list[GpuChoice | None]: ...


@dataclass(frozen=True)
class OneAtATime:
    """A one-task-at-a-time policy as a BatchPlacer: the batch's tasks in order, each on the nodes the previous
    left (a list with one node replaced per placement, not a new tuple)."""

    policy: PlacementPolicy

    @property
    def name(self) -> str:
        return self.policy.name

    def place(self, nodes: tuple[GpuNode, ...], tasks: Sequence[GpuTask]) -> list[GpuChoice | None]:
        state = list(nodes)
        out: list[GpuChoice | None] = []
        for task in tasks:
            choice = self.policy.choose(state, task)
            if choice is not None:
                state[choice.node] = place(state[choice.node], task, choice.gpus)
            out.append(choice)
        return out


@dataclass(frozen=True)
class Arrival:
    """One task of the workload: its name and, when the trace has them, its creation and deletion times (s)."""

    name: str
    task: GpuTask
    creation: int | None = None
    deletion: int | None = None


class ProtocolError(ValueError):
    """A protocol that cannot run as asked (a placer's bad answer, times missing for a timed protocol)."""


def capacity_milli(nodes: Sequence[GpuNode]) -> int:
    """The cluster's GPU capacity, in milli-GPUs."""
    return sum(len(node.gpu_free) for node in nodes) * MILLI


# --- inflation --------------------------------------------------------------------------------------------------

def inflate(arrivals: Sequence[Arrival], capacity: int, ratio: float, seed: int, shuffle: bool = True) -> list[Arrival]:
    """The workload whose GPU asks reach `ratio` × `capacity` (milli), as the paper's artifact builds it
    (hkust-adsl/kubernetes-scheduler-simulator, pkg/simulator/core.go `Simulate`, pkg/simulator/simulator.go
    `SortClusterPods`, `TunePodsByNodeTotalResource`, `tuneUpPods`, `tuneDownPods`; its experiments run with
    `--shuffle-pod=true -tune 1.3 -tuneseed 42…`): the trace's tasks sorted by name, shuffled with the seed
    (without `shuffle`: in creation-time order, ties by name), then, while the total asked is below the target,
    copies of tasks drawn uniformly with replacement from the name-sorted trace are appended (`<name>-tuned-<i>`)
    until the next draw would pass the target — compared, as there, by its milli per GPU, so a last multi-GPU copy
    may pass it by a few GPUs; while above it, tasks drawn at random are removed. Draws come from Python's
    `random.Random(seed)`, not Go's `math/rand`: the same procedure and distribution, other tasks seed for seed."""
    rng = random.Random(seed)
    by_name = sorted(arrivals, key=lambda a: a.name)
    order = list(by_name)
    if shuffle:
        rng.shuffle(order)
    else:
        order.sort(key=lambda a: (a.creation if a.creation is not None else 0, a.name))
    total = sum(a.task.gpu_total for a in order)
    target = ratio * capacity
    if total > target:  # tuneDownPods
        while total > target and order:
            total -= order.pop(rng.randrange(len(order))).task.gpu_total
        return order
    if total == target or not any(a.task.gpu_milli for a in by_name):
        return order  # a trace asking for no GPU cannot be tuned up (a CPU-only draw never passes the target)
    for i in itertools.count():  # tuneUpPods: draws until the first that would pass the target
        drawn = by_name[rng.randrange(len(by_name))]
        if total + drawn.task.gpu_milli > target:
            break
        order.append(Arrival(f"{drawn.name}-tuned-{i}", drawn.task, drawn.creation, drawn.deletion))
        total += drawn.task.gpu_total
    return order


# --- arrival steps ----------------------------------------------------------------------------------------------

def steps(arrivals: Sequence[Arrival], batch: int = 1, seconds: float | None = None) -> list[range]:
    """The arrival steps, as ranges of `arrivals` (in their order): `batch` tasks at a time, or with `seconds`
    every task created in the same window [k·T, (k+1)·T) of creation time (arrivals in time order; empty windows
    make no step)."""
    if seconds is None:
        return [range(i, min(i + batch, len(arrivals))) for i in range(0, len(arrivals), batch)]
    out: list[range] = []
    start = 0
    for i in range(1, len(arrivals) + 1):
        if i == len(arrivals) or _window(arrivals[i], seconds) != _window(arrivals[start], seconds):
            out.append(range(start, i))
            start = i
    return out


def _window(arrival: Arrival, seconds: float) -> int:
    if arrival.creation is None:
        raise ProtocolError(f"task {arrival.name} has no creation_time: batches every T seconds need it")
    return int(arrival.creation // seconds)


def timed(arrivals: Sequence[Arrival]) -> list[Arrival]:
    """The arrivals in creation-time order (stable: inflated copies follow their kind), or a ProtocolError naming
    a task without creation and deletion times."""
    untimed = next((a for a in arrivals if a.creation is None or a.deletion is None), None)
    if untimed is not None:
        raise ProtocolError(f"task {untimed.name} has no creation_time or deletion_time: departures and batches "
                            "every T seconds need both")
    return sorted(arrivals, key=lambda a: a.creation or 0)


def step_time(arrivals: Sequence[Arrival], step: range, seconds: float | None) -> float:
    """When a step happens: the end of its window, or its last task's creation."""
    last = arrivals[step[-1]]
    created = float(last.creation or 0)
    return (created // seconds + 1) * seconds if seconds is not None else created


# --- the run ----------------------------------------------------------------------------------------------------

@dataclass
class FragmentTracker:
    """The cluster's fragmentation over `shapes`, kept per node and updated only where a node changed; a node's
    value is memoised on what it depends on (free CPU, its GPUs' free milli as a multiset, its model)."""

    shapes: tuple[TaskShape, ...]
    per_node: list[float] = field(default_factory=list)
    total: float = 0.0
    _memo: dict[tuple[int, tuple[int, ...], str], float] = field(default_factory=dict)

    def of(self, node: GpuNode) -> float:
        key = (node.cpu_free, tuple(sorted(node.gpu_free)), node.model)
        value = self._memo.get(key)
        if value is None:
            value = self._memo[key] = free_fragmentation(node.cpu_free, node.gpu_free, node.model, self.shapes)
        return value

    def reset(self, nodes: Sequence[GpuNode]) -> None:
        self.per_node = [self.of(node) for node in nodes]
        self.total = sum(self.per_node)

    def update(self, index: int, node: GpuNode) -> None:
        value = self.of(node)
        self.total += value - self.per_node[index]
        self.per_node[index] = value


@dataclass(frozen=True)
class StepMeasures:
    """The measures after each arrival step, one entry per step: arrived workload (GPU milli asked so far ÷
    capacity), GPUs allocated, unallocated and fragmented (the paper's measure ÷ 1000), tasks arrived and refused
    so far."""

    arrived: tuple[float, ...]
    allocated: tuple[float, ...]
    unallocated: tuple[float, ...]
    fragmented: tuple[float, ...]
    tasks: tuple[int, ...]
    refused: tuple[int, ...]

    def to_dict(self) -> dict[str, list[float] | list[int]]:
        return {"arrived": [round(x, 6) for x in self.arrived], "allocated": list(self.allocated),
                "unallocated": list(self.unallocated), "fragmented": [round(x, 3) for x in self.fragmented],
                "tasks": list(self.tasks), "refused": list(self.refused)}


@dataclass(frozen=True)
class RunResult:
    """One run: its per-step series and summary figures. `unallocated_at_full`: GPUs unallocated when the arrived
    workload reaches 100%, interpolated linearly between the two steps around it (None if it never does); `auc`:
    the area under the unallocated-GPUs curve (GPUs × arrived share), from 0 arrived (all unallocated) to the
    inflation level, by trapezoids."""

    scheduler: str
    capacity_gpus: float
    ratio: float
    series: StepMeasures
    placed: int
    refused: int
    unallocated_at_full: float | None
    auc: float

    def summary(self) -> dict[str, object]:
        return {"scheduler": self.scheduler, "capacity_gpus": self.capacity_gpus, "tasks": len(self.series.tasks)
                and self.series.tasks[-1], "placed": self.placed, "refused": self.refused,
                "unallocated_at_full": None if self.unallocated_at_full is None else round(self.unallocated_at_full, 3),
                "auc": round(self.auc, 3)}


def interpolate(xs: Sequence[float], ys: Sequence[float], at: float) -> float | None:
    """y at x = `at` on the broken line through (xs, ys), xs non-decreasing: between the last point before `at`
    and the first at or past it; None when the line never reaches `at`."""
    k = bisect.bisect_left(xs, at)
    if k == len(xs):
        return None
    if xs[k] == at or k == 0:
        return ys[k]
    x0, x1, y0, y1 = xs[k - 1], xs[k], ys[k - 1], ys[k]
    return y0 + (y1 - y0) * (at - x0) / (x1 - x0)


def area(xs: Sequence[float], ys: Sequence[float], upto: float) -> float:
    """The area under the broken line through (xs, ys), xs non-decreasing, up to x = `upto`."""
    total = 0.0
    for x0, x1, y0, y1 in zip(xs, xs[1:], ys, ys[1:], strict=False):
        if x0 >= upto:
            break
        if x1 > upto:
            y1 = y0 + (y1 - y0) * (upto - x0) / (x1 - x0)
            x1 = upto
        total += (x1 - x0) * (y0 + y1) / 2
    return total


@dataclass(frozen=True)
class Arrivals:
    """How tasks arrive: `batch` at a time, or with `seconds` all those created in each window of that many
    seconds; with `departures`, each placed task leaves at its deletion time (released before a step at or after
    it). A timed protocol (seconds or departures) takes the tasks in creation-time order."""

    batch: int = 1
    seconds: float | None = None
    departures: bool = False

    @property
    def is_timed(self) -> bool:
        return self.seconds is not None or self.departures


@dataclass
class _State:
    """The cluster as a run changes it, with its running totals."""

    nodes: list[GpuNode]
    fragments: FragmentTracker
    allocated: int = 0  # GPU milli
    asked: int = 0
    refused: int = 0
    leaving: list[tuple[int, int, int, GpuTask, tuple[int, ...]]] = field(default_factory=list)  # a heap
    pushed: int = 0  # the heap's tie-breaker: the order tasks were placed in

    def put(self, index: int, node: GpuNode) -> None:
        self.nodes[index] = node
        self.fragments.update(index, node)

    def release_until(self, now: float) -> None:
        """Every placed task whose deletion time is `now` or earlier leaves."""
        while self.leaving and self.leaving[0][0] <= now:
            _, _, index, task, gpus = heapq.heappop(self.leaving)
            self.put(index, release(self.nodes[index], task, gpus))
            self.allocated -= task.gpu_total


@dataclass(frozen=True)
class Prefill:
    """The cluster filled first, one task at a time by `placer`, until the arrived workload reaches `share` of the
    GPU capacity; the placer under test takes over from there. Every scheduler compared then starts from the same
    state, and an expensive one (the batch planner) skips the long start where every placer places everything (on
    openb no baseline refuses a GPU task before ~90% arrived). Not with a timed protocol."""

    placer: BatchPlacer
    share: float


@dataclass
class _Recorder:
    """The measures after each step, as lists grown step by step."""

    cap: int
    arrived: list[float] = field(default_factory=list)
    allocated: list[float] = field(default_factory=list)
    unallocated: list[float] = field(default_factory=list)
    fragmented: list[float] = field(default_factory=list)
    tasks: list[int] = field(default_factory=list)
    refused: list[int] = field(default_factory=list)

    def __call__(self, state: _State, tasks: int) -> None:
        self.arrived.append(state.asked / self.cap if self.cap else 0.0)
        self.allocated.append(state.allocated / MILLI)
        self.unallocated.append((self.cap - state.allocated) / MILLI)
        self.fragmented.append(state.fragments.total / MILLI)
        self.tasks.append(tasks)
        self.refused.append(state.refused)

    def measures(self) -> StepMeasures:
        return StepMeasures(tuple(self.arrived), tuple(self.allocated), tuple(self.unallocated),
                            tuple(self.fragmented), tuple(self.tasks), tuple(self.refused))


def run(nodes: Sequence[GpuNode], arrivals: Sequence[Arrival], placer: BatchPlacer, shapes: Sequence[TaskShape],
        ratio: float, how: Arrivals = Arrivals(), prefill: Prefill | None = None) -> RunResult:
    """The protocol over `arrivals` (already inflated, in arrival order): after each step, the measures; with
    `prefill`, its placer's steps (one task each) first."""
    if prefill is not None and how.is_timed:
        raise ProtocolError("a prefilled run cannot be timed (batches every T seconds, or departures)")
    order = timed(arrivals) if how.is_timed else list(arrivals)
    state = _State(list(nodes), FragmentTracker(tuple(shapes)))
    state.fragments.reset(state.nodes)
    cap = capacity_milli(nodes)
    state.allocated = cap - sum(node.gpu_milli_free for node in nodes)
    record = _Recorder(cap)
    start = 0
    while prefill is not None and start < len(order) and state.asked < prefill.share * cap:
        _step(state, prefill.placer, order[start:start + 1], False)
        start += 1
        record(state, start)
    rest = order[start:]
    for step in steps(rest, how.batch, how.seconds):
        if how.departures:
            state.release_until(step_time(rest, step, how.seconds))
        _step(state, placer, [rest[i] for i in step], how.departures)
        record(state, start + step.stop)
    return _result(placer.name, cap, ratio, record.measures())


def _step(state: _State, placer: BatchPlacer, batch: list[Arrival], leaves: bool) -> None:
    for arrival, choice in zip(batch, _choices(placer, state.nodes, batch), strict=True):
        _apply(state, placer, arrival, choice, leaves)


def _choices(placer: BatchPlacer, nodes: list[GpuNode], batch: list[Arrival]) -> list[GpuChoice | None]:
    choices = placer.place(tuple(nodes), [a.task for a in batch])
    if len(choices) != len(batch):
        raise ProtocolError(f"placer {placer.name} gave {len(choices)} choices for a batch of {len(batch)} tasks")
    return choices


def _apply(state: _State, placer: BatchPlacer, arrival: Arrival, choice: GpuChoice | None, leaves: bool) -> None:
    """One task placed (or refused) as the placer chose; a ProtocolError if that overcommits anything."""
    task = arrival.task
    state.asked += task.gpu_total
    if choice is None:
        state.refused += 1
        return
    if not 0 <= choice.node < len(state.nodes):
        raise ProtocolError(f"placer {placer.name} put task {arrival.name} on node index {choice.node}, not one of "
                            f"the {len(state.nodes)} nodes")
    try:
        state.put(choice.node, place(state.nodes[choice.node], task, choice.gpus))
    except ValueError as exc:
        raise ProtocolError(f"placer {placer.name} overcommits with task {arrival.name}: {exc}") from None
    state.allocated += task.gpu_total
    if leaves and arrival.deletion is not None:
        state.pushed += 1
        heapq.heappush(state.leaving, (arrival.deletion, state.pushed, choice.node, task, choice.gpus))


def _result(scheduler: str, cap: int, ratio: float, series: StepMeasures) -> RunResult:
    xs = (0.0, *series.arrived)
    ys = (cap / MILLI, *series.unallocated)
    placed = (series.tasks[-1] - series.refused[-1]) if series.tasks else 0
    return RunResult(scheduler, cap / MILLI, ratio, series, placed, series.refused[-1] if series.refused else 0,
                     interpolate(xs, ys, 1.0), area(xs, ys, ratio))
