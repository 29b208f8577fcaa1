"""Alibaba's openb GPU trace (clusterdata `cluster-trace-gpu-v2023`, issue 52) in Kubernetes terms. Pure but for
reading the CSV files; the CLI (`policy-scheduler convert openb`) writes what it makes.

A node row becomes a Node (cpu, memory, 110 pods, a `gpu.openb/model` label on GPU nodes) and, for GPU nodes with
`--gpus-as dra`, a ResourceSlice of one device per GPU: its `model` attribute and a consumable capacity
`gpu.openb/milli` of 1000 shared by claims (`allowMultipleAllocations`). A task row becomes a pending Pod asking for
its cpu and memory and, for a GPU task, a ResourceClaim of its own: `num_gpu` whole devices of one node, each
consumed whole (the request names no capacity, and a capacity without a request policy is then consumed whole), or
for a shared GPU (`gpu_milli` < 1000) one device of which it consumes `gpu_milli`. So a shared task never lands on
a device a whole task holds, nor a whole task on one a share is using: never overcommitted. `gpu_spec` (`A|B`)
becomes a CEL selector on the model attribute. With `--gpus-as extended` GPUs are `nvidia.com/gpu` and `gpu_spec`
a node affinity on the model label; a shared GPU has no extended-resource form and is refused.

The trace is `simulate`'s format (docs/time.md): nodes grouped by shape, a job per task arriving at its
`creation_time` and running until its `deletion_time`.
"""

from __future__ import annotations

import csv
import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ..sharing.gpus import GpuNode, GpuTask, gpu_node
from .timeline import rfc3339

DRIVER = "gpu.openb"  # the DRA driver, the attribute domain, the DeviceClass
MODEL_LABEL = "gpu.openb/model"  # a GPU node's label: its GPUs' model
CAPACITY = "milli"  # each device's consumable capacity (gpu.openb/milli), 1000 a GPU
WHOLE = 1000
EXTENDED = "nvidia.com/gpu"
DRA_API = "resource.k8s.io/v1"
NAMESPACE = "openb"
EPOCH = 1_800_000_000.0  # creation_time 0 as a timestamp (simulate's virtual zero; any fixed time serves)
MODES = ("dra", "extended")

NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
TASK_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")  # gpu_spec and the times are optional
TIME_COLUMNS = ("creation_time", "deletion_time")


class OpenbError(ValueError):
    """A CSV the converter cannot read: says which file and line."""


@dataclass(frozen=True, slots=True)
class NodeRow:
    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str  # "" on a CPU-only node
    line: int

    @property
    def gpu_node(self) -> GpuNode:
        """The node in engine.sharing's terms (the GPU-sharing policies and the protocol harness), empty."""
        return gpu_node(self.name, self.cpu_milli, self.memory_mib, self.gpus, self.model)


@dataclass(frozen=True, slots=True)
class TaskRow:
    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int  # for one GPU: the share of it (1–1000); 1000 for several
    gpu_spec: tuple[str, ...]  # allowed models; () = any
    creation: int | None
    deletion: int | None
    line: int
    file: str = ""

    @property
    def shared(self) -> bool:
        return self.num_gpu == 1 and self.gpu_milli < WHOLE

    @property
    def gpu_task(self) -> GpuTask:
        """The task in engine.sharing's terms (what the GPU-sharing policies place)."""
        return GpuTask(self.cpu_milli, self.memory_mib, self.num_gpu, self.gpu_milli, frozenset(self.gpu_spec))

    @property
    def shape(self) -> str:
        """The task's class in a report: CPU only, a shared GPU, or how many whole GPUs."""
        if self.num_gpu == 0:
            return "CPU only"
        return "shared GPU" if self.shared else f"{self.num_gpu} GPU"


Row = TypeVar("Row", NodeRow, TaskRow)


# --- reading ------------------------------------------------------------------------------------------------

def _records(path: str, required: Sequence[str]) -> Iterator[tuple[int, dict[str, str]]]:
    """Each row of a CSV file with its line, after checking the header names every required column."""
    try:
        with open(path, encoding="utf-8", newline="") as f:
            reader = csv.DictReader(f)
            header = reader.fieldnames or []
            missing = [c for c in required if c not in header]
            if missing:
                raise OpenbError(f"{path}:1: missing column{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                                 f"(the header has {', '.join(header) or 'nothing'})")
            for row in reader:
                if None in row or any(v is None for v in row.values()):
                    raise OpenbError(f"{path}:{reader.line_num}: {len([v for v in row.values() if v is not None])} "
                                     f"fields where the header has {len(header)}")
                yield reader.line_num, row
    except OSError as exc:
        raise OpenbError(f"{path}: cannot read file: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise OpenbError(f"{path}: not UTF-8 text") from None
    except csv.Error as exc:
        raise OpenbError(f"{path}: not CSV: {exc}") from None


def _number(row: dict[str, str], column: str, where: str, low: int = 0, high: int | None = None) -> int:
    text = row[column].strip()
    try:
        value = int(text)
    except ValueError:
        raise OpenbError(f"{where}: column {column}: {text!r} is not a whole number") from None
    if value < low or (high is not None and value > high):
        bounds = f"from {low} to {high}" if high is not None else f"at least {low}"
        raise OpenbError(f"{where}: column {column}: {value} is out of range ({bounds})")
    return value


NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
MODEL = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")  # a label value and a CEL string alike


def _name(row: dict[str, str], column: str, where: str) -> str:
    text = row[column].strip()
    if not NAME.match(text) or len(text) > 63:
        raise OpenbError(f"{where}: column {column}: {text!r} is not a Kubernetes object name (lower case "
                         "letters, digits, '-' and '.', at most 63)")
    return text


def _model(text: str, column: str, where: str) -> str:
    if not MODEL.match(text) or len(text) > 63:
        raise OpenbError(f"{where}: column {column}: {text!r} is not a GPU model name (letters, digits, '-', '_', '.')")
    return text


def read_nodes(path: str) -> list[NodeRow]:
    """The node list (`sn,cpu_milli,memory_mib,gpu,model`), or an OpenbError naming the file and line."""
    out: list[NodeRow] = []
    for line, row in _records(path, NODE_COLUMNS):
        where = f"{path}:{line}"
        gpus = _number(row, "gpu", where)
        model = row["model"].strip()
        if gpus and not model:
            raise OpenbError(f"{where}: column model: empty on a node with {gpus} GPU(s)")
        out.append(NodeRow(_name(row, "sn", where), _number(row, "cpu_milli", where, 1),
                           _number(row, "memory_mib", where, 1), gpus,
                           _model(model, "model", where) if gpus else "", line))
    return _unique(out, path, "sn")


def read_tasks(path: str) -> list[TaskRow]:
    """The task list (`name,cpu_milli,memory_mib,num_gpu,gpu_milli` and optionally `gpu_spec`, `creation_time`,
    `deletion_time`), or an OpenbError naming the file and line."""
    return _unique([_task(row, f"{path}:{line}", line) for line, row in _records(path, TASK_COLUMNS)], path, "name")


def _task(row: dict[str, str], where: str, line: int) -> TaskRow:
    gpus = _number(row, "num_gpu", where)
    milli = _number(row, "gpu_milli", where, 0, WHOLE)
    if gpus == 0 and milli != 0:
        raise OpenbError(f"{where}: column gpu_milli: {milli} on a task asking for no GPU")
    if gpus == 1 and milli == 0:
        raise OpenbError(f"{where}: column gpu_milli: 0 on a task asking for a GPU (1 to 1000)")
    if gpus > 1 and milli != WHOLE:
        raise OpenbError(f"{where}: column gpu_milli: {milli} on a task asking for {gpus} GPUs (only one GPU is shared; "
                         "several are whole, 1000)")
    spec = tuple(_model(m.strip(), "gpu_spec", where) for m in (row.get("gpu_spec") or "").split("|") if m.strip())
    times = [None if row.get(c) is None else _number(row, c, where) for c in TIME_COLUMNS]
    if times[0] is not None and times[1] is not None and times[1] < times[0]:
        raise OpenbError(f"{where}: column deletion_time: {times[1]} is before creation_time {times[0]}")
    return TaskRow(_name(row, "name", where), _number(row, "cpu_milli", where), _number(row, "memory_mib", where),
                   gpus, milli, spec if gpus else (), times[0], times[1], line, where.rsplit(":", 1)[0])


def _unique(rows: list[Row], path: str, column: str) -> list[Row]:
    seen: dict[str, int] = {}
    for row in rows:
        if row.name in seen:
            raise OpenbError(f"{path}:{row.line}: column {column}: {row.name!r} again (first on line {seen[row.name]})")
        seen[row.name] = row.line
    return rows


def sample(rows: list[Row], count: int | None, seed: int) -> list[Row]:
    """`count` rows drawn at random (the same for the same seed), in their order in the file; all when None or
    more than there are."""
    if count is None or count >= len(rows):
        return list(rows)
    return [rows[i] for i in sorted(random.Random(seed).sample(range(len(rows)), count))]


# --- the snapshot -------------------------------------------------------------------------------------------

def node_manifests(row: NodeRow, mode: str) -> list[dict[str, Any]]:
    """A node's Node and, for a GPU node with DRA, its ResourceSlice: one device per GPU, shared by claims within
    its 1000 milli."""
    allocatable = {"cpu": f"{row.cpu_milli}m", "memory": f"{row.memory_mib}Mi", "pods": "110"}
    if row.gpus and mode == "extended":
        allocatable[EXTENDED] = str(row.gpus)
    labels = {"kubernetes.io/hostname": row.name, **({MODEL_LABEL: row.model} if row.gpus else {})}
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": row.name, "labels": labels},
            "status": {"allocatable": allocatable, "capacity": dict(allocatable)}}
    if not row.gpus or mode == "extended":
        return [node]
    devices = [{"name": f"gpu-{i}", "attributes": {"model": {"string": row.model}},
                "capacity": {CAPACITY: {"value": str(WHOLE)}}, "allowMultipleAllocations": True}
               for i in range(row.gpus)]
    return [node, {"apiVersion": DRA_API, "kind": "ResourceSlice", "metadata": {"name": f"{row.name}-{DRIVER}"},
                   "spec": {"driver": DRIVER, "nodeName": row.name,
                            "pool": {"name": row.name, "generation": 1, "resourceSliceCount": 1}, "devices": devices}}]


def device_class() -> dict[str, Any]:
    return {"apiVersion": DRA_API, "kind": "DeviceClass", "metadata": {"name": DRIVER},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}


def model_selector(models: Sequence[str]) -> str:
    """gpu_spec as a CEL selector on the device's model attribute."""
    return f'device.attributes["{DRIVER}"].model in [{", ".join(f"{m!r}".replace(chr(39), chr(34)) for m in models)}]'


def claim_name(task: TaskRow) -> str:
    return f"{task.name}-gpu"


def task_manifests(task: TaskRow, mode: str, scheduler: str) -> list[dict[str, Any]]:
    """A task's pending Pod and, for a GPU task with DRA, the ResourceClaim it names; with extended resources a
    shared GPU is refused (an extended resource counts whole GPUs)."""
    requests = {"cpu": f"{task.cpu_milli}m", "memory": f"{task.memory_mib}Mi"}
    container: dict[str, Any] = {"name": "task", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": requests}}
    spec: dict[str, Any] = {"schedulerName": scheduler, "containers": [container]}
    meta = {"name": task.name, "namespace": NAMESPACE, "labels": {"gpu.openb/shape": _label(task.shape)},
            **({"creationTimestamp": rfc3339(EPOCH + task.creation)} if task.creation is not None else {})}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": "Pending"}}
    if not task.num_gpu:
        return [pod]
    if mode == "extended":
        if task.shared:
            raise OpenbError(f"{task.file}:{task.line}: task {task.name} shares a GPU (gpu_milli {task.gpu_milli}): an "
                             f"extended resource ({EXTENDED}) counts whole GPUs only; use --gpus-as dra")
        requests[EXTENDED] = str(task.num_gpu)
        container["resources"]["limits"] = {EXTENDED: str(task.num_gpu)}  # an extended resource's limit is its request
        if task.gpu_spec:
            spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": MODEL_LABEL, "operator": "In", "values": list(task.gpu_spec)}]}]}}}
        return [pod]
    container["resources"]["claims"] = [{"name": "gpu"}]
    spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim_name(task)}]
    return [pod, claim(task)]


def claim(task: TaskRow) -> dict[str, Any]:
    """The task's ResourceClaim: `num_gpu` devices consumed whole, or one device of which it consumes gpu_milli."""
    exactly: dict[str, Any] = {"deviceClassName": DRIVER, "count": task.num_gpu}
    if task.shared:
        exactly["capacity"] = {"requests": {CAPACITY: str(task.gpu_milli)}}
    if task.gpu_spec:
        exactly["selectors"] = [{"cel": {"expression": model_selector(task.gpu_spec)}}]
    return {"apiVersion": DRA_API, "kind": "ResourceClaim", "metadata": {"name": claim_name(task), "namespace": NAMESPACE},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}


def _label(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-")


def snapshot(nodes: Sequence[NodeRow], tasks: Sequence[TaskRow], mode: str, scheduler: str) -> dict[str, Any]:
    """The cluster with every task pending, as `kubectl get -o yaml` lists objects (a `List`)."""
    items = [m for row in nodes for m in node_manifests(row, mode)]
    if mode == "dra" and any(n.gpus for n in nodes):
        items.append(device_class())
    items += [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}]
    items += [m for task in tasks for m in task_manifests(task, mode, scheduler)]
    return {"apiVersion": "v1", "kind": "List", "items": items}


# --- the trace ----------------------------------------------------------------------------------------------

def trace(nodes: Sequence[NodeRow], tasks: Sequence[TaskRow], mode: str) -> dict[str, Any]:
    """The trace in `simulate`'s format: nodes grouped by shape (`count`, `allocatable`, `prefix`), a job per task
    (`name`, `arrival` = creation_time, `runtime` = deletion_time − creation_time, at least 1 s, `requests`,
    `class`), and the GPUs under keys of their own, which `simulate` replays: a GPU node's `labels` and its
    ResourceSlice `devices`, a GPU task's `claim` (its ResourceClaim's spec, as in the snapshot) and with extended
    resources a `gpu_spec`'s `affinity`."""
    untimed = next((t for t in tasks if t.creation is None or t.deletion is None), None)
    if untimed is not None:
        raise OpenbError(f"{untimed.file}:{untimed.line}: no creation_time or deletion_time: a trace needs both "
                         "columns (the snapshot does not)")
    labelled = mode == "dra" or any(t.gpu_spec for t in tasks)
    return {"nodes": _shapes(nodes, mode, labelled), "jobs": [_job(t, mode) for t in tasks]}


def _shapes(nodes: Sequence[NodeRow], mode: str, labelled: bool) -> list[dict[str, Any]]:
    """One entry per node shape (cpu, memory, GPUs and their model), in the order each first appears."""
    groups: dict[tuple[int, int, int, str], list[NodeRow]] = {}
    for row in nodes:
        groups.setdefault((row.cpu_milli, row.memory_mib, row.gpus, row.model), []).append(row)
    out = []
    for k, rows in enumerate(groups.values()):
        node, *slice_ = node_manifests(rows[0], mode)
        entry: dict[str, Any] = {"count": len(rows), "allocatable": node["status"]["allocatable"],
                                 "prefix": f"{(rows[0].model or 'cpu').lower()}-{k}"}
        if labelled and rows[0].gpus:
            entry["labels"] = {MODEL_LABEL: rows[0].model}
        if slice_:
            entry["devices"] = slice_[0]["spec"]["devices"]
        out.append(entry)
    return out


def _job(task: TaskRow, mode: str) -> dict[str, Any]:
    assert task.creation is not None and task.deletion is not None  # trace() checked
    pod, *claims = task_manifests(task, mode, "policy-scheduler")
    job: dict[str, Any] = {"name": task.name, "arrival": task.creation,
                           "runtime": max(1, task.deletion - task.creation),
                           "requests": pod["spec"]["containers"][0]["resources"]["requests"], "class": task.shape}
    if claims:
        job["claim"] = claims[0]["spec"]
    if "affinity" in pod["spec"]:
        job["affinity"] = pod["spec"]["affinity"]
    return job
