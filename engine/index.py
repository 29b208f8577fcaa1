"""The cluster index: what the bound pods hold, computed once per snapshot and shared downstream.

Compile, the static filters, explanations and the plan all ask the same questions of the bound pods
(capacity used, ports taken, which topology domains host pods matching a term); the answers live here,
cached, so data flows down from one place instead of each stage recomputing it.

Questions about nodes are answered in bulk, as numpy arrays over node indices (a label's value code per
node, a predicate's mask, free capacity as a matrix): a cluster has tens of thousands of nodes and the
compiler asks per pod class, so a Python loop over nodes per class is what made compile take seconds.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .ir import NodePredicate, NodeTerms, PodTerm
from .model import HostPort, Node, Pod, PodAffinityTerm, Requirement, Taint
from .timeline import seconds

Placed = list[tuple[int, Pod]]  # bound pods with their node index
Positions = list[int]  # bound pods by their position in BoundState.pods


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
        distinct value (and once for nodes without the key), exactly as `Requirement.matches` does."""
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

def _number(raw: object) -> float:
    try:
        return float("nan") if raw is None else float(raw)  # type: ignore[arg-type]
    except ValueError:
        return float("nan")


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
    start (seconds; nan: none, or no runtime bound) and its runtime bound (inf: none) — what engine.timed_plan
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


@dataclass(slots=True)
class NodeFacts:
    """What the index knows of the nodes alone (label columns, predicate masks, taint groups, numeric
    attributes): the same whichever pods are bound, so every view of one snapshot shares it."""

    nodes: list[Node]
    cordoned: list[int]
    tainted: list[int]
    soft_tainted: frozenset[int]  # nodes with a PreferNoSchedule taint
    columns: dict[str, LabelColumn] = field(default_factory=dict)
    matching: dict[NodePredicate, np.ndarray] = field(default_factory=dict)
    cache: dict[tuple, Any] = field(default_factory=dict)  # numeric attributes, fields, allocatable checks
    taint_groups: dict[tuple[Taint, ...], list[int]] | None = None

    @classmethod
    def of(cls, nodes: list[Node]) -> NodeFacts:
        tainted = [i for i, n in enumerate(nodes) if n.taints]
        soft = frozenset(i for i in tainted if any(t.effect == "PreferNoSchedule" for t in nodes[i].taints))
        return cls(nodes, [i for i, n in enumerate(nodes) if n.unschedulable], tainted, soft)


@dataclass(slots=True)
class BoundState:
    """What the bound pods hold: capacity used, ports taken, and who sits in which topology domain."""

    nodes: list[Node]
    usage: NodeRequests
    pods: list[Pod]  # the bound pods on known nodes…
    node_of: list[int]  # …and each one's node index
    ports: list[list[HostPort]]
    anti_terms: list[tuple[PodAffinityTerm, int]]  # (term, node index)
    facts: NodeFacts
    _used: list[dict[str, int]] | None = None
    _pods_on: list[list[Pod]] | None = None
    _memo: dict[tuple, Any] = field(default_factory=dict)  # answers about this index, by what asked (`memo`)
    _free_matrix: tuple[dict[str, int], np.ndarray] | None = None
    _by_namespace: dict[str, Positions] | None = None
    _by_label: dict[tuple[str | None, str], dict[str, Positions]] = field(default_factory=dict)
    _anti_domains: list[tuple[PodAffinityTerm, frozenset[str]]] | None = None
    with_ports: list[int] = field(default_factory=list)
    _special: list[int] | None = None
    _pod_columns: PodColumns | None = None
    _namespaces: PodNamespaces | None = None
    _node_array: np.ndarray | None = None

    @classmethod
    def of(cls, nodes: list[Node], bound: list[Pod], facts: NodeFacts | None = None) -> BoundState:
        """The index of a snapshot. Per bound pod only its node index and references are stored (no
        tuple or dict per pod): at 300,000 bound pods every object made here is time, and one more the
        garbage collector walks."""
        index = {n.name: i for i, n in enumerate(nodes)}
        where = [index.get(p.node_name or "") for p in bound]
        pods = [p for p, i in zip(bound, where) if i is not None]
        node_of = [i for i in where if i is not None]
        return cls._of(nodes, pods, node_of, NodeRequests.of(nodes, pods, node_of), facts or NodeFacts.of(nodes))

    @classmethod
    def of_parts(cls, nodes: list[Node], pods: list[Pod], node_of: list[int], usage: NodeRequests, facts: NodeFacts,
                 special: list[int], columns: PodColumns | None = None,
                 namespaces: PodNamespaces | None = None) -> BoundState:
        """The index from parts a caller keeps up to date itself (the scheduler loop's cache): `usage` must be
        what `pods` (each on node `node_of[k]`) request of `nodes`, `facts` must describe `nodes`, `special`
        list the positions of every pod with host ports or required anti-affinity, in order, and `columns` (if
        given) be what `PodColumns.of(pods, usage.names)` would read, and `namespaces` what `PodNamespaces.of(pods)`
        would."""
        state = cls._of(nodes, pods, node_of, usage, facts, special)
        state._pod_columns = columns
        state._namespaces = namespaces
        return state

    @classmethod
    def _of(cls, nodes: list[Node], pods: list[Pod], node_of: list[int], usage: NodeRequests, facts: NodeFacts,
            special: list[int] | None = None) -> BoundState:
        if special is None:
            special = [k for k, p in enumerate(pods) if p.host_ports or p.anti_affinity_required]
        ports: list[list[HostPort]] = [[] for _ in nodes]
        for k in special:
            ports[node_of[k]].extend(pods[k].host_ports)
        anti_terms = [(t, node_of[k]) for k in special for t in pods[k].anti_affinity_required]
        state = cls(nodes, usage, pods, node_of, ports, anti_terms, facts)
        state.with_ports = [i for i, p in enumerate(ports) if p]
        state._special = special
        return state

    def changed(self, added: tuple[Pod, ...] = (), removed: frozenset[str] = frozenset()) -> BoundState:
        """This index with pods bound (`added`, each on its `node_name`) and bound pods gone (`removed`, by
        key): what preemption re-plans on. The node facts are shared, capacity moves pod by pod, and the
        answers about pods are built again, lazily, as they are asked."""
        index = {n.name: i for i, n in enumerate(self.nodes)}
        new = [(p, index[p.node_name]) for p in added if p.node_name in index]
        gone = [(p, i) for p, i in zip(self.pods, self.node_of) if p.key in removed] if removed else []
        pods, node_of = self.pods, self.node_of
        if gone:
            keep = [k for k, p in enumerate(pods) if p.key not in removed]
            pods, node_of = [pods[k] for k in keep], [node_of[k] for k in keep]
        pods = pods + [p for p, _ in new]
        node_of = node_of + [i for _, i in new]
        usage = self.usage.moved(gone, new) if gone or new else self.usage
        if usage is None:
            usage = NodeRequests.of(self.nodes, pods, node_of)
        return BoundState._of(self.nodes, pods, node_of, usage, self.facts)

    def ending(self, gone: np.ndarray, added: tuple[Pod, ...] = ()) -> BoundState:
        """This index without the pods at the positions `gone` marks (a boolean mask over `pods`) and with `added`
        bound (each on its `node_name`): the cluster at a later time, as engine.timed_plan asks for it at every
        step. Capacity is taken off in one vectorised step per resource, not pod by pod (most of 50,000 pods may
        have ended by a late step)."""
        keep = ~gone
        positions = np.flatnonzero(keep)
        pods = [self.pods[k] for k in positions.tolist()]
        where = self.node_array()[positions]
        node_of = where.tolist()
        columns = self.pod_columns().take(positions)  # (the view's, for its own later questions)
        usage = self.usage
        if gone.any():
            usage = NodeRequests(usage.names, usage.allocatable, usage.used - self.summed(gone),
                                 usage.requested - self.summed(gone, named=True))
        special = (np.cumsum(keep) - 1)[[k for k in self.special() if keep[k]]].tolist()
        index = self.positions() if added else {}
        new = [(p, index[p.node_name]) for p in added if p.node_name in index]
        if new:
            moved = usage.moved([], new)
            if moved is None:
                return BoundState.of(self.nodes, pods + [p for p, _ in new], self.facts)
            usage = moved
            special += [len(pods) + k for k, (p, _) in enumerate(new) if p.host_ports or p.anti_affinity_required]
            pods, node_of = pods + [p for p, _ in new], node_of + [i for _, i in new]
            where = np.concatenate([where, np.array([i for _, i in new], dtype=np.int64)])
            for p, _ in new:
                columns.append(p)
        view = BoundState.of_parts(self.nodes, pods, node_of, usage, self.facts, special, columns)
        view._node_array = where
        return view

    def node_array(self) -> np.ndarray:
        """`node_of` as an array (built once)."""
        if self._node_array is None:
            self._node_array = np.asarray(self.node_of, dtype=np.int64)
        return self._node_array

    def positions(self) -> dict[str, int]:
        """Node name -> its position (the nodes' own fact: one dict for every view of a snapshot)."""
        cache = self.facts.cache
        if ("positions",) not in cache:
            cache[("positions",)] = {n.name: i for i, n in enumerate(self.nodes)}
        return cache[("positions",)]

    def pod_columns(self) -> PodColumns:
        """The bound pods' requests, starts and runtime bounds as arrays by position: given by the scheduler loop's
        cache, which keeps them as pods come and go, else read once from the pods."""
        if self._pod_columns is None:
            self._pod_columns = PodColumns.of(self.pods, self.usage.names)
        return self._pod_columns

    def request_rows(self) -> tuple[np.ndarray, np.ndarray]:
        """Per bound pod (rows) and resource (`usage.names` columns): what it requests, and whether it names it."""
        columns = self.pod_columns()
        return columns.amounts[:columns.size], columns.named[:columns.size]

    def summed(self, pods: np.ndarray, named: bool = False) -> np.ndarray:
        """What the bound pods a mask over `pods` marks request, summed per node (rows) and resource (`usage.names`
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
        """Per bound pod: its start (status.startTime, seconds; nan: none yet, or no bound) and its runtime bound
        (inf: none), from which engine.timed_plan works out when each ends."""
        columns = self.pod_columns()
        return columns.starts[:columns.size], columns.runtimes[:columns.size]

    def special(self) -> list[int]:
        """Positions of the bound pods with host ports or required anti-affinity, in order."""
        if self._special is None:
            self._special = [k for k, p in enumerate(self.pods) if p.host_ports or p.anti_affinity_required]
        return self._special

    @property
    def cordoned(self) -> list[int]:
        return self.facts.cordoned

    @property
    def tainted(self) -> list[int]:
        return self.facts.tainted

    @property
    def soft_tainted(self) -> frozenset[int]:
        return self.facts.soft_tainted

    # -- nodes, in bulk ---------------------------------------------------------------------------

    @property
    def pods_on(self) -> list[list[Pod]]:
        """Per node, its bound pods; built when first read."""
        if self._pods_on is None:
            self._pods_on = [[] for _ in self.nodes]
            for pod, i in zip(self.pods, self.node_of):
                self._pods_on[i].append(pod)
        return self._pods_on

    def empty(self) -> np.ndarray:
        """Nodes no bound pod is on."""
        return np.bincount(self.node_array(), minlength=len(self.nodes)) == 0

    @property
    def used(self) -> list[dict[str, int]]:
        """Per node, what its bound pods request (resources they name), as dicts; built when first read."""
        if self._used is None:
            self._used = [self.usage.on(i) for i in range(len(self.nodes))]
        return self._used

    def free(self, i: int, resource: str) -> int:
        k = self.usage.names.get(resource)
        return 0 if k is None else int(self.usage.allocatable[i, k] - self.usage.used[i, k])

    def free_matrix(self) -> tuple[dict[str, int], np.ndarray]:
        """Free capacity of every node (rows) per resource (columns: name -> column), built once."""
        if self._free_matrix is None:
            self._free_matrix = (self.usage.names, self.usage.allocatable - self.usage.used)
        return self._free_matrix

    def free_of(self, resources: tuple[str, ...]) -> np.ndarray:
        """Free capacity per node for `resources`, in that order (0 for a resource no node has)."""
        column, free = self.free_matrix()
        return self._columns(free, column, resources)

    def allocatable_of(self, resources: tuple[str, ...]) -> np.ndarray:
        """Allocatable capacity per node for `resources`, in that order (0 for a resource no node has)."""
        return self._columns(self.usage.allocatable, self.usage.names, resources)

    def _columns(self, matrix: np.ndarray, column: dict[str, int], resources: tuple[str, ...]) -> np.ndarray:
        out = np.zeros((len(self.nodes), len(resources)), dtype=np.int64)
        for k, r in enumerate(resources):
            if r in column:
                out[:, k] = matrix[:, column[r]]
        return out

    def label(self, key: str) -> LabelColumn:
        """Node label `key` as value codes per node (cached per key)."""
        columns = self.facts.columns
        if key not in columns:
            columns[key] = LabelColumn.of(self.nodes, key)
        return columns[key]

    def node_numbers(self, kind: str, key: str) -> np.ndarray:
        """Each node's label, annotation, allocatable amount or taint value `key` as a number (nan where it
        is absent or not a number), cached: price policies read the same column for every class."""
        cache, cache_key = self.facts.cache, ("numbers", kind, key)
        if cache_key not in cache:
            cache[cache_key] = np.array([_number(n.attribute(kind, key)) for n in self.nodes], dtype=np.float64)
        return cache[cache_key]

    def matching_mask(self, predicate: NodePredicate) -> np.ndarray:
        """Which nodes a node predicate accepts, as a boolean mask (cached: classes share rules). A pod
        spec's node affinity is evaluated on label columns; other predicates (policies) node by node."""
        matching = self.facts.matching
        if predicate not in matching:
            if isinstance(predicate, NodeTerms):
                mask = self._terms_mask(predicate)
            else:
                mask = np.fromiter((predicate.matches(n) for n in self.nodes), dtype=bool, count=len(self.nodes))
            matching[predicate] = mask
        return matching[predicate]

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
        cache, cache_key = self.facts.cache, ("field", key)
        if cache_key not in cache:
            cache[cache_key] = LabelColumn.from_values([n.fields.get(key) for n in self.nodes])
        return cache[cache_key]

    def matching_nodes(self, predicate: NodePredicate) -> frozenset[int]:
        """Indices of the nodes a node predicate accepts."""
        return frozenset(np.flatnonzero(self.matching_mask(predicate)).tolist())

    def memo(self, key: tuple, make: Callable[[], Any]) -> Any:
        """`make()`, once per index and key: what several kinds (or several steps of one) ask of these bound pods."""
        if key not in self._memo:
            self._memo[key] = make()
        return self._memo[key]

    def short_of(self, requests: dict[str, int]) -> dict[tuple[str, ...], np.ndarray]:
        """Nodes that cannot fit `requests`, grouped by the resources they are short of (in the order of
        `requests`): one vectorised comparison per class instead of a Python loop over every node."""
        cache_key = ("short", tuple(requests.items()))  # classes differ in far more than their requests
        if cache_key not in self._memo:
            self._memo[cache_key] = self._short_of(requests)
        return self._memo[cache_key]

    def _short_of(self, requests: dict[str, int]) -> dict[tuple[str, ...], np.ndarray]:
        column, free = self.free_matrix()
        wanted = list(requests.items())
        codes = np.zeros(len(self.nodes), dtype=np.int64)
        for k, (r, v) in enumerate(wanted):
            short = (free[:, column[r]] < v) if r in column else np.full(len(self.nodes), v > 0)
            codes |= short.astype(np.int64) << k
        out: dict[tuple[str, ...], np.ndarray] = {}
        if not codes.any():
            return out
        for code in np.unique(codes[codes > 0]).tolist():
            names = tuple(r for k, (r, _) in enumerate(wanted) if code >> k & 1)
            out[names] = np.flatnonzero(codes == code)
        return out

    def beyond_allocatable(self, requests: dict[str, int]) -> np.ndarray:
        """Nodes whose allocatable is below one of the requests (the `pods` slot aside): no eviction could
        make the pod fit there (upstream's InsufficientResource.Unresolvable). Cached per requests."""
        cache_key = ("beyond", tuple(requests.items()))
        if cache_key not in self._memo:  # per index: its usage's columns name the resources
            column, allocatable = self.usage.names, self.usage.allocatable
            mask = np.zeros(len(self.nodes), dtype=bool)
            for r, v in requests.items():
                if r != "pods":
                    mask |= (allocatable[:, column[r]] < v) if r in column else (v > 0)
            self._memo[cache_key] = mask
        return self._memo[cache_key]

    def taint_groups(self) -> dict[tuple[Taint, ...], list[int]]:
        """Tainted nodes grouped by their taints: a toleration check runs once per distinct taint set."""
        if self.facts.taint_groups is None:
            groups: dict[tuple[Taint, ...], list[int]] = defaultdict(list)
            for i in self.tainted:
                groups[self.nodes[i].taints].append(i)
            self.facts.taint_groups = dict(groups)
        return self.facts.taint_groups

    def nodes_with(self, key: str, values: Iterable[str | None]) -> np.ndarray:
        """Nodes whose label `key` has one of `values` (None among them: nodes without the label)."""
        return np.flatnonzero(self.label(key).mask(values))

    def nodes_outside(self, key: str, values: Iterable[str]) -> np.ndarray:
        """Nodes without label `key`, or with a value not among `values`."""
        return np.flatnonzero(~self.label(key).mask(values))

    # -- bound pods matching a term ------------------------------------------------------------------

    def domains_with(self, term: PodTerm) -> frozenset[str]:
        """Values of term.topology_key over nodes hosting a bound pod that matches the term."""
        return self.domains_matching((term,), term.topology_key)

    def anti_domains(self) -> list[tuple[PodAffinityTerm, frozenset[str]]]:
        """Bound pods' required anti-affinity terms, each once, with the domains of its key they hold:
        an incoming pod that matches a term is barred from those domains (checked once per distinct term,
        not once per bound pod)."""
        if self._anti_domains is None:
            held: dict[PodAffinityTerm, set[str]] = {}
            for term, i in self.anti_terms:
                value = self.nodes[i].labels.get(term.topology_key)
                values = held.setdefault(term, set())  # on a node without its key a term bars nothing
                if value is not None:
                    values.add(value)
            self._anti_domains = [(term, frozenset(values)) for term, values in held.items()]
        return self._anti_domains

    def _in_namespace(self, namespace: str | None) -> Positions:
        """Positions of the bound pods in one namespace (None: all), indexed the first time a term asks."""
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
        """Bound pods that may match `term`: a superset, narrowed per namespace by an inverted index on
        the selector's `In` requirements, so a term is matched against its few candidates and not
        against every bound pod (hundreds of thousands in a real cluster)."""
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
        """Bound pods of one namespace (None: all) per value of label `key`, built the first time a
        selector asks for that key there."""
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

    def matching(self, term: PodTerm) -> Placed:
        """Bound pods matching `term`, with their node index (cached)."""
        cache_key = ("pods", term)
        if cache_key not in self._memo:
            pods, node_of = self.pods, self.node_of
            self._memo[cache_key] = [(node_of[k], pods[k]) for k in self._candidates(term) if term.matches(pods[k])]
        return self._memo[cache_key]

    def node_counts(self, term: PodTerm) -> dict[int, int]:
        """Bound pods matching `term` per node index (cached)."""
        cache_key = ("nodes", term)
        if cache_key not in self._memo:
            counts: dict[int, int] = defaultdict(int)
            for i, _ in self.matching(term):
                counts[i] += 1
            self._memo[cache_key] = dict(counts)
        return self._memo[cache_key]

    def domain_counts(self, term: PodTerm) -> dict[str, int]:
        """Bound pods matching `term` per value of its topology key (cached)."""
        cache_key = ("counts", term)
        if cache_key not in self._memo:
            counts: dict[str, int] = defaultdict(int)
            for i, k in self.node_counts(term).items():
                value = self.nodes[i].labels.get(term.topology_key)
                if value is not None:
                    counts[value] += k
            self._memo[cache_key] = dict(counts)
        return self._memo[cache_key]

    def domains_matching(self, terms: tuple[PodTerm, ...], key: str) -> frozenset[str]:
        """Values of `key` over nodes hosting a bound pod that matches every one of `terms` (cached).

        Upstream counts a pod as support for required affinity only if it matches all the incoming
        pod's terms.
        """
        cache_key = (terms, key)
        if cache_key not in self._memo:
            out = set()
            placed = self.matching(terms[0]) if terms else list(zip(self.node_of, self.pods))
            for i, p in placed:
                value = self.nodes[i].labels.get(key)
                if value is not None and value not in out and all(t.matches(p) for t in terms[1:]):
                    out.add(value)
            self._memo[cache_key] = frozenset(out)
        return self._memo[cache_key]
