"""The cluster's tables: the nodes alone, and the pods bound to them, each indexed once and shared downstream.

Compile, the filters, explanations and the plan all ask the same questions (a label's value per node, which nodes a
predicate accepts, what the bound pods request per node, which pods a term matches); the answers live here, built
when first asked. Questions about nodes are answered in bulk, as numpy arrays over node positions: a cluster has tens
of thousands of nodes and compile asks per pod class, so a Python loop over nodes per class is what made compile take
seconds. `engine.model.view.View` reads these tables with pods added and removed (a preemption's victims, a later time, the
loop's assumed pods).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..time.timeline import seconds
from .cluster import HostPort, Node, Pod, PodAffinityTerm, Requirement, Taint
from .ir import NodePredicate, NodeTerms, PodTerm

Positions = list[int]  # bound pods by their position in a PodTable


@dataclass(frozen=True, slots=True)
class LabelColumn:
    """One node label as numbers: each node's value code (-1: the node lacks the label)."""

    codes: np.ndarray
    values: dict[str, int]

    @classmethod
    def of(cls, nodes: list[Node], key: str) -> LabelColumn:
        return cls.from_values([n.labels.get(key) for n in nodes])

    @classmethod
    def from_values(cls, per_node: list[str | None]) -> LabelColumn:
        """Codes in order of first appearance (so a partition's domain ids follow node order)."""
        values: dict[str, int] = {}
        codes = np.fromiter((-1 if v is None else values.setdefault(v, len(values)) for v in per_node),
                            dtype=np.int32, count=len(per_node))
        return cls(codes, values)

    def where(self, requirement: Requirement) -> np.ndarray:
        """Nodes whose value satisfies a selector requirement: the requirement is evaluated once per
        distinct value (and once for nodes without the key), exactly as `Requirement.matches` does; In and NotIn
        by their values' codes (a pod pinned by `metadata.name In [n]` read every node name: 3 ms a pod, 4,900
        nodes)."""
        if requirement.operator == "In":
            return self.mask(requirement.values)
        if requirement.operator == "NotIn":
            return ~self.mask(requirement.values)
        lookup = np.fromiter((requirement.matches({requirement.key: v}) for v in self.values), dtype=bool,
                             count=len(self.values))
        lookup = np.append(lookup, requirement.matches({}))  # code -1, no value, reads the last entry
        return lookup[self.codes]

    def mask(self, values: Iterable[str | None]) -> np.ndarray:
        """Nodes whose value is one of `values` (None among them: nodes without the label)."""
        wanted = [self.values[v] if v is not None else -1 for v in values if v is None or v in self.values]
        if not wanted:
            return np.zeros(len(self.codes), dtype=bool)
        if len(wanted) == 1:
            return self.codes == wanted[0]
        return np.isin(self.codes, np.array(wanted, dtype=np.int32))

@dataclass(frozen=True, slots=True)
class NodeRequests:
    """What the bound pods request, per node and resource, as matrices (rows: nodes; columns: `names`)."""

    names: dict[str, int]  # resource -> column
    allocatable: np.ndarray
    used: np.ndarray
    requested: np.ndarray  # per node and resource: bound pods that name it (even with 0)

    @classmethod
    def of(cls, nodes: list[Node], pods: list[Pod], node_of: list[int]) -> NodeRequests:
        """Summed per resource in numpy: one pass over the pods' request dicts per resource, instead of a
        Python dict update per pod and resource."""
        requests = [p.requests for p in pods]
        named = set().union(*requests)
        names = {r: k for k, r in enumerate(sorted(named.union(*(n.allocatable for n in nodes))))}
        rows = np.asarray(node_of, dtype=np.int64)
        allocatable = np.zeros((len(nodes), len(names)), dtype=np.int64)
        used = np.zeros_like(allocatable)
        requested = np.zeros(allocatable.shape, dtype=np.int32)
        for i, node in enumerate(nodes):
            for r, v in node.allocatable.items():
                allocatable[i, names[r]] = v
        for r in named:
            k = names[r]
            np.add.at(used[:, k], rows, np.array([q.get(r, 0) for q in requests], dtype=np.int64))
            np.add.at(requested[:, k], rows[np.array([r in q for q in requests], dtype=bool)], 1)
        return cls(names, allocatable, used, requested)

    def moved(self, gone: list[tuple[Pod, int]], added: list[tuple[Pod, int]]) -> NodeRequests | None:
        """This usage without `gone` and with `added` ((pod, node index) pairs); None when an added pod names
        a resource no column has (the caller then counts afresh)."""
        used, requested = self.used.copy(), self.requested.copy()
        for (pod, i), sign in [(g, -1) for g in gone] + [(a, 1) for a in added]:
            for r, v in pod.requests.items():
                k = self.names.get(r)
                if k is None:
                    return None
                used[i, k] += sign * v
                requested[i, k] += sign
        return NodeRequests(self.names, self.allocatable, used, requested)

    def on(self, i: int) -> dict[str, int]:
        """What the bound pods on node i request, as a dict (resources they name)."""
        return {r: int(self.used[i, k]) for r, k in self.names.items() if self.requested[i, k] > 0}


@dataclass(slots=True)
class PodColumns:
    """Per bound pod, by position: what it requests per resource (`names` columns) and whether it names each, its
    start (seconds; nan: none, or no runtime bound) and its runtime bound (inf: none) — what engine.time.timed_plan
    reads of every bound pod at once. Rows past `size` are room to grow (the scheduler loop's cache appends)."""

    names: dict[str, int]
    amounts: np.ndarray
    named: np.ndarray
    starts: np.ndarray
    runtimes: np.ndarray
    size: int = 0

    @classmethod
    def of(cls, pods: list[Pod], names: dict[str, int]) -> PodColumns:
        amounts = np.zeros((len(pods), len(names)), dtype=np.int64)
        named = np.zeros(amounts.shape, dtype=np.int32)
        for r, k in names.items():
            column = [q.get(r) for q in (p.requests for p in pods)]
            named[:, k] = [v is not None for v in column]
            amounts[:, k] = [v or 0 for v in column]
        parsed: dict[str, float | None] = {}
        starts, runtimes = np.full(len(pods), np.nan), np.full(len(pods), np.inf)
        for k, pod in enumerate(pods):
            if pod.runtime is not None:
                runtimes[k] = pod.runtime
                start = parsed[pod.started] if pod.started in parsed else parsed.setdefault(pod.started,
                                                                                          seconds(pod.started))
                starts[k] = np.nan if start is None else start
        return cls(names, amounts, named, starts, runtimes, len(pods))

    def append(self, pod: Pod) -> None:
        """One more pod at the end (every resource it names must have a column: the cache checks first)."""
        if self.size == len(self.starts):
            self._grow()
        k = self.size
        self.amounts[k], self.named[k] = 0, 0
        for r, v in pod.requests.items():
            self.amounts[k, self.names[r]], self.named[k, self.names[r]] = v, 1
        start = seconds(pod.started) if pod.runtime is not None else None
        self.starts[k] = np.nan if start is None else start
        self.runtimes[k] = np.inf if pod.runtime is None else pod.runtime
        self.size += 1

    def remove(self, k: int) -> None:
        """The pod at k out, the last one taking its place (as the cache's lists do)."""
        last = self.size - 1
        for column in (self.amounts, self.named, self.starts, self.runtimes):
            column[k] = column[last]
        self.size = last

    def take(self, positions: np.ndarray) -> PodColumns:
        """The rows at `positions` (below `size`), in that order."""
        return PodColumns(self.names, self.amounts[positions], self.named[positions], self.starts[positions],
                          self.runtimes[positions], len(positions))

    def copy(self) -> PodColumns:
        n = self.size
        return PodColumns(self.names, self.amounts[:n].copy(), self.named[:n].copy(), self.starts[:n].copy(),
                          self.runtimes[:n].copy(), n)

    def _grow(self) -> None:
        more = max(16, self.size)
        self.amounts = np.concatenate([self.amounts, np.zeros((more, len(self.names)), dtype=np.int64)])
        self.named = np.concatenate([self.named, np.zeros((more, len(self.names)), dtype=np.int32)])
        self.starts = np.concatenate([self.starts, np.full(more, np.nan)])
        self.runtimes = np.concatenate([self.runtimes, np.full(more, np.inf)])


@dataclass(slots=True)
class PodNamespaces:
    """Per bound pod, by position, its namespace as a code: the positions of one namespace's pods in one vectorised
    comparison. The loop's cache keeps it as pods come and go (as `PodColumns`), so a cycle does not walk every
    bound pod to index them by namespace (25,000 at 5,000 nodes)."""

    code: dict[str, int]
    codes: np.ndarray
    size: int = 0

    @classmethod
    def of(cls, pods: list[Pod]) -> PodNamespaces:
        code: dict[str, int] = {}
        codes = np.fromiter((code.setdefault(p.namespace, len(code)) for p in pods), dtype=np.int32, count=len(pods))
        return cls(code, codes, len(pods))

    def append(self, pod: Pod) -> None:
        if self.size == len(self.codes):
            self.codes = np.concatenate([self.codes, np.zeros(max(16, self.size), dtype=np.int32)])
        self.codes[self.size] = self.code.setdefault(pod.namespace, len(self.code))
        self.size += 1

    def remove(self, k: int) -> None:
        """The pod at k out, the last one taking its place (as the cache's lists do)."""
        self.size -= 1
        self.codes[k] = self.codes[self.size]

    def copy(self) -> PodNamespaces:
        return PodNamespaces(dict(self.code), self.codes[:self.size].copy(), self.size)

    def positions(self, namespace: str) -> Positions:
        """The positions of `namespace`'s pods, ascending (as a walk over the pods finds them)."""
        found = self.code.get(namespace)
        return [] if found is None else np.flatnonzero(self.codes[:self.size] == found).tolist()


class NodeTable:
    """The nodes alone: their label columns, which nodes a predicate accepts, taint groups, numeric attributes. The
    same whichever pods are bound, so every view of a snapshot (and every cycle of the loop while no node changes)
    shares one."""

    def __init__(self, nodes: list[Node]) -> None:
        self.nodes = nodes
        self.tainted = [i for i, n in enumerate(nodes) if n.taints]
        self.cordoned = [i for i, n in enumerate(nodes) if n.unschedulable]
        self.soft_tainted = frozenset(i for i in self.tainted
                                      if any(t.effect == "PreferNoSchedule" for t in nodes[i].taints))
        self._columns: dict[str, LabelColumn] = {}
        self._matching: dict[NodePredicate, np.ndarray] = {}
        self._cache: dict[tuple, Any] = {}  # numeric attributes, fields, one-node domains
        self._taint_groups: dict[tuple[Taint, ...], list[int]] | None = None
        self._positions: dict[str, int] | None = None

    def __len__(self) -> int:
        return len(self.nodes)

    def positions(self) -> dict[str, int]:
        """Node name -> its position."""
        if self._positions is None:
            self._positions = {n.name: i for i, n in enumerate(self.nodes)}
        return self._positions

    def label(self, key: str) -> LabelColumn:
        """Node label `key` as value codes per node (cached per key)."""
        if key not in self._columns:
            self._columns[key] = LabelColumn.of(self.nodes, key)
        return self._columns[key]

    def value(self, i: int, key: str) -> str | None:
        """Node i's value of label `key` (None: it lacks it)."""
        return self.nodes[i].labels.get(key)

    def one_node_domains(self, key: str) -> bool:
        """Every node carries `key`, each with its own value (as kubernetes.io/hostname does)."""
        cache_key = ("one-node domains", key)
        if cache_key not in self._cache:
            column = self.label(key)
            self._cache[cache_key] = len(column.values) == len(self.nodes) and bool((column.codes >= 0).all())
        return bool(self._cache[cache_key])

    def node_with(self, key: str, value: str) -> int:
        """The node whose label `key` is `value`, for a key every node carries with its own value."""
        cache_key = ("node with", key)
        if cache_key not in self._cache:
            self._cache[cache_key] = {v: i for i, n in enumerate(self.nodes) if (v := n.labels.get(key)) is not None}
        return self._cache[cache_key][value]

    def node_numbers(self, kind: str, key: str) -> np.ndarray:
        """Each node's label, annotation, allocatable amount or taint value `key` as a number (nan where it
        is absent or not a number), cached: price policies read the same column for every class."""
        cache_key = ("numbers", kind, key)
        if cache_key not in self._cache:
            self._cache[cache_key] = np.array([_number(n.attribute(kind, key)) for n in self.nodes], dtype=np.float64)
        return self._cache[cache_key]

    def matching_mask(self, predicate: NodePredicate) -> np.ndarray:
        """Which nodes a node predicate accepts, as a boolean mask (cached: classes share rules). A pod
        spec's node affinity is evaluated on label columns; other predicates (policies) node by node."""
        if predicate not in self._matching:
            if isinstance(predicate, NodeTerms):
                mask = self._terms_mask(predicate)
            else:
                mask = np.fromiter((predicate.matches(n) for n in self.nodes), dtype=bool, count=len(self.nodes))
            self._matching[predicate] = mask
        return self._matching[predicate]

    def _terms_mask(self, predicate: NodeTerms) -> np.ndarray:
        """`NodeTerms.matches` for every node: terms ORed, requirements ANDed, a term with no
        requirement matching no node (as upstream)."""
        out = np.zeros(len(self.nodes), dtype=bool)
        for term in predicate.terms:
            if not term.expressions and not term.fields:
                continue
            mask = np.ones(len(self.nodes), dtype=bool)
            for r in term.expressions:
                mask &= self.label(r.key).where(r)
            for r in term.fields:
                mask &= self._field(r.key).where(r)
            out |= mask
        return out

    def _field(self, key: str) -> LabelColumn:
        """A node field (`metadata.name`) as a column, like a label."""
        cache_key = ("field", key)
        if cache_key not in self._cache:
            self._cache[cache_key] = LabelColumn.from_values([n.fields.get(key) for n in self.nodes])
        return self._cache[cache_key]

    def matching_nodes(self, predicate: NodePredicate) -> frozenset[int]:
        """Positions of the nodes a node predicate accepts."""
        return frozenset(np.flatnonzero(self.matching_mask(predicate)).tolist())

    def taint_groups(self) -> dict[tuple[Taint, ...], list[int]]:
        """Tainted nodes grouped by their taints: a toleration check runs once per distinct taint set."""
        if self._taint_groups is None:
            groups: dict[tuple[Taint, ...], list[int]] = defaultdict(list)
            for i in self.tainted:
                groups[self.nodes[i].taints].append(i)
            self._taint_groups = dict(groups)
        return self._taint_groups

    def nodes_with(self, key: str, values: Iterable[str | None]) -> np.ndarray:
        """Nodes whose label `key` has one of `values` (None among them: nodes without the label)."""
        return np.flatnonzero(self.label(key).mask(values))

    def nodes_outside(self, key: str, values: Iterable[str]) -> np.ndarray:
        """Nodes without label `key`, or with a value not among `values`."""
        return np.flatnonzero(~self.label(key).mask(values))


class PodTable:
    """The pods bound to known nodes, by position (each one's node, what they request per node, the columns the
    loop's cache keeps beside them), and what is asked of them alone, built when first asked and shared by every
    view of the table: who is on which node, the host ports and anti-affinity terms held, which pods a term
    matches. Pure data once made: the loop's cache hands each cycle a table of its own."""

    def __init__(self, nodes: NodeTable, pods: list[Pod], node_of: list[int], usage: NodeRequests,
                 special: list[int] | None = None, columns: PodColumns | None = None,
                 namespaces: PodNamespaces | None = None) -> None:
        self.nodes = nodes
        self.pods = pods
        self.node_of = node_of
        self.usage = usage
        self.special = special if special is not None else [k for k, p in enumerate(pods)
                                                            if p.host_ports or p.anti_affinity_required]
        self._columns = columns
        self._namespaces = namespaces
        self._node_array: np.ndarray | None = None
        self._pods_on: list[list[Pod]] | None = None
        self._ports: list[list[HostPort]] | None = None
        self._slot: dict[str, int] | None = None
        self._by_namespace: dict[str, Positions] | None = None
        self._by_label: dict[tuple[str | None, str], dict[str, Positions]] = {}
        self._matching: dict[PodTerm, Positions] = {}
        self.memo: dict[tuple, Any] = {}  # what kinds work out of these pods once (`View.memo`)

    @classmethod
    def of(cls, nodes: NodeTable, bound: list[Pod]) -> PodTable:
        """The table of a snapshot's bound pods (those on unknown nodes left out). Per pod only its node's position
        and a reference are stored (no tuple or dict per pod): at 300,000 bound pods every object made here is time,
        and one more the garbage collector walks."""
        index = nodes.positions()
        where = [index.get(p.node_name or "") for p in bound]
        pods = [p for p, i in zip(bound, where) if i is not None]
        node_of = [i for i in where if i is not None]
        return cls(nodes, pods, node_of, NodeRequests.of(nodes.nodes, pods, node_of))

    def __len__(self) -> int:
        return len(self.pods)

    def node_array(self) -> np.ndarray:
        """`node_of` as an array (built once)."""
        if self._node_array is None:
            self._node_array = np.asarray(self.node_of, dtype=np.int64)
        return self._node_array

    def slot(self, key: str) -> int | None:
        """The position of the pod with this key (None: not in the table)."""
        if self._slot is None:
            self._slot = {p.key: k for k, p in enumerate(self.pods)}
        return self._slot.get(key)

    def pod_columns(self) -> PodColumns:
        """The pods' requests, starts and runtime bounds as arrays by position: given by the scheduler loop's
        cache, which keeps them as pods come and go, else read once from the pods."""
        if self._columns is None:
            self._columns = PodColumns.of(self.pods, self.usage.names)
        return self._columns

    def request_rows(self) -> tuple[np.ndarray, np.ndarray]:
        """Per pod (rows) and resource (`usage.names` columns): what it requests, and whether it names it."""
        columns = self.pod_columns()
        return columns.amounts[:columns.size], columns.named[:columns.size]

    def summed(self, pods: np.ndarray, named: bool = False) -> np.ndarray:
        """What the pods a mask over the table marks request, summed per node (rows) and resource (`usage.names`
        columns) — or with `named`, how many of them name each. A bincount per column over the pods marked, or,
        when they are most, what every pod uses less the others (numpy's `add.at` is several times slower at tens
        of thousands of pods). Exact: a node's sums are far below 2**53."""
        amounts, names = self.request_rows()
        rows, total = (names, self.usage.requested) if named else (amounts, self.usage.used)
        most = 2 * int(np.count_nonzero(pods)) > len(pods)
        positions = np.flatnonzero(~pods if most else pods)
        where, chosen, size = self.node_array()[positions], rows[positions], len(self.nodes)
        out = np.zeros((size, rows.shape[1]), dtype=np.int64)
        for k in range(rows.shape[1]):
            out[:, k] = np.bincount(where, weights=chosen[:, k], minlength=size)
        return total - out if most else out

    def lifetimes(self) -> tuple[np.ndarray, np.ndarray]:
        """Per pod: its start (status.startTime, seconds; nan: none yet, or no bound) and its runtime bound (inf:
        none), from which engine.time.timed_plan works out when each ends."""
        columns = self.pod_columns()
        return columns.starts[:columns.size], columns.runtimes[:columns.size]

    @property
    def pods_on(self) -> list[list[Pod]]:
        """Per node, its pods; built when first read."""
        if self._pods_on is None:
            self._pods_on = [[] for _ in self.nodes.nodes]
            for pod, i in zip(self.pods, self.node_of):
                self._pods_on[i].append(pod)
        return self._pods_on

    @property
    def ports(self) -> list[list[HostPort]]:
        """Per node, the host ports its pods hold."""
        if self._ports is None:
            self._ports = [[] for _ in self.nodes.nodes]
            for k in self.special:
                self._ports[self.node_of[k]].extend(self.pods[k].host_ports)
        return self._ports

    def anti_terms(self) -> list[tuple[PodAffinityTerm, int]]:
        """Each pod's required anti-affinity terms with its node's position (a term held twice listed twice)."""
        return [(t, self.node_of[k]) for k in self.special for t in self.pods[k].anti_affinity_required]

    def matching(self, term: PodTerm) -> Positions:
        """Positions of the pods matching `term` (cached)."""
        if term not in self._matching:
            pods = self.pods
            self._matching[term] = [k for k in self._candidates(term) if term.matches(pods[k])]
        return self._matching[term]

    def _in_namespace(self, namespace: str | None) -> Positions:
        """Positions of the pods in one namespace (None: all), indexed the first time a term asks."""
        if namespace is None:
            return list(range(len(self.pods)))
        if self._namespaces is not None:
            return self._namespaces.positions(namespace)
        if self._by_namespace is None:
            by_namespace: dict[str, Positions] = defaultdict(list)
            for k, pod in enumerate(self.pods):
                by_namespace[pod.namespace].append(k)
            self._by_namespace = dict(by_namespace)
        return self._by_namespace.get(namespace, [])

    def _candidates(self, term: PodTerm) -> Positions:
        """Pods that may match `term`: a superset, narrowed per namespace by an inverted index on the selector's
        `In` requirements, so a term is matched against its few candidates and not against every bound pod
        (hundreds of thousands in a real cluster)."""
        namespaces = getattr(term, "namespaces", None)
        selector = getattr(term, "selector", None)
        keyed = [r for r in getattr(selector, "requirements", ()) if r.operator == "In"]
        scopes: list[str | None] = [None] if namespaces is None else sorted(namespaces)
        out: Positions = []
        for ns in scopes:
            pool = self._in_namespace(ns)
            best: list[Positions] = [pool]
            for r in keyed:
                by_value = self._label_index(ns, r.key, pool)
                lists = [by_value.get(v, []) for v in r.values]
                if sum(map(len, lists)) < sum(map(len, best)):
                    best = lists
            for part in best:
                out.extend(part)
        return out

    def _label_index(self, namespace: str | None, key: str, pool: Positions) -> dict[str, Positions]:
        """Pods of one namespace (None: all) per value of label `key`, built the first time a selector asks for
        that key there."""
        cache_key = (namespace, key)
        if cache_key not in self._by_label:
            index: dict[str, Positions] = defaultdict(list)
            pods = self.pods
            for k in pool:
                value = pods[k].labels.get(key)
                if value is not None:
                    index[value].append(k)
            self._by_label[cache_key] = dict(index)
        return self._by_label[cache_key]

    def moved(self, gone: np.ndarray, added: list[tuple[Pod, int]]) -> PodTable:
        """A table of its own without the pods a mask over this one marks and with `added` ((pod, node position)
        pairs): what a view settles into. Capacity is taken off in one vectorised step per resource when many go
        (most of 50,000 pods may have ended by a late time step), pod by pod otherwise."""
        keep = ~gone
        positions = np.flatnonzero(keep)
        pods = [self.pods[k] for k in positions.tolist()]
        node_of = self.node_array()[positions].tolist()
        usage = self.usage
        if gone.any():
            if int(np.count_nonzero(gone)) > FEW:
                usage = NodeRequests(usage.names, usage.allocatable, usage.used - self.summed(gone),
                                     usage.requested - self.summed(gone, named=True))
            else:
                left = usage.moved([(self.pods[k], self.node_of[k]) for k in np.flatnonzero(gone).tolist()], [])
                assert left is not None  # (a pod of the table names only columns the table has)
                usage = left
        special = (np.cumsum(keep) - 1)[[k for k in self.special if keep[k]]].tolist()
        columns = self._columns.take(positions) if self._columns is not None else None
        moved = usage.moved([], added) if added else usage
        if moved is None:  # an added pod names a resource no column has: counted afresh
            return PodTable.of(self.nodes, pods + [replace(p, node_name=self.nodes.nodes[i].name) for p, i in added])
        special += [len(pods) + k for k, (p, _) in enumerate(added) if p.host_ports or p.anti_affinity_required]
        if columns is not None:
            for p, _ in added:
                columns.append(p)
        return PodTable(self.nodes, pods + [p for p, _ in added], node_of + [i for _, i in added], moved, special,
                        columns)


FEW = 64  # pods leaving a table counted one by one; past it, summed per node from the request columns


def _number(raw: object) -> float:
    try:
        return float("nan") if raw is None else float(raw)  # type: ignore[arg-type]
    except ValueError:
        return float("nan")
