"""The batch planner as a GPU-sharing placer (issue 52): GpuNode state and a batch of GpuTasks in, a GpuChoice per task
out, decided by `plan_batch` itself, policies included.

The state becomes a Cluster the way `convert openb` shapes the trace (engine/time/openb.py), built directly as model
objects: a Node per GpuNode (cpu, memory, 110 pods, the `gpu.openb/model` label), a device per GPU pinned to it
(`gpu-i`, attribute `model`, consumable capacity `milli` 1000, `allowMultipleAllocations`), one DeviceClass. What is
already used is one running pod per node holding its cpu and memory, and one allocated claim per node whose shares
consume each used GPU's used milli (engine.devices.dra reads an allocated claim's `shares` as what it consumes of each
device), so the planner sees exactly each GPU's free milli. Each task is a pending pod with a claim of its own: whole
GPUs are `count` devices asking no capacity (a capacity asked of nothing is consumed whole), a shared GPU one device and
`capacity.requests` of its milli, the allowed models a CEL selector on the model attribute. The plan's placements and
its Reserve's device allocations are read back as node and GPU indices.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from ..devices.dra import signatures_of
from ..model.cluster import (
    Cluster,
    Device,
    DeviceClass,
    DeviceRequest,
    Devices,
    Node,
    Pod,
    ResourceClaim,
    SubRequest,
)
from ..model.ir import Constraint, FragmentationPreference, Rules
from ..planning.planner import Options, plan_batch
from ..policy.lower import lower
from ..policy.parse import parse
from ..reading.resolve import resolve_cluster
from ..sharing.fragmentation import TaskShape
from ..sharing.gpus import MILLI, GpuChoice, GpuNode, GpuTask, place
from .openb import CAPACITY, DRIVER, MODEL_LABEL, NAMESPACE, model_selector

NAME = "policy-scheduler"
SCHEDULER = "policy-scheduler"
MIB = 2**20
PODS = 110  # a node's pod slots, as convert openb gives them
DEVICES = "DynamicResources"  # the kind whose Reserve records a placed pod's allocations
CAPACITY_KEY = (DRIVER, CAPACITY)
RETRIES = 2  # plans again for pods Reserve took out (each a next cycle of the scheduler loop)


def _node(node: GpuNode) -> Node:
    labels = {"kubernetes.io/hostname": node.name, **({MODEL_LABEL: node.model} if node.gpu_free else {})}
    return Node(node.name, labels, {"cpu": node.cpu_milli, "memory": node.memory_mib * MIB, "pods": PODS})


def _devices(node: GpuNode) -> list[Device]:
    return [Device(DRIVER, node.name, f"gpu-{i}", ((DRIVER, "model", node.model),), ((*CAPACITY_KEY, MILLI * 1000),),
                   node=node.name, multiple=True) for i in range(len(node.gpu_free))]


def _used(node: GpuNode) -> tuple[Pod, ResourceClaim | None] | None:
    """What the node's placed tasks use, as one running pod and (if any GPU is used) one allocated claim whose shares
    consume each used GPU's used milli; None when nothing is used."""
    used = [(f"{DRIVER}/{node.name}/gpu-{i}", MILLI - free) for i, free in enumerate(node.gpu_free) if free < MILLI]
    if not used and not node.cpu_used and not node.memory_used:
        return None
    name = f"used-{node.name}"
    claim = None if not used else ResourceClaim(
        NAMESPACE, name, allocated=tuple(key for key, _ in used), reserved_for=(name,),
        shares=tuple((key, ((*CAPACITY_KEY, milli * 1000),)) for key, milli in used))
    pod = Pod(NAMESPACE, name, requests={"cpu": node.cpu_used, "memory": node.memory_used * MIB, "pods": 1},
              node_name=node.name, scheduler_name=SCHEDULER, phase="Running",
              resource_claims=(("gpu", name),) if claim else ())
    return pod, claim


def task_name(k: int) -> str:
    """The k-th task's pod: names sort as the batch's order (the queue's tie-break), so the one-at-a-time start
    takes them in order."""
    return f"t{k:05d}"


def _pending(k: int, task: GpuTask) -> tuple[Pod, ResourceClaim | None]:
    name = task_name(k)
    requests = {"cpu": task.cpu_milli, "memory": task.memory_mib * MIB, "pods": 1}
    if not task.num_gpu:
        return Pod(NAMESPACE, name, requests=requests, scheduler_name=SCHEDULER), None
    selectors = (model_selector(sorted(task.models)),) if task.models else ()
    capacity = ((CAPACITY, task.gpu_milli * 1000),) if task.shared else ()
    sub = SubRequest("gpu", DRIVER, selectors, task.num_gpu, capacity=capacity)
    claim = ResourceClaim(NAMESPACE, f"{name}-gpu", (DeviceRequest("gpu", (sub,)),))
    pod = Pod(NAMESPACE, name, requests=requests, scheduler_name=SCHEDULER, resource_claims=(("gpu", claim.name),))
    return pod, claim


def gpu_cluster(nodes: Sequence[GpuNode], tasks: Sequence[GpuTask], rules: Rules = Rules()) -> Cluster:
    """The GPU state with `tasks` pending, as a resolved Cluster (`rules`' gangs, as plan_batch wants)."""
    names = [n.name for n in nodes]
    if len(set(names)) != len(names):
        raise ValueError("node names must be unique")
    devices = [d for n in nodes for d in _devices(n)]
    bound, claims = [], []
    for node in nodes:
        if (found := _used(node)) is not None:
            bound.append(found[0])
            claims += [found[1]] if found[1] else []
    pending = []
    for k, task in enumerate(tasks):
        pod, claim = _pending(k, task)
        pending.append(pod)
        claims += [claim] if claim else []
    classes = {DRIVER: DeviceClass(DRIVER, (f'device.driver == "{DRIVER}"',))} if devices else {}
    cluster = Cluster(nodes=[_node(n) for n in nodes], bound=bound, pending=pending, namespaces={NAMESPACE: {}},
                      devices=Devices(devices=devices, classes=classes, claims={c.key: c for c in claims}))
    return resolve_cluster(cluster, rules.gangs)


def _choice(plan_reserved: dict[str, dict[str, object]], where: dict[str, int], node: str, pod: str,
            task: GpuTask) -> GpuChoice:
    """Where the plan put one task: its node's index and the GPUs its claim was allocated, in device order."""
    gpus: tuple[int, ...] = ()
    if task.num_gpu:
        got = plan_reserved[f"{NAMESPACE}/{pod}"][DEVICES]
        assert isinstance(got, dict)
        keys = [key for allocation in got.values() for _, key in allocation.devices]
        gpus = tuple(sorted(int(key.rsplit("-", 1)[1]) for key in keys))
    return GpuChoice(where[node], gpus)


def with_shapes(rules: Rules, shapes: tuple[TaskShape, ...]) -> Rules:
    """`rules` whose fragmentation preferences weigh `shapes` (the trace's, as FGD weighs them) instead of the
    cluster's own pods' (a sweep's cluster is GpuNode state: its running pods are one per node, no task's shape). The
    shapes' models become the signatures of the devices of those models (engine.devices.dra.device_signature)."""
    placement = rules.placement
    if placement is None or not shapes:
        return rules
    shapes = tuple(replace(s, task=replace(s.task, models=signatures_of(s.task.models, f"{DRIVER}/model")))
                   for s in shapes)

    def rules_of(pod: Pod) -> tuple[Constraint, ...]:
        return tuple(replace(c, shapes=shapes) if isinstance(c, FragmentationPreference) else c
                     for c in placement(pod))

    return replace(rules, placement=rules_of)


def policy_rules(text: str, file: str = "<policy>") -> Rules:
    """Policy source as Rules (engine.policy.parse → lower); raises engine.policy.parse.PolicyError."""
    return lower(parse(text, file)) if text.strip() else Rules()


@dataclass
class PlannerPlacer:
    """The real planner as a BatchPlacer (engine.time's protocol harness): one plan_batch per batch, preemption off,
    `workers` CP-SAT threads (1: a sweep runs one solver thread per process), within `time_limit` seconds; `policy`
    is policy source (e.g. `prefer less fragmentation of device class "gpu.openb" weight 100`), whose fragmentation
    preferences weigh `shapes` when given (the trace's typical shapes), else the cluster's own pods'."""

    name: str = NAME
    policy: str = ""
    time_limit: float = 10.0
    workers: int = 1
    seed: int = 0
    shapes: tuple[TaskShape, ...] = ()
    rules: Rules = field(init=False)

    def __post_init__(self) -> None:
        self.rules = with_shapes(policy_rules(self.policy), tuple(self.shapes))

    def place(self, nodes: tuple[GpuNode, ...], tasks: Sequence[GpuTask]) -> list[GpuChoice | None]:
        """A choice per task, in order (None: the plan leaves it out). A pod the plan placed but Reserve could not
        serve (the solver's device rows only bound what a node's shared devices take together) is planned again on
        the state the others leave, as the scheduler loop's next cycle would, at most `RETRIES` times."""
        out: list[GpuChoice | None] = [None] * len(tasks)
        todo = list(range(len(tasks)))
        for _ in range(1 + RETRIES):
            if not todo:
                break
            got, dropped = self._plan(nodes, [tasks[k] for k in todo])
            for k, choice in zip(todo, got):
                if choice is not None:
                    out[k] = choice
                    nodes = (*nodes[:choice.node], place(nodes[choice.node], tasks[k], choice.gpus),
                             *nodes[choice.node + 1:])
            todo = [todo[j] for j in dropped]
        return out

    def _plan(self, nodes: tuple[GpuNode, ...], tasks: Sequence[GpuTask]) -> tuple[list[GpuChoice | None], list[int]]:
        """One plan_batch: a choice per task, and the tasks Reserve took out of the plan."""
        cluster = gpu_cluster(nodes, tasks, self.rules)
        options = Options(time_limit=self.time_limit, workers=self.workers, seed=self.seed, preemption=False)
        plan = plan_batch(cluster, self.rules, options)
        where = {n.name: i for i, n in enumerate(nodes)}
        out: list[GpuChoice | None] = []
        dropped = []
        for k, task in enumerate(tasks):
            key = f"{NAMESPACE}/{task_name(k)}"
            node = plan.assignments.get(key)
            out.append(None if node is None else _choice(plan.details.reserved, where, node, task_name(k), task))
            if key in plan.details.dropped:
                dropped.append(k)
        return out, dropped


FRAGMENTATION_POLICY = """policy less-fragmentation {
  applies to all pods
  prefer less fragmentation of device class "gpu.openb" weight 100
}
"""


def policy_scheduler(seed: int, shapes: Sequence[TaskShape]) -> PlannerPlacer:
    """The planner alone (a sweep registry's factory: seed and the trace's shapes in, a placer out)."""
    return PlannerPlacer(seed=seed)


def policy_scheduler_frag(seed: int, shapes: Sequence[TaskShape]) -> PlannerPlacer:
    """The planner with `prefer less fragmentation` at weight 100 (FGD's integers) over the trace's shapes."""
    return PlannerPlacer(name=f"{NAME}-frag", policy=FRAGMENTATION_POLICY, seed=seed, shapes=tuple(shapes))


PLACERS = {NAME: policy_scheduler, f"{NAME}-frag": policy_scheduler_frag}  # name -> factory, for a sweep's registry
