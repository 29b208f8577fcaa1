"""The cluster index: what the bound pods hold, computed once per snapshot and shared downstream.

Compile, the static filters, explanations and the plan all ask the same questions of the bound pods
(capacity used, ports taken, which topology domains host pods matching a term); the answers live here,
cached, so data flows down from one place instead of each stage recomputing it.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .ir import NodePredicate, PodTerm
from .model import HostPort, Node, Pod, PodAffinityTerm, Taint


@dataclass(slots=True)
class BoundState:
    """What the bound pods hold: capacity used, ports taken, and who sits in which topology domain."""

    nodes: list[Node]
    used: list[dict[str, int]]
    ports: list[list[HostPort]]
    pods_on: list[list[Pod]]
    anti_terms: list[tuple[PodAffinityTerm, int]] = field(default_factory=list)  # (term, node index)
    _domains: dict[tuple, Any] = field(default_factory=dict)
    _matching: dict[NodePredicate, frozenset[int]] = field(default_factory=dict)
    _free_matrix: tuple[dict[str, int], np.ndarray] | None = None
    _by_value: dict[str, dict[str | None, list[int]]] = field(default_factory=dict)
    _taint_groups: dict[tuple[Taint, ...], list[int]] | None = None
    _by_namespace: dict[str, list[tuple[int, Pod]]] | None = None
    _by_label: dict[str, dict[str, list[tuple[int, Pod]]]] = field(default_factory=dict)
    _all: list[tuple[int, Pod]] | None = None
    everything: frozenset[int] = frozenset()
    cordoned: list[int] = field(default_factory=list)
    tainted: list[int] = field(default_factory=list)
    with_ports: list[int] = field(default_factory=list)
    soft_tainted: frozenset[int] = frozenset()  # nodes with a PreferNoSchedule taint

    def matching_nodes(self, predicate: NodePredicate) -> frozenset[int]:
        """Indices of the nodes a node predicate accepts (cached: classes share rules)."""
        if predicate not in self._matching:
            self._matching[predicate] = frozenset(i for i, n in enumerate(self.nodes) if predicate.matches(n))
        return self._matching[predicate]

    def short_of(self, requests: dict[str, int]) -> dict[tuple[str, ...], list[int]]:
        """Nodes that cannot fit `requests`, grouped by the resources they are short of (in the order of
        `requests`): one vectorised comparison per class instead of a Python loop over every node."""
        if self._free_matrix is None:
            names = sorted({r for n in self.nodes for r in n.allocatable} | {r for u in self.used for r in u})
            column = {r: k for k, r in enumerate(names)}
            free = np.zeros((len(self.nodes), len(names)), dtype=np.int64)
            for i in range(len(self.nodes)):
                for r in set(self.nodes[i].allocatable) | set(self.used[i]):
                    free[i, column[r]] = self.free(i, r)
            self._free_matrix = (column, free)
        column, free = self._free_matrix
        wanted = list(requests.items())
        short = np.zeros((len(self.nodes), len(wanted)), dtype=bool)
        for k, (r, v) in enumerate(wanted):
            short[:, k] = (free[:, column[r]] < v) if r in column else (0 < v)
        codes = short @ (1 << np.arange(len(wanted), dtype=np.int64)) if wanted else np.zeros(len(self.nodes), np.int64)
        out: dict[tuple[str, ...], list[int]] = {}
        for code in np.unique(codes[codes > 0]):
            names = tuple(r for k, (r, _) in enumerate(wanted) if int(code) >> k & 1)
            out[names] = np.flatnonzero(codes == code).tolist()
        return out

    def taint_groups(self) -> dict[tuple[Taint, ...], list[int]]:
        """Tainted nodes grouped by their taints: a toleration check runs once per distinct taint set."""
        if self._taint_groups is None:
            groups: dict[tuple[Taint, ...], list[int]] = defaultdict(list)
            for i in self.tainted:
                groups[self.nodes[i].taints].append(i)
            self._taint_groups = dict(groups)
        return self._taint_groups

    def by_value(self, key: str) -> dict[str | None, list[int]]:
        """Node indices per value of label `key` (None: nodes without it), so that label checks of the
        static filters select whole groups of nodes at once."""
        if key not in self._by_value:
            groups: dict[str | None, list[int]] = defaultdict(list)
            for i, node in enumerate(self.nodes):
                groups[node.labels.get(key)].append(i)
            self._by_value[key] = dict(groups)
        return self._by_value[key]

    def nodes_with(self, key: str, values) -> list[int]:
        """Nodes whose label `key` has one of `values` (None among them: nodes without the label)."""
        groups = self.by_value(key)
        return [i for v in values if v in groups for i in groups[v]]

    def nodes_outside(self, key: str, values) -> list[int]:
        """Nodes without label `key`, or with a value not among `values`."""
        return [i for v, members in self.by_value(key).items() if v is None or v not in values for i in members]

    @classmethod
    def of(cls, nodes: list[Node], bound: list[Pod]) -> "BoundState":
        index = {n.name: i for i, n in enumerate(nodes)}
        state = cls(nodes, [defaultdict(int) for _ in nodes], [[] for _ in nodes], [[] for _ in nodes])
        for pod in bound:
            i = index.get(pod.node_name or "")
            if i is None:
                continue
            for r, v in pod.requests.items():
                state.used[i][r] += v
            state.ports[i].extend(pod.host_ports)
            state.pods_on[i].append(pod)
            state.anti_terms.extend((t, i) for t in pod.anti_affinity_required)
        state.everything = frozenset(range(len(nodes)))
        state.cordoned = [i for i, n in enumerate(nodes) if n.unschedulable]
        state.tainted = [i for i, n in enumerate(nodes) if n.taints]
        state.soft_tainted = frozenset(i for i in state.tainted if any(t.effect == "PreferNoSchedule" for t in nodes[i].taints))
        state.with_ports = [i for i, p in enumerate(state.ports) if p]
        return state

    def free(self, i: int, resource: str) -> int:
        return self.nodes[i].allocatable.get(resource, 0) - self.used[i].get(resource, 0)

    def domains_with(self, term: PodAffinityTerm) -> frozenset[str]:
        """Values of term.topology_key over nodes hosting a bound pod that matches the term."""
        return self.domains_matching((term,), term.topology_key)

    def _placed(self) -> list[tuple[int, Pod]]:
        if self._all is None:
            self._all = [(i, p) for i, pods in enumerate(self.pods_on) for p in pods]
        return self._all

    def _candidates(self, term: PodTerm) -> list[tuple[int, Pod]]:
        """Bound pods that may match `term`: a superset, narrowed by an inverted index on namespace and
        on the selector's `In` requirements, so a term is matched against its few candidates and not
        against every bound pod (tens of thousands in a real cluster)."""
        if self._by_namespace is None:
            self._by_namespace = defaultdict(list)
            for i, p in self._placed():
                self._by_namespace[p.namespace].append((i, p))
        options: list[list[list[tuple[int, Pod]]]] = []  # each option: the index lists it would join
        namespaces = getattr(term, "namespaces", None)
        if namespaces is not None:
            options.append([self._by_namespace.get(ns, []) for ns in sorted(namespaces)])
        selector = getattr(term, "selector", None)
        for r in getattr(selector, "requirements", ()):
            if r.operator == "In":
                by_value = self._label_index(r.key)
                options.append([by_value.get(v, []) for v in r.values])
        if not options:
            return self._placed()
        smallest = min(options, key=lambda lists: sum(map(len, lists)))
        return smallest[0] if len(smallest) == 1 else [x for part in smallest for x in part]

    def _label_index(self, key: str) -> dict[str, list[tuple[int, Pod]]]:
        """Bound pods per value of label `key`, built the first time a selector asks for that key."""
        if key not in self._by_label:
            index: dict[str, list[tuple[int, Pod]]] = defaultdict(list)
            for i, p in self._placed():
                value = p.labels.get(key)
                if value is not None:
                    index[value].append((i, p))
            self._by_label[key] = dict(index)
        return self._by_label[key]

    def matching(self, term: PodTerm) -> list[tuple[int, Pod]]:
        """Bound pods matching `term`, with their node index (cached)."""
        cache_key = ("pods", term)
        if cache_key not in self._domains:
            self._domains[cache_key] = [(i, p) for i, p in self._candidates(term) if term.matches(p)]
        return self._domains[cache_key]

    def node_counts(self, term: PodTerm) -> dict[int, int]:
        """Bound pods matching `term` per node index (cached)."""
        cache_key = ("nodes", term)
        if cache_key not in self._domains:
            counts: dict[int, int] = defaultdict(int)
            for i, _ in self.matching(term):
                counts[i] += 1
            self._domains[cache_key] = dict(counts)
        return self._domains[cache_key]

    def domain_counts(self, term: PodTerm) -> dict[str, int]:
        """Bound pods matching `term` per value of its topology key (cached)."""
        cache_key = ("counts", term)
        if cache_key not in self._domains:
            counts: dict[str, int] = defaultdict(int)
            for i, k in self.node_counts(term).items():
                value = self.nodes[i].labels.get(term.topology_key)
                if value is not None:
                    counts[value] += k
            self._domains[cache_key] = dict(counts)
        return self._domains[cache_key]

    def domains_matching(self, terms: tuple[PodAffinityTerm, ...], key: str) -> frozenset[str]:
        """Values of `key` over nodes hosting a bound pod that matches every one of `terms` (cached).

        Upstream counts a pod as support for required affinity only if it matches all the incoming
        pod's terms.
        """
        cache_key = (terms, key)
        if cache_key not in self._domains:
            out = set()
            for i, p in self.matching(terms[0]) if terms else self._placed():
                value = self.nodes[i].labels.get(key)
                if value is not None and value not in out and all(t.matches(p) for t in terms[1:]):
                    out.add(value)
            self._domains[cache_key] = frozenset(out)
        return self._domains[cache_key]
