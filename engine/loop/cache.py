"""The cluster model kept up to date from watch deltas (kube-scheduler's cache and its UpdateSnapshot).

The store holds raw objects; this cache holds what planning reads of them, converted once per change: the
nodes with their table, the pods holding capacity (bound, or assumed while their bind is under way) with
the capacity they use per node, and everything else (namespaces, PriorityClasses, PodGroups, storage,
workloads, devices, budgets) converted again only when one of those objects changed. A cycle's `snapshot`
then costs what changed since the last one plus the batch, not the cluster: `build_cluster` over every object
is what the dry-run does once, and what the loop did on every cycle.

The conversions and the assembly are `engine.reading.load`'s own (`Context.pod`, `node_model`, `sort_objects`,
`convert_pods`, `assemble`) and `engine.reading.resolve`'s, so a snapshot is the cluster `build_cluster` would make of
the same objects; a property test holds the two equal. Pure (no I/O); thread-safe, since watches feed it while a cycle reads it.
"""

from __future__ import annotations

import threading
import weakref
from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..devices.storage import held_volumes
from ..kinds.base import Action, ModelChange, Resource
from ..model.cluster import NO_CLAIMS, NO_VOLUMES, TERMINAL_PHASES, Cluster, Node, Pod, PodAffinityTerm, Quota
from ..model.ir import GangRules
from ..model.tables import NodeRequests, NodeTable, PodColumns, PodNamespaces, PodTable
from ..model.view import View
from ..quotas import tenants
from ..reading.convert.fields import refusal
from ..reading.load import PROBLEMS, Context, InputError, assemble, convert_pods, namespace_labels, node_model, sort_objects
from ..reading.objects import OBJECT_KINDS, is_terminal
from ..reading.resolve import resolve_cluster
from .ports import Obj
from .store import Assumptions, meta, node_of, obj_key, on_node, pod_key, source_name, with_allocations

# kinds of which planning reads only the spec and labels (system-default spreading's selectors, the workloads' sizes),
# and the keys of their status it reads too
SPEC_ONLY = {k.name: k.status_read for k in OBJECT_KINDS if k.spec_only}
# the other kinds whose changes may help a waiting pod (Services, workloads, budgets never make one schedulable)
REST_RESOURCES = {k.name: Resource(k.event) for k in OBJECT_KINDS if k.event and k.name not in ("Node", "Pod")}


def holds_node(obj: Obj) -> bool:
    """A pod that holds its node's capacity: bound and not finished (a terminating pod still holds it)."""
    return bool(node_of(obj)) and not is_terminal(obj)


@dataclass(slots=True)
class _Rest:
    """Every object but nodes and pods, converted together (they are few and read each other)."""

    cluster: Cluster
    context_parts: tuple[dict[str, dict[str, str]], Any, dict[str, Any]]  # namespaces, priorities, native groups
    budgets_raw: list[tuple[str, dict[str, Any]]]
    errors: list[InputError]


@dataclass(slots=True)
class Snapshot:
    """One cycle's snapshot: the cluster with its batch, and the view of what the bound and assumed pods hold."""

    cluster: Cluster
    view: View
    lowest: int | None  # the lowest priority of a running pod (preemption's first question)
    usage: tenants.Usage | None = None  # what the placed pods use of the quotas (None: there are none)


@dataclass(slots=True)
class _Rows:
    """What the view needs, kept per change: the nodes with their positions and table, the placed pods on known
    nodes as parallel lists (pod, its node's position), and the capacity they use on each node (rows)."""

    nodes: list[Node]
    at: dict[str, int]
    node_table: NodeTable
    names: dict[str, int]  # resource -> column
    allocatable: np.ndarray
    used: np.ndarray
    requested: np.ndarray
    pods: list[Pod] = field(default_factory=list)
    node_of: list[int] = field(default_factory=list)
    slot: dict[str, int] = field(default_factory=dict)  # pod key -> its position in `pods`
    special: set[str] = field(default_factory=set)  # pods with host ports or required anti-affinity
    columns: PodColumns | None = None  # per pod, beside the lists: its requests, start and runtime bound
    namespaces: PodNamespaces | None = None  # per pod, beside the lists: its namespace

    @classmethod
    def of(cls, nodes: list[Node], placed: list[Pod]) -> _Rows:
        at = {n.name: i for i, n in enumerate(nodes)}
        pods = [p for p in placed if p.node_name in at]
        node_of = [at[p.node_name or ""] for p in pods]
        usage = NodeRequests.of(nodes, pods, node_of)
        rows = cls(nodes, at, NodeTable(nodes), usage.names, usage.allocatable, usage.used, usage.requested, pods,
                   node_of, {p.key: k for k, p in enumerate(pods)})
        rows.special = {p.key for p in pods if p.host_ports or p.anti_affinity_required}
        rows.columns = PodColumns.of(pods, usage.names)
        rows.namespaces = PodNamespaces.of(pods)
        return rows

    def move(self, key: str, before: Pod | None, after: Pod | None) -> bool:
        """The placed pod of `key` was `before` and is `after` (None: none): lists and capacity follow. False when
        a resource has no column (the caller builds the rows afresh)."""
        if after is not None and any(r not in self.names for r in after.requests):
            return False
        if before is not None and key in self.slot:
            self._count(before, self.node_of[self.slot[key]], -1)
            self._remove(key)
        if after is not None and (i := self.at.get(after.node_name or "")) is not None:
            self.slot[key] = len(self.pods)
            self.pods.append(after)
            self.node_of.append(i)
            if self.columns is not None:
                self.columns.append(after)  # (every resource it names has a column: checked above)
            if self.namespaces is not None:
                self.namespaces.append(after)
            self._count(after, i, 1)
            if after.host_ports or after.anti_affinity_required:
                self.special.add(key)
        return True

    def _remove(self, key: str) -> None:
        """Out of the lists in O(1): the last pod takes its position."""
        k, last = self.slot.pop(key), len(self.pods) - 1
        if k != last:
            moved = self.pods[last]
            self.pods[k], self.node_of[k] = moved, self.node_of[last]
            self.slot[moved.key] = k
        self.pods.pop()
        self.node_of.pop()
        if self.columns is not None:
            self.columns.remove(k)
        if self.namespaces is not None:
            self.namespaces.remove(k)
        self.special.discard(key)

    def _count(self, pod: Pod, i: int, sign: int) -> None:
        for r, v in pod.requests.items():
            k = self.names[r]
            self.used[i, k] += sign * v
            self.requested[i, k] += sign

    def view(self) -> View:
        """This cycle's view: a pod table of its own, the lists and capacity copied (the next changes do not reach
        it)."""
        usage = NodeRequests(self.names, self.allocatable, self.used.copy(), self.requested.copy())
        special = sorted(self.slot[key] for key in self.special)
        columns = self.columns.copy() if self.columns is not None and _timed(self.columns) else None
        namespaces = self.namespaces.copy() if self.namespaces is not None else None
        return View(PodTable(self.node_table, list(self.pods), list(self.node_of), usage, special, columns,
                             namespaces))


def _timed(columns: PodColumns) -> bool:
    """Whether some placed pod has a runtime bound (else time is not in the plan, and the columns are not read)."""
    return bool(np.isfinite(columns.runtimes[:columns.size]).any())


class SharedTerms:
    """One object for each distinct required anti-affinity term among the pods converted: every cycle groups the
    placed pods' terms in a dict (`View.anti_domains`), and equal terms that are one object compare by
    identity there, not field by field (1,350 comparisons a cycle at 1,000 nodes with 4,500 pods bound). Held
    weakly: a term no pod holds any more leaves the pool."""

    def __init__(self) -> None:
        # keyed by the term's fields, not the term: a key is held strongly, and a term keyed by itself never leaves
        self._pool: weakref.WeakValueDictionary[tuple, PodAffinityTerm] = weakref.WeakValueDictionary()

    def __len__(self) -> int:
        return len(self._pool)

    def shared(self, pod: Pod) -> Pod:
        """`pod`, its anti-affinity terms the pool's (a copy only when some term was not)."""
        terms = pod.anti_affinity_required
        if not terms:
            return pod
        same = tuple(self._pool.setdefault(t.parts(), t) for t in terms)
        if all(a is b for a, b in zip(same, terms)):
            return pod
        return replace(pod, anti_affinity_required=same)


class ClusterCache:
    """Nodes, placed pods and the rest, converted as they change; `snapshot` assembles a cycle's cluster."""

    def __init__(self, assumptions: Assumptions | None = None) -> None:
        self._lock = threading.Lock()
        # the one record of assumed pods, the store's (it settles them before the cache hears a delta); the cache
        # keeps only each assumed pod's model, as bound to its node
        self._assumptions = assumptions if assumptions is not None else Assumptions()
        self._node_raw: dict[str, Obj] = {}
        self._node_models: dict[str, Node] = {}
        self._nodes: _Rows | None = None  # None: rebuilt at the next snapshot
        self._bound_raw: dict[str, Obj] = {}
        self._pending_raw: dict[str, Obj] = {}  # pods without a node: what an assumption was made of
        self._pending_models: dict[str, tuple[Obj, Pod]] = {}  # pending pod -> (the manifest converted, its model)
        self._pending_parts: tuple[Any, ...] | None = None  # the rest's context parts those models were made with
        self._bound: dict[str, Pod] = {}
        self._assumed: dict[str, Pod] = {}  # the model of each pod in `_assumptions`
        self._allocated: dict[str, Obj] = {}  # the assumed pods' claim allocations the rest was last converted with
        self._placed: dict[str, Pod] = {}  # what holds capacity: the bound pod, else the assumed one
        self._refused: dict[tuple[str, str, str], InputError] = {}
        self._rest_raw: dict[tuple[str, str, str], Obj] = {}
        self._rest: _Rest | None = None
        self._rest_stale = True  # an object of the rest changed since `_rest` was made
        self._namespaces_seen: Counter[str] = Counter()  # namespaces of bound pods (namespaceSelector reads them)
        self._running: Counter[int] = Counter()  # priorities of the placed pods not terminating
        self._tenancy = tenants.Tracker()  # what the placed pods use of their quotas
        self._terms = SharedTerms()

    # -- changes ------------------------------------------------------------------------------------

    def apply(self, kind: str, old: Obj | None, new: Obj | None) -> ModelChange | None:
        """One watch delta; returns it in the model's words for the queue's hints (None: nothing planning
        reads changed)."""
        with self._lock:
            if kind == "Node":
                return self._node(old, new)
            if kind == "Pod":
                return self._pod(old, new)
            if kind == "ConfigMap" or (kind in SPEC_ONLY and old is not None and new is not None
                                       and _read(old, SPEC_ONLY[kind]) == _read(new, SPEC_ONLY[kind])):
                return None  # (a ReplicaSet's status follows every pod bound: nothing planning reads)
            key = obj_key(kind, (new or old) or {})
            if new is None:
                self._rest_raw.pop(key, None)
            else:
                self._rest_raw[key] = new
            self._rest_stale = True
            resource = REST_RESOURCES.get(kind)
            action = Action.ADD if old is None else Action.DELETE if new is None else Action.UPDATE
            return None if resource is None else ModelChange(resource, action)

    def _node(self, old: Obj | None, new: Obj | None) -> ModelChange | None:
        name = meta((new or old) or {}).get("name") or ""
        before = self._node_models.get(name)
        self._refused.pop(("Node", "", name), None)
        if new is None:
            self._node_raw.pop(name, None)
            self._node_models.pop(name, None)
            self._nodes = None
            return ModelChange(Resource.NODE, Action.DELETE, before, None) if before else None
        self._node_raw[name] = new
        try:
            after = node_model(new)
        except PROBLEMS as exc:
            self._refused[("Node", "", name)] = refusal(source_name("Node", "", name), "Node", new, exc)
            self._node_models.pop(name, None)
            self._nodes = None
            return None
        if after == before:
            return None  # a heartbeat, a condition, an annotation nothing reads: the table stays
        self._node_models[name] = after
        self._node_changed(before, after)
        return ModelChange(Resource.NODE, node_action(before, after), before, after)

    def _node_changed(self, before: Node | None, after: Node) -> None:
        """Keep the rows when a node only changed in place and its resources have columns; else rebuild."""
        rows = self._nodes
        if rows is None or before is None or any(r not in rows.names for r in after.allocatable):
            self._nodes = None
            return
        i = rows.at[after.name]
        rows.nodes = [*rows.nodes[:i], after, *rows.nodes[i + 1:]]
        rows.node_table = NodeTable(rows.nodes)
        rows.allocatable = rows.allocatable.copy()
        rows.allocatable[i] = 0
        for r, v in after.allocatable.items():
            rows.allocatable[i, rows.names[r]] = v

    def _pod(self, old: Obj | None, new: Obj | None) -> ModelChange | None:
        key = pod_key((new or old) or {})
        if new is not None and not node_of(new):
            self._pending_raw[key] = new
        else:
            self._pending_raw.pop(key, None)
            self._pending_models.pop(key, None)
        if new is not None and holds_node(new):
            if self._bound_raw.get(key) is new:
                return None
            self._bound_raw[key] = new
            self._convert_bound(key, new)
        elif key in self._bound_raw:
            del self._bound_raw[key]
            self._drop_bound(key)
            self._refused.pop(_pod_ref(key), None)
        if key not in self._assumptions:  # (the store settled it: bound, deleted or replaced)
            self._assumed.pop(key, None)
        elif key in self._assumed:  # still pending, changed (labels, say): assumed as it is now
            self._reassume(key)
        return self._settle(key)

    def _reassume(self, key: str) -> None:
        """An assumed pod converted again from its pending manifest, as if bound to its node."""
        raw, node = self._pending_raw.get(key), self._assumed[key].node_name
        held = None if raw is None else self._model(key, on_node(raw, node or ""))
        if held is not None:
            self._assumed[key] = held

    def _drop_bound(self, key: str) -> None:
        gone = self._bound.pop(key, None)
        if gone is not None:
            self._namespaces_seen[gone.namespace] -= 1

    def _convert_bound(self, key: str, obj: Obj) -> None:
        self._drop_bound(key)
        pod = self._model(key, obj)
        if pod is not None:
            self._bound[key] = pod
            self._namespaces_seen[pod.namespace] += 1

    def _model(self, key: str, obj: Obj) -> Pod | None:
        """A pod on its node in the model, holding its volumes (None: refused, and recorded so)."""
        ref = _pod_ref(key)
        self._refused.pop(ref, None)
        try:
            pod = self._context().pod(obj)
        except PROBLEMS as exc:
            self._refused[ref] = refusal(source_name(*ref), "Pod", obj, exc)
            return None
        return self._holding_volumes(self._terms.shared(pod))

    def _holding_volumes(self, pod: Pod) -> Pod:
        """A placed pod with what its claims hold (attached volumes, ReadWriteOncePod claims in use)."""
        if not pod.claims:
            return pod
        volumes = held_volumes(pod, self._last_rest().cluster.storage)
        return pod if volumes == pod.volumes else replace(pod, volumes=volumes)

    def _settle(self, key: str) -> ModelChange | None:
        """Move capacity from what held it for `key` to what holds it now (the bound pod, else the assumed), and
        say what changed."""
        assumed = self._assumed.get(key)
        if assumed is not None and assumed.phase in TERMINAL_PHASES:
            assumed = None  # finished before its bind was seen: it holds nothing
        before, after = self._placed.get(key), self._bound.get(key) or assumed
        if before is after:
            return None
        for pod, sign in ((before, -1), (after, 1)):
            if pod is not None and not pod.terminating:
                self._running[pod.priority] += sign
                if not self._running[pod.priority]:
                    del self._running[pod.priority]
        if self._nodes is not None and not self._nodes.move(key, before, after):
            self._nodes = None
        self._tenancy.move(before, after)
        if after is None:
            self._placed.pop(key, None)
        else:
            self._placed[key] = after
        return pod_change(before, after, self._node_models.get((before or after).node_name or ""))  # type: ignore[union-attr]

    def assume(self, pod: Pod, node: str) -> ModelChange | None:
        """A pod of a batch placed on `node`, assumed in the ledger (with the claims it allocates, which hold their
        devices as long: upstream's in-flight allocations): it holds the node until the watch shows it bound, or
        `forget`. The change is a pod added (it may support a waiting pod's affinity); its bind seen later is an
        update."""
        with self._lock:
            self._assumed[pod.key] = self._as_bound(pod, node)
            return self._settle(pod.key)

    def evicting(self, keys: Iterable[str]) -> None:
        """Victims a cycle's plan evicts: terminating at once in the model (they count toward no quota and are
        never chosen again) though the evictions are sent later, by the bind stage, and the watch shows them
        later still; the next cycle must not see them running and evict more for the same room."""
        with self._lock:
            for key in keys:
                pod = self._bound.get(key)
                if pod is not None and not pod.terminating:
                    self._bound[key] = replace(pod, terminating=True)
                    self._settle(key)

    def kept(self, keys: Iterable[str]) -> None:
        """Victims whose eviction failed: what the watch last showed of them again."""
        with self._lock:
            for key in keys:
                if (raw := self._bound_raw.get(key)) is not None:
                    self._convert_bound(key, raw)
                    self._settle(key)

    def _as_bound(self, pod: Pod, node: str) -> Pod:
        """A pending pod of a snapshot as the bound pod it becomes: on its node, without what resolving the
        batch derived for placing it (gang, default spreading, claims to allocate), holding its volumes."""
        return self._holding_volumes(replace(pod, node_name=node, gang=None, default_spread=None, dra=NO_CLAIMS,
                                             volumes=NO_VOLUMES))

    def forget(self, key: str) -> ModelChange | None:
        """The bind of an assumed pod failed: its node's capacity is free again (and that may help others)."""
        with self._lock:
            if self._assumed.pop(key, None) is not None:
                return self._settle(key)
            return None

    # -- the rest ----------------------------------------------------------------------------------

    def _rest_or_build(self) -> _Rest:
        allocating = self._assumptions.allocating()  # claims show allocated until the watch shows them written
        if self._rest is None or self._rest_stale or allocating != self._allocated:
            self._rest_stale, self._allocated = False, allocating
            docs = [(source_name(*k), o) for k, o in with_allocations(self._rest_raw.items(), allocating)]
            found = sort_objects(docs)
            cluster = found.cluster
            parts = (cluster.namespaces, found.priorities, cluster.native_groups)
            previous = self._rest
            self._rest = _Rest(cluster, parts, found.budgets, found.errors)
            self._reconvert(previous, self._rest)
        return self._rest

    def _reconvert(self, previous: _Rest | None, now: _Rest) -> None:
        """After namespaces, PriorityClasses, scheduling.k8s.io PodGroups or storage changed, bound pods are
        converted again (what they read of those may have changed)."""
        if previous is None or previous.context_parts != now.context_parts:
            for key, obj in list(self._bound_raw.items()):
                self._convert_bound(key, obj)
                self._settle(key)
            for key in list(self._assumed):
                self._reassume(key)
                self._settle(key)
            return
        for held in (self._bound, self._assumed):  # what their claims hold, read of the rest as it is now
            for key, pod in list(held.items()):
                if (fresh := self._holding_volumes(pod)) is not pod:
                    held[key] = fresh
                    self._settle(key)

    def _last_rest(self) -> _Rest:
        """The rest as last converted, even if an object of it changed since: what a watch delta's pod is converted
        with. The next snapshot converts the rest again and, if what pods read of it changed, the pods too, so
        a busy stream of claim or volume updates does not convert the rest once per pod event."""
        return self._rest if self._rest is not None else self._rest_or_build()

    def _context(self, seen: set[str] | None = None) -> Context:
        rest = self._last_rest()
        namespaces, priorities, groups = rest.context_parts
        return Context(namespace_labels(namespaces, {*self._namespaces_seen.keys(), *(seen or ())}), priorities, groups)

    # -- a cycle's view ------------------------------------------------------------------------------

    def build(self, schedulers: Collection[str] = ()) -> None:
        """Convert now what the first snapshot would otherwise: the rest (and the bound pods again with it), the
        node rows and the pending pods addressed to `schedulers`. A batch waiting at start (a restarted scheduler, a
        Job fan-out met by a new leader) then waits only for its own cycle (issue 30: 0.2 s of a 200-node batch's
        first bind was the rest and the rows; 0.1 s of a 1,000-node one's, converting its 5,000 pods)."""
        with self._lock:
            rest = self._rest_or_build()
            self._rows()
            waiting = [(source_name("Pod", *k.split("/", 1)), o) for k, o in self._pending_raw.items()
                       if (o.get("spec") or {}).get("schedulerName") in schedulers]
            self._convert_waiting(self._context({meta(o).get("namespace") or "default" for _, o in waiting}),
                                  rest.context_parts, waiting)


    def snapshot(self, batch: list[tuple[str, Obj]], scheduler_name: str, gangs: GangRules | None,
                 quotas: tuple[Quota, ...] = ()) -> Snapshot:
        """The cluster of one cycle: every node and placed pod, the rest, and `batch` ((source name, pending
        pod manifest) pairs) as pending or skipped; with the view of what the placed pods hold, and what they use
        of the cluster's quotas and then `quotas` (the policies')."""
        with self._lock:
            rest = self._rest_or_build()
            rows = self._rows()
            cluster = replace(rest.cluster, nodes=list(rows.nodes), bound=list(self._placed.values()), pending=[],
                              notes=[], skipped={}, skipped_codes={}, gangs={}, refused=[])
            context = self._context({meta(o).get("namespace") or "default" for _, o in batch})
            waiting = [(src, o) for src, o in batch if not holds_node(o) and pod_key(o) not in self._placed]
            pods, errors = self._convert_waiting(context, rest.context_parts, waiting)
            # (bound meanwhile, or assumed: it holds its node already)
            cluster, _, _ = assemble(cluster, pods, context.priorities, scheduler_name, rest.budgets_raw,
                                     [*rest.errors, *self._refused.values(), *errors])
            cluster = resolve_cluster(cluster, gangs, bound=False)
            every = [*cluster.quotas, *quotas]
            usage = self._tenancy.usage(every, cluster.bound) if every else None
            return Snapshot(cluster, rows.view(), min(self._running, default=None), usage)

    def waiting_model(self, key: str) -> Pod | None:
        """A pending pod's model as last converted (None: not yet): a dict read, safe from the queue's thread."""
        hit = self._pending_models.get(key)
        return None if hit is None else hit[1]

    def _convert_waiting(self, context: Context, parts: tuple[Any, ...], waiting: list[tuple[str, Obj]]
                         ) -> tuple[list[tuple[Obj, Pod]], list[InputError]]:
        """The pending pods in the model, each converted once per manifest (a pod waiting through many cycles, or
        listed before the scheduler is ready, is not converted again every cycle), again when the namespaces,
        PriorityClasses or PodGroups it reads change."""
        if parts is not self._pending_parts and parts != self._pending_parts:
            self._pending_models.clear()
        self._pending_parts = parts
        known, fresh = [], []
        for src, obj in waiting:
            hit = self._pending_models.get(pod_key(obj))
            if hit is not None and hit[0] is obj:
                known.append((obj, hit[1]))
            else:
                fresh.append((src, obj))
        pods, errors = convert_pods(context, fresh)
        for obj, pod in pods:
            self._pending_models[pod_key(obj)] = (obj, pod)
        if not known:
            return pods, errors
        order = {id(obj): i for i, (_, obj) in enumerate(waiting)}  # the batch's order, as converting it would
        return sorted([*known, *pods], key=lambda found: order[id(found[0])]), errors

    def _rows(self) -> _Rows:
        if self._nodes is None:
            models = self._node_models  # in the order the store holds them (a node refused for a while keeps its place)
            self._nodes = _Rows.of([models[n] for n in self._node_raw if n in models], list(self._placed.values()))
        return self._nodes


def _read(obj: Obj, status: tuple[str, ...]) -> tuple[Any, Any, tuple[Any, ...]]:
    """What planning reads of a spec-only kind's object: its spec, its labels, those keys of its status."""
    found = obj.get("status") or {}
    return obj.get("spec"), meta(obj).get("labels"), tuple(found.get(k) for k in status)


def _pod_ref(key: str) -> tuple[str, str, str]:
    namespace, name = key.split("/", 1)
    return "Pod", namespace, name


def node_action(before: Node | None, after: Node) -> Action:
    """What changed on a node, in upstream's ActionType words."""
    if before is None:
        return Action.ADD
    action = Action(0)
    if before.labels != after.labels:
        action |= Action.UPDATE_NODE_LABEL
    if before.taints != after.taints or before.unschedulable != after.unschedulable:
        action |= Action.UPDATE_NODE_TAINT
    if before.allocatable != after.allocatable:
        action |= Action.UPDATE_NODE_ALLOCATABLE
    if before.declared_features != after.declared_features:
        action |= Action.UPDATE_NODE_DECLARED_FEATURE
    return action or Action.UPDATE


def pod_change(before: Pod | None, after: Pod | None, node: Node | None) -> ModelChange | None:
    """A placed pod appearing, leaving or changing on `node`, in upstream's words (None: nothing placed changed)."""
    if before is after:
        return None
    if before is None:
        return ModelChange(Resource.POD, Action.ADD, None, after, node)
    if after is None:
        return ModelChange(Resource.POD, Action.DELETE, before, None, node)
    action = Action(0)
    if before.labels != after.labels:
        action |= Action.UPDATE_POD_LABEL
    if any(after.requests.get(r, 0) < v for r, v in before.requests.items()):
        action |= Action.UPDATE_POD_SCALE_DOWN
    if before.tolerations != after.tolerations:
        action |= Action.UPDATE_POD_TOLERATION
    if before.node_name != after.node_name:
        action |= Action.ADD | Action.DELETE
    return ModelChange(Resource.POD, action or Action.UPDATE, before, after, node)
