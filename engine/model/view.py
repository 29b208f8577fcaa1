"""One view of the cluster: the node and pod tables (engine.model.tables) with pods added and removed.

Every question planning asks of the bound pods goes through a view: compile's filters and rows, preemption's trials
(victims gone, preemptors already served), a later time (pods that ended gone, reservations' pods bound), the loop's
cycle (its assumed pods). A view of a table alone answers from the table. A view with changes answers from the table
and the changes: per node and per domain in what the changes cost, so preemption can ask every kind about one node
after each trial (upstream's Filter on a node copy after RemovePod/AddPod); questions about every pod by position
settle the view into a table of its own, once. `moved` derives a view with more changes (nothing is copied: a trial
that is discarded is simply dropped, as a Volcano Statement's); `settled` commits them into a table.

A view records, while `reads()` is open, whether what was asked reached beyond the nodes asked about (a domain's
counts, a claim's users anywhere): the one fact preemption needs to know whether a node's answer still stands after
a move elsewhere, read off what the kinds asked rather than declared by each.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from itertools import chain
from typing import Any

import numpy as np

from .cluster import HostPort, Node, Pod, PodAffinityTerm, Taint
from .ir import NodePredicate, PodTerm
from .tables import FEW, LabelColumn, NodeRequests, NodeTable, PodTable

Placed = list[tuple[int, Pod]]  # pods with their node's position
Delta = tuple[dict[int, tuple[Pod, ...]], dict[int, tuple[Pod, ...]]]  # per node: the pods gone, the pods added


class Counts(Mapping[Any, int]):
    """How many pods per domain (or per node, or per term and domain): a table's counts with a view's changes laid
    over, each key's change worked out when that key is asked (a trial asks about one node's domain: the changes
    elsewhere are never counted). `touched` gives the keys the changes may reach."""

    def __init__(self, base: Mapping[Any, int], delta: Callable[[Any], int] | None = None,
                 touched: Callable[[], Iterable[Any]] | None = None) -> None:
        self.base, self.delta, self._touched = base, delta, touched
        self._asked: dict[Any, int] = {}

    def _moved(self, key: Any) -> int:
        if self.delta is None:
            return 0
        if key not in self._asked:
            self._asked[key] = self.delta(key)
        return self._asked[key]

    def __getitem__(self, key: Any) -> int:
        if key not in self.base and key not in self.touched():
            raise KeyError(key)
        return self.base.get(key, 0) + self._moved(key)

    def get(self, key: Any, default: Any = 0) -> Any:
        value = self.base.get(key)
        moved = self._moved(key)
        if value is None:
            return moved if moved else default
        return value + moved

    def touched(self) -> frozenset:
        """The keys the view's changes may reach."""
        return frozenset(self._touched()) if self._touched is not None else frozenset()

    def __iter__(self) -> Iterator[Any]:
        yield from self.base
        yield from (k for k in self.touched() if k not in self.base)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def positive(self) -> frozenset:
        """The keys with at least one pod."""
        if self.delta is None:
            return frozenset(k for k, v in self.base.items() if v > 0)
        return frozenset(k for k in self if self.get(k) > 0)


class View:
    """The node and pod tables with pods removed (`gone`: positions in the table) and added (`added`: each with its
    node's position). See the module's doc."""

    def __init__(self, table: PodTable, gone: frozenset[int] = frozenset(),
                 added: tuple[tuple[Pod, int], ...] = (), on: Delta | None = None) -> None:
        self.table = table
        self.node_table: NodeTable = table.nodes
        self.nodes: list[Node] = table.nodes.nodes
        self.gone = gone
        self.added = added
        self._memo: dict[tuple, Any] = {}
        self._settled: PodTable | None = None
        self._on = on  # per node, the pods gone and added (worked out when first asked, else handed on by `moved`)
        self._terms: frozenset[PodAffinityTerm] | None = None  # the added pods' anti-affinity terms
        self._at: dict[str, int] | None = None  # each added pod's place in `added` (`_added_at`)
        self._wide: list[bool] | None = None  # open `reads()`: whether a question reached beyond the nodes asked

    @classmethod
    def of(cls, nodes: list[Node], bound: list[Pod], node_table: NodeTable | None = None) -> View:
        """The view of a snapshot: its nodes (or their table, when the caller keeps one) and its bound pods."""
        return cls(PodTable.of(node_table or NodeTable(nodes), bound))

    # -- changes -----------------------------------------------------------------------------------

    @property
    def changed(self) -> bool:
        return bool(self.gone or self.added)

    @property
    def _store(self) -> dict[tuple, Any]:
        """Where this view keeps its answers: the table's memo when it has no changes (every such view shares
        them), else its own."""
        return self._memo if self.changed else self.table.memo

    def base(self) -> View:
        """The table's own view, without this view's changes: what kinds work their state out of once, for every
        view of the table to lay its changes over."""
        return View(self.table) if self.changed else self

    def moved(self, added: Iterable[Pod] = (), removed: Iterable[Pod] = ()) -> View:
        """This view with `added` bound (each on its `node_name`; pods on nodes the table lacks are left out) and
        `removed` gone (by key: a pod of the table, or one this view added). What it costs is the changes', not the
        view's: the per-node account is carried over and only the nodes these touch are written again (a preemption
        stage derives a view for every trial)."""
        removed = list(removed)
        if removed:  # a pod both added and removed here is not added (removed is applied last)
            out = {p.key for p in removed}
            added = [p for p in added if p.key not in out]
        gone_on, added_on = self._delta_on()
        gone, keep = set(self.gone), self.added
        drop: set[str] = set()
        table, changed_gone, changed_added = self.table, dict(gone_on), dict(added_on)
        for pod in removed:
            k = table.slot(pod.key)
            if k is None:
                drop.add(pod.key)
            elif k not in gone:
                gone.add(k)
                i = table.node_of[k]
                changed_gone[i] = (*changed_gone.get(i, ()), table.pods[k])
        dropped: list[Pod] = []
        if drop:  # pods this view added, taken out again: found by their place, the rest copied in slices
            at = self._added_at()
            cut = sorted(at[k] for k in drop if k in at)
            dropped = [keep[j][0] for j in cut]
            keep = tuple(chain.from_iterable(keep[a + 1:b] for a, b in zip([-1, *cut], [*cut, len(keep)], strict=True)))
            for i in {self.added[j][1] for j in cut}:
                changed_added[i] = tuple(p for p in changed_added[i] if p.key not in drop)
        where = self.node_table.positions()
        more = tuple((p, where[p.node_name]) for p in added if p.node_name in where)
        for p, i in more:
            changed_added[i] = (*changed_added.get(i, ()), p)
        view = View(table, frozenset(gone), keep + more, (changed_gone, changed_added))
        view._wide = self._wide  # (a question asked of a view derived while `reads()` is open is recorded too)
        if not any(p.anti_affinity_required for p in dropped):  # else worked out again when asked
            new = {t for p, _ in more for t in p.anti_affinity_required}
            held = self.arriving_terms()
            view._terms = held if new <= held else held | new
        return view

    def _added_at(self) -> dict[str, int]:
        """Each added pod's place in `added`, by key (worked out once per view: a stage takes one pod out of the same
        view for each of its preemptors)."""
        if self._at is None:
            self._at = {p.key: j for j, (p, _) in enumerate(self.added)}
        return self._at

    def without(self, gone: np.ndarray, added: Iterable[Pod] = ()) -> View:
        """This table's view without the pods a mask over the table marks (a later time: those ended) and with
        `added` bound; settled at once when many go (a time step's plan reads every pod by position anyway)."""
        view = View(self.table, frozenset(np.flatnonzero(gone).tolist())).moved(added)
        return view.settled() if len(view.gone) > FEW else view

    def settled(self) -> View:
        """The changes committed: a view of a table of its own (the same answers; built once)."""
        if not self.changed:
            return self
        if self._settled is None:
            mask = np.zeros(len(self.table), dtype=bool)
            if self.gone:
                mask[list(self.gone)] = True
            self._settled = self.table.moved(mask, list(self.added))
        return View(self._settled)

    def _delta_on(self) -> Delta:
        """Per node: the pods gone from it, the pods added to it."""
        if self._on is None:
            gone: dict[int, tuple[Pod, ...]] = {}
            pods, node_of = self.table.pods, self.table.node_of
            for k in self.gone:
                i = node_of[k]
                gone[i] = (*gone.get(i, ()), pods[k])
            added: dict[int, tuple[Pod, ...]] = {}
            for p, i in self.added:
                added[i] = (*added.get(i, ()), p)
            self._on = (gone, added)
        return self._on

    def gone_from(self, i: int) -> tuple[Pod, ...]:
        return self._delta_on()[0].get(i, ())

    def added_to(self, i: int) -> tuple[Pod, ...]:
        return self._delta_on()[1].get(i, ())

    def leaving(self) -> Iterator[tuple[int, Pod]]:
        """The pods gone, each with its node's position."""
        pods, node_of = self.table.pods, self.table.node_of
        for k in self.gone:
            yield node_of[k], pods[k]

    def arriving_terms(self) -> frozenset[PodAffinityTerm]:
        """The distinct required anti-affinity terms of the pods added (kept as views are derived: a trial asks
        without a walk over every pod added)."""
        if self._terms is None:
            self._terms = frozenset(t for p, _ in self.added for t in p.anti_affinity_required)
        return self._terms

    def far_terms(self) -> frozenset[PodAffinityTerm]:
        """The pods added's anti-affinity terms over domains wider than one node: the only way a pod added on one
        node can bar another (what an answer about one node that no other node's pods reach depends on, beside that
        node's own pods)."""
        return frozenset(t for t in self.arriving_terms() if not self.node_table.one_node_domains(t.topology_key))

    def arriving(self) -> Iterator[tuple[int, Pod]]:
        for p, i in self.added:
            yield i, p

    def touched(self) -> set[int]:
        """The nodes some pod leaves or reaches."""
        gone, added = self._delta_on()
        return {i for i, pods in gone.items() if pods} | {i for i, pods in added.items() if pods}

    # -- what a question reads ----------------------------------------------------------------------

    @contextmanager
    def reads(self) -> Iterator[list[bool]]:
        """While open, `[True]` once some question reached beyond the nodes asked about (see the module's doc)."""
        outer, self._wide = self._wide, [False]
        try:
            yield self._wide
        finally:
            found, self._wide = self._wide, outer
            if outer is not None and found[0]:
                outer[0] = True

    def reaching(self, key: str | None = None) -> None:
        """A question about other nodes than the one asked: a domain of `key` wider than one node (None: anywhere)."""
        if self._wide is not None and (key is None or not self.node_table.one_node_domains(key)):
            self._wide[0] = True

    # -- the nodes (the node table's, whatever the changes) -----------------------------------------

    def label(self, key: str) -> LabelColumn:
        return self.node_table.label(key)

    def value(self, i: int, key: str) -> str | None:
        return self.node_table.value(i, key)

    def positions(self) -> dict[str, int]:
        return self.node_table.positions()

    def matching_mask(self, predicate: NodePredicate) -> np.ndarray:
        return self.node_table.matching_mask(predicate)

    def matching_nodes(self, predicate: NodePredicate) -> frozenset[int]:
        return self.node_table.matching_nodes(predicate)

    def nodes_with(self, key: str, values: Iterable[str | None]) -> np.ndarray:
        return self.node_table.nodes_with(key, values)

    def nodes_outside(self, key: str, values: Iterable[str]) -> np.ndarray:
        return self.node_table.nodes_outside(key, values)

    def taint_groups(self) -> dict[tuple[Taint, ...], list[int]]:
        return self.node_table.taint_groups()

    def node_numbers(self, kind: str, key: str) -> np.ndarray:
        return self.node_table.node_numbers(kind, key)

    def one_node_domains(self, key: str) -> bool:
        return self.node_table.one_node_domains(key)

    @property
    def cordoned(self) -> list[int]:
        return self.node_table.cordoned

    @property
    def tainted(self) -> list[int]:
        return self.node_table.tainted

    @property
    def soft_tainted(self) -> frozenset[int]:
        return self.node_table.soft_tainted

    def nodes_where(self, key: str, asked: np.ndarray | None, held: Callable[[str], bool],
                    among: Callable[[], Iterable[str]] | None = None) -> np.ndarray:
        """Of the nodes asked about (None: all), those in a domain of label `key` that `held` says yes to: each
        distinct value asked once over every node (only those `among` gives, when it can say which may be), or node
        by node when few are asked (a preemption trial)."""
        column = self.label(key)
        if asked is None:
            values = [v for v in (column.values if among is None else among()) if v in column.values and held(v)]
            return np.flatnonzero(column.mask(values)) if values else np.zeros(0, dtype=np.int64)
        return np.array([i for i in asked.tolist() if (v := self.value(i, key)) is not None and held(v)], dtype=np.int64)

    # -- room -----------------------------------------------------------------------------------------

    @property
    def usage(self) -> NodeRequests:
        """What the pods request per node and resource (a changed view settles first)."""
        return self.settled().table.usage if self.changed else self.table.usage

    def free_matrix(self) -> tuple[dict[str, int], np.ndarray]:
        """Free capacity of every node (rows) per resource (columns: name -> column)."""
        key = ("free",)
        if key not in self._store:
            usage = self.usage
            self._store[key] = (usage.names, usage.allocatable - usage.used)
        return self._store[key]

    def free_of(self, resources: tuple[str, ...]) -> np.ndarray:
        """Free capacity per node for `resources`, in that order (0 for a resource no node has)."""
        column, free = self.free_matrix()
        return _columns(free, column, resources, len(self.nodes))

    def allocatable_of(self, resources: tuple[str, ...]) -> np.ndarray:
        usage = self.table.usage
        return _columns(usage.allocatable, usage.names, resources, len(self.nodes))

    def used_on(self, i: int) -> dict[str, int]:
        """What the pods on node i request (resources they name)."""
        used = self.table.usage.on(i)
        for p in self.gone_from(i):
            for r, v in p.requests.items():
                used[r] = used.get(r, 0) - v
        for p in self.added_to(i):
            for r, v in p.requests.items():
                used[r] = used.get(r, 0) + v
        return used

    def free(self, i: int, resource: str) -> int:
        """Node i's free amount of a resource, the changes on it counted."""
        usage = self.table.usage
        k = usage.names.get(resource)
        base = 0 if k is None else int(usage.allocatable[i, k] - usage.used[i, k])
        if not self.changed:
            return base
        gone, added = self._delta_on()
        back = sum(p.requests.get(resource, 0) for p in gone.get(i, ()))
        return base + back - sum(p.requests.get(resource, 0) for p in added.get(i, ()))

    def short_of(self, requests: dict[str, int], nodes: np.ndarray | None = None) -> dict[tuple[str, ...], np.ndarray]:
        """The nodes (of `nodes`, else all) that cannot fit `requests`, grouped by the resources they are short of
        (in the order of `requests`)."""
        if nodes is not None and len(nodes) == 1:  # a trial's question: one node, in plain Python
            i = int(nodes[0])
            short = tuple(r for r, v in requests.items() if self.free(i, r) < v)
            return {short: nodes} if short else {}
        if nodes is not None:
            return _grouped(requests, nodes, lambda r: np.array([self.free(int(i), r) for i in nodes], dtype=np.int64))
        key = ("short", tuple(requests.items()))  # classes differ in far more than their requests
        if key not in self._store:
            column, free = self.free_matrix()
            every = np.arange(len(self.nodes))
            self._store[key] = _grouped(requests, every, lambda r: free[:, column[r]] if r in column else
                                       np.zeros(len(every), dtype=np.int64))
        return self._store[key]

    def beyond_allocatable(self, requests: dict[str, int]) -> np.ndarray:
        """Nodes whose allocatable is below one of the requests (the `pods` slot aside): no eviction could make the
        pod fit there (upstream's InsufficientResource.Unresolvable)."""
        key = ("beyond", tuple(requests.items()))
        memo = self.table.memo
        if key not in memo:
            column, allocatable = self.table.usage.names, self.table.usage.allocatable
            mask = np.zeros(len(self.nodes), dtype=bool)
            for r, v in requests.items():
                if r != "pods":
                    mask |= (allocatable[:, column[r]] < v) if r in column else (v > 0)
            memo[key] = mask
        return memo[key]

    # -- the pods ---------------------------------------------------------------------------------------

    @property
    def pods(self) -> list[Pod]:
        """Every pod, by position (a changed view settles first)."""
        return self.settled().table.pods if self.changed else self.table.pods

    def placed(self) -> Placed:
        """Every pod with its node's position."""
        table = self.settled().table if self.changed else self.table
        return list(zip(table.node_of, table.pods))

    def pods_on(self, i: int) -> list[Pod]:
        """Node i's pods, the changes on it made."""
        here = self.table.pods_on[i]
        if not self.changed:
            return here
        gone, added = self._delta_on()
        if gone.get(i):
            leaving = {id(p) for p in gone[i]}
            here = [p for p in here if id(p) not in leaving]
        return here + list(added[i]) if added.get(i) else here

    def every_pod(self) -> Iterator[Pod]:
        """Every pod, in no particular order (a question about the whole cluster)."""
        self.reaching()
        if not self.changed:
            yield from self.table.pods
            return
        gone = self.gone
        for k, p in enumerate(self.table.pods):
            if k not in gone:
                yield p
        for p, _ in self.added:
            yield p

    def empty(self) -> np.ndarray:
        """Nodes no pod is on."""
        table = self.settled().table if self.changed else self.table
        return np.bincount(table.node_array(), minlength=len(self.nodes)) == 0

    def ports_on(self, i: int) -> list[HostPort]:
        """The host ports node i's pods hold."""
        if not self.changed:
            return self.table.ports[i]
        return [q for p in self.pods_on(i) for q in p.host_ports]

    def with_ports(self) -> list[int]:
        """Nodes some pod with a host port is on."""
        key = ("with ports",)
        if key not in self._store:
            nodes = {i for i, held in enumerate(self.table.ports) if held}
            if self.changed:
                nodes |= {i for i in self.touched() if any(p.host_ports for p in self.added_to(i))}
                nodes = {i for i in nodes if self.ports_on(i)}
            self._store[key] = sorted(nodes)
        return self._store[key]

    def anti_terms(self) -> list[tuple[PodAffinityTerm, int]]:
        """Each pod's required anti-affinity terms with its node's position."""
        self.reaching()
        if not self.changed:
            return self.table.anti_terms()
        leaving = {id(p) for _, p in self.leaving()}
        table = self.table
        out = [(t, table.node_of[k]) for k in table.special if id(table.pods[k]) not in leaving
               for t in table.pods[k].anti_affinity_required]
        return out + [(t, i) for p, i in self.added for t in p.anti_affinity_required]

    def anti_holders(self) -> Counts:
        """How many pods hold each required anti-affinity term per domain of its key: (term, value) -> count (who
        asks about a domain says so: `reaching` with the term's key)."""
        base = self.memo_of_table(("anti holders",), lambda: _holders(self.node_table, self.table.anti_terms()))
        if not self.changed:
            return Counts(base)

        def delta(held: tuple[PodAffinityTerm, str]) -> int:
            term, value = held
            return self._net_in(term.topology_key, value, lambda p: p.anti_affinity_required.count(term))

        def touched() -> Iterator[tuple[PodAffinityTerm, str]]:
            for moves in (self.leaving(), self.arriving()):
                for i, p in moves:
                    for t in p.anti_affinity_required:
                        if (value := self.node_table.value(i, t.topology_key)) is not None:
                            yield t, value
        return Counts(base, delta, touched)

    def anti_domains(self) -> list[tuple[PodAffinityTerm, frozenset[str]]]:
        """The pods' required anti-affinity terms, each once, with the domains of its key they hold (none for a term
        held only on nodes without its key): an incoming pod that matches a term is barred from those domains."""
        make = lambda: _domains_held(self.node_table, self.anti_terms())  # noqa: E731
        return self.memo(("anti domains",), make) if self.changed else self.memo_of_table(("anti domains",), make)

    # -- pods matching a term --------------------------------------------------------------------------

    def matching(self, term: PodTerm) -> Placed:
        """The pods matching `term`, with their node's position."""
        self.reaching()
        key = ("pods", term)
        if key not in self._store:
            table = self.table
            found = [(table.node_of[k], table.pods[k]) for k in table.matching(term) if k not in self.gone]
            self._store[key] = found + [(i, p) for p, i in self.added if term.matches(p)]
        return self._store[key]

    def node_counts(self, term: PodTerm) -> Counts:
        """The pods matching `term` per node position."""
        self.reaching()
        base = self.memo_of_table(("nodes", term), lambda: _count(self.table.node_of[k] for k in self.table.matching(term)))
        if not self.changed:
            return Counts(base)

        def delta(i: int) -> int:
            return (sum(1 for p in self.added_to(i) if term.matches(p))
                    - sum(1 for p in self.gone_from(i) if term.matches(p)))
        return Counts(base, delta, self.touched)

    def domain_counts(self, term: PodTerm) -> Counts:
        """The pods matching `term` per value of its topology key."""
        self.reaching(term.topology_key)
        return self.counts_per(term.topology_key, (term,))

    def counts_per(self, key: str, terms: tuple[PodTerm, ...]) -> Counts:
        """The pods matching every one of `terms` per value of label `key` (upstream counts a pod as support for
        required affinity only if it matches all the incoming pod's terms)."""
        self.reaching(key)
        nodes, table = self.node_table, self.table

        def base() -> dict[str, int]:
            positions = table.matching(terms[0]) if terms else range(len(table))
            return _count(value for k in positions
                          if (value := nodes.value(table.node_of[k], key)) is not None
                          and all(t.matches(table.pods[k]) for t in terms[1:]))

        counted = self.memo_of_table(("per domain", key, terms), base)
        if not self.changed:
            return Counts(counted)

        def matches(p: Pod) -> int:
            return int(all(t.matches(p) for t in terms))

        def touched() -> Iterator[str]:
            return (v for i in self.touched() if (v := nodes.value(i, key)) is not None)
        return Counts(counted, lambda value: self._net_in(key, value, matches), touched)

    def domains_matching(self, terms: tuple[PodTerm, ...], key: str) -> frozenset[str]:
        """Values of `key` over nodes hosting a pod that matches every one of `terms`."""
        return self.counts_per(key, terms).positive()

    def domains_with(self, term: PodTerm) -> frozenset[str]:
        """Values of term.topology_key over nodes hosting a pod that matches the term."""
        return self.domains_matching((term,), term.topology_key)

    def _net_in(self, key: str, value: str, counts: Callable[[Pod], int]) -> int:
        """Across the domain of label `key` with `value`: what `counts` gives the pods added there less the pods gone
        (only the nodes the changes touch are looked at; a key every node carries with its own value, the hostname,
        has one node in the domain)."""
        if self.node_table.one_node_domains(key):
            nodes: Iterable[int] = (self.node_table.node_with(key, value),)
        else:
            nodes = self._touched_in(key).get(value, ())
        return sum(sum(map(counts, self.added_to(i))) - sum(map(counts, self.gone_from(i))) for i in nodes)

    def _touched_in(self, key: str) -> dict[str, list[int]]:
        """The nodes the changes touch, by their value of label `key` (once per view and key)."""
        memo = ("touched in", key)
        if memo not in self._memo:
            by_value: dict[str, list[int]] = defaultdict(list)
            for i in self.touched():
                if (value := self.node_table.value(i, key)) is not None:
                    by_value[value].append(i)
            self._memo[memo] = by_value
        return self._memo[memo]

    # -- time -------------------------------------------------------------------------------------------

    def lifetimes(self) -> tuple[np.ndarray, np.ndarray]:
        """Per pod by position (a changed view settles first): its start and runtime bound (engine.time.timed_plan)."""
        return (self.settled().table if self.changed else self.table).lifetimes()

    def node_array(self) -> np.ndarray:
        return (self.settled().table if self.changed else self.table).node_array()

    # -- what kinds work out once ----------------------------------------------------------------------

    def memo(self, key: tuple, make: Callable[[], Any]) -> Any:
        """`make()`, once per view and key: what several kinds (or several steps of one) ask of these pods."""
        if key not in self._store:
            self._store[key] = make()
        return self._store[key]

    def memo_of_table(self, key: tuple, make: Callable[[], Any]) -> Any:
        """`make()`, once per table and key: what a kind works out of the table's pods alone, for every view of it to
        lay its changes over."""
        memo = self.table.memo
        if key not in memo:
            memo[key] = make()
        return memo[key]


def _columns(matrix: np.ndarray, column: dict[str, int], resources: tuple[str, ...], size: int) -> np.ndarray:
    out = np.zeros((size, len(resources)), dtype=np.int64)
    for k, r in enumerate(resources):
        if r in column:
            out[:, k] = matrix[:, column[r]]
    return out


def _grouped(requests: dict[str, int], nodes: np.ndarray, free: Callable[[str], np.ndarray]
             ) -> dict[tuple[str, ...], np.ndarray]:
    """`nodes` short of some of `requests` (free per resource over `nodes` from `free`), grouped by what they lack."""
    wanted = list(requests.items())
    codes = np.zeros(len(nodes), dtype=np.int64)
    for k, (r, v) in enumerate(wanted):
        codes |= (free(r) < v).astype(np.int64) << k
    out: dict[tuple[str, ...], np.ndarray] = {}
    if not codes.any():
        return out
    for code in np.unique(codes[codes > 0]).tolist():
        names = tuple(r for k, (r, _) in enumerate(wanted) if code >> k & 1)
        out[names] = np.asarray(nodes)[codes == code]
    return out


def _count(values: Iterable[Any]) -> dict[Any, int]:
    out: dict[Any, int] = defaultdict(int)
    for v in values:
        out[v] += 1
    return dict(out)


def _domains_held(nodes: NodeTable, terms: list[tuple[PodAffinityTerm, int]]
                  ) -> list[tuple[PodAffinityTerm, frozenset[str]]]:
    held: dict[PodAffinityTerm, set[str]] = {}
    for term, i in terms:
        values = held.setdefault(term, set())
        if (value := nodes.value(i, term.topology_key)) is not None:
            values.add(value)
    return [(term, frozenset(values)) for term, values in held.items()]


def _holders(nodes: NodeTable, terms: list[tuple[PodAffinityTerm, int]]) -> dict[tuple[PodAffinityTerm, str], int]:
    out: dict[tuple[PodAffinityTerm, str], int] = defaultdict(int)
    for term, i in terms:
        if (value := nodes.value(i, term.topology_key)) is not None:
            out[(term, value)] += 1
    return dict(out)
