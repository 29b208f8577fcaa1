"""Why a pod was not placed, in kube-scheduler's words and better.

Static reasons come from the filters (per-node, counted like upstream's "0/N nodes are available"); pods
that fit somewhere alone but lost in the batch are told who took the room, or why their gang failed.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from ..kinds import BY_CHECK, BY_NAME, CLASS_REASONS, Spot
from ..model.cluster import Quota
from ..model.reasons import Code
from ..model.rejections import Rejection, joined
from ..quotas import tenants as T
from ..solve.greedy import GreedyState
from ..solve.greedy import replay as greedy_replay
from ..solve.problem import Blocker, Check, Solution, Status
from .compile import Compiled


@dataclass(frozen=True, slots=True)
class Blocked:
    """What stopped one more pod of a class on some nodes of the plan: the check that failed (None: nothing
    did, yet the pod was left out), the rule behind it in words (its `why`), the kind's sentence and its reason code
    (None: the class's reasons say it, as for a gang that cannot start)."""

    check: Check | None
    rule: str
    text: str
    code: Code | None = None


@dataclass(slots=True)
class Explanation:
    """Why the pods of one class were left out, as facts: the nodes each static filter rejected, the nodes
    each check of the plan blocked, class-level reasons (a gang that did not start), and who took the room
    (priority -> pods of the batch on the nodes that were full). `lines()` words it, upstream's way."""

    nodes: int
    priority: int
    rejected: dict[Rejection, int] = field(default_factory=dict)
    blocked: Counter[Blocked] = field(default_factory=Counter)
    reasons: list[str] = field(default_factory=list)
    taken: dict[int, int] = field(default_factory=dict)
    said_by: frozenset[str] = frozenset()  # the kinds that gave `reasons`
    codes: list[Code] = field(default_factory=list)  # each of `reasons`' code (engine.model.reasons)
    short: list[int] = field(default_factory=list)  # candidate nodes the plan left without room for one more pod
    fragmented: bool = False  # those nodes and the ones too full before the plan have the room in total, none alone

    def plugins(self) -> frozenset[str] | None:
        """The kinds that kept the pod out (the scheduler loop's queue wakes it on what may help them); None when
        something else did (the time limit: nothing needs to change, it may simply try again)."""
        if any(b.check is None for b in self.blocked) or any(r.plugin not in BY_NAME for r in self.rejected):
            return None
        return frozenset({r.plugin for r in self.rejected} | {BY_CHECK[b.check].name for b in self.blocked
                                                               if b.check is not None} | self.said_by)

    def before_any_node(self) -> bool:
        """Refused before any node was looked at (upstream's PreFilter: a claim or volume not there, a DeviceClass
        missing, a gang short of members) or for an error about an object it needs: what it waits for is an object,
        not room, so no running pod's end can bring its start nearer."""
        return bool(self.rejected) and all(r.pre_filter or r.error for r in self.rejected)

    def count(self, check: Check | None = None, plugin: str | None = None) -> int:
        """Nodes blocked by a check of the plan, or rejected by a filter plugin."""
        if plugin is not None:
            return sum(n for r, n in self.rejected.items() if r.plugin == plugin)
        return sum(n for b, n in self.blocked.items() if b.check is check)

    def rules(self, check: Check) -> list[str]:
        """The rules (in words, with where they came from) that blocked nodes by `check`."""
        return [b.rule for b in self.blocked if b.check is check]

    def lines(self) -> list[str]:
        """Upstream style: '0/N nodes are available: 3 Insufficient cpu, 2 node(s) had untolerated taint
        {a: b}.', then the class-level reasons and who took the room. An error (a claim's selector that fails) is
        said alone, as upstream's message for a Filter's Error status is the error itself."""
        errors = [reason for rejection in self.rejected if rejection.error for reason in rejection.reasons]
        if errors:
            return errors
        said = [reason for r in self.rejected if r.pre_filter for reason in r.reasons]
        if said:  # upstream's FitError: no node counts after a PreFilter rejection
            return [f"0/{self.nodes} nodes are available: {joined(said).rstrip('.')}."]
        counts: Counter[str] = Counter()
        for rejection, n in self.rejected.items():
            for reason in rejection.reasons:
                counts[reason] += n
        for blocked, n in self.blocked.items():
            counts[blocked.text] += n
        parts = ", ".join(f"{n} {reason}" for reason, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
        head = f"0/{self.nodes} nodes are available: {parts}." if parts else \
            f"0/{self.nodes} nodes are available{': the cluster has no Nodes' if not self.nodes else ''}."
        out = [head, *self.reasons]
        if self.taken:
            out.append(f"the room on those nodes went to {_who(self.taken, self.priority)} of this batch")
        return out


# the nodes of a class whose explanation came after its time (`late_explanation`)
NOT_CHECKED = Blocked(None, "", "node(s) passed the filters; the cycle's time ran out before the plan was checked "
                                "against them", Code.NOT_REACHED)


def late_explanation(compiled: Compiled, c: int) -> Explanation:
    """A class explained after the time for explanations ran out: the static filters' part, and the nodes that
    passed them said as not checked (no kind kept the pods out: the loop's queue backs them off and they try again,
    nothing has to change). Explaining every class of a huge batch whose start was cut short took 44 s once."""
    out = static_explanation(compiled, c)
    if candidates := len(compiled.problem.classes[c].candidates):
        out.blocked[NOT_CHECKED] = candidates
    return out


def static_explanation(compiled: Compiled, c: int) -> Explanation:
    """The static filters' part: how many nodes each rejection took."""
    info = compiled.classes[c]
    groups = info.rejected.groups
    return Explanation(len(compiled.cluster.nodes), info.priority, {r: len(m) for r, m in groups.items()})


def class_reasons(compiled: Compiled, solution: Solution, c: int,
                  state: GreedyState) -> tuple[list[str], bool, frozenset[str], list[Code]]:
    """What the kinds say of the whole class (a gang that did not start), whether the rest of the batch may be to
    blame for the nodes that had room, which kinds said it and each reason's code (`state`: the plan replayed)."""
    reasons: list[str] = []
    codes: list[Code] = []
    crowded = True
    said_by: set[str] = set()
    for kind in CLASS_REASONS:
        said = kind.class_reason(compiled, solution, c, state)
        if said is not None:
            reasons.append(said[0])
            codes.append(kind.class_code(compiled, c, said[1]))
            crowded = crowded and said[1]
            said_by.add(kind.name)
    return reasons, crowded, frozenset(said_by), codes


def replay(compiled: Compiled, solution: Solution) -> GreedyState:
    """The plan as a placement state, to ask of each node what stops one more pod."""
    return greedy_replay(compiled.problem, solution.placed)


@dataclass(slots=True)
class Alike:
    """One plan's explanations so far: the node-by-node part by class shape (`explain_unplaced`), and the pods the
    plan placed of each class."""

    placed: dict[int, int]
    parts: dict[tuple, tuple[Counter[Blocked], list[int]]] = field(default_factory=dict)
    taken: dict[tuple, dict[int, int]] = field(default_factory=dict)  # by shape: who took the room on its full nodes


def explain_unplaced(compiled: Compiled, solution: Solution, c: int, state: GreedyState | None = None,
                     alike: Alike | None = None) -> Explanation:
    """Upstream's per-node summary, with the batch's part said exactly: for each candidate node, the first
    check that stops one more pod of the class in the final plan (room, ports, which anti-affinity,
    affinity, spread or limit rule), and who took the room when room is what lacks. `alike` (one per plan)
    keeps the node-by-node part of classes no row names and no pod of which was placed, for the next class of
    the same shape: 625 equal gangs left out on 5,000 nodes were 3 M node checks."""
    out = static_explanation(compiled, c)
    candidates = compiled.problem.classes[c].candidates
    if not candidates:
        out.fragmented = _fragmented(compiled, _free_before(compiled), c, [])
        return out
    state = state or replay(compiled, solution)
    out.reasons, crowded, out.said_by, out.codes = class_reasons(compiled, solution, c, state)  # crowded: others took
    proven = solution.status is Status.OPTIMAL
    key = _shape(compiled, alike, state, c, crowded) if alike is not None else None
    if key is not None and alike is not None and key in alike.parts:
        blocked, full = alike.parts[key]
        out.blocked = Counter(blocked)
    else:
        full = _node_by_node(compiled, state, c, out, crowded, proven)
        if key is not None and alike is not None:
            alike.parts[key] = (Counter(out.blocked), full)
    out.short = full
    out.fragmented = out.fragmented or any(b.code is Code.FRAGMENTATION for b in out.blocked)  # (a shape's, cached)
    if not (full and crowded):
        return out
    held = _held_by_mins(compiled, solution, c, full) if compiled.classes[c].borrowing else None
    if held is not None:
        out.reasons.append(held[0])
        out.codes.append(Code.QUOTA)
    if key is not None and alike is not None:  # a shape is never borrowing: nothing `held`
        if key not in alike.taken:
            alike.taken[key] = _taken_by(compiled, solution, full, frozenset())
        out.taken = dict(alike.taken[key])
    else:
        out.taken = _taken_by(compiled, solution, full, held[1] if held else frozenset())
    return out


def _shape(compiled: Compiled, alike: Alike, state: GreedyState, c: int, crowded: bool) -> tuple | None:
    """What the node-by-node part of a class reads, when that is all of it: none of its pods placed, no row
    naming it, not borrowing (None otherwise)."""
    cls = compiled.problem.classes[c]
    if compiled.classes[c].borrowing or alike.placed.get(c, 0):
        return None
    if any(rows.get(c) for rows in (state.sep_of, state.limit_of, state.budget_of, state.excl_of, state.coloc_of,
                                    state.spread_of)):
        return None
    return cls.demand, cls.candidates, cls.max_per_node, cls.per_node_check, cls.gang is not None, crowded


def _node_by_node(compiled: Compiled, state: GreedyState, c: int, out: Explanation, crowded: bool,
                  proven: bool) -> list[int]:
    """Count into `out.blocked` what stops one more pod of class c on each candidate node; the nodes that lack
    room."""
    candidates = compiled.problem.classes[c].candidates
    full: list[int] = []
    demand = compiled.problem.classes[c].demand
    short: dict[tuple[bool, ...], Blocked] = {}  # a lack of room is said the same for the same resources short
    blockers = [(n, state.blocker(c, n)) for n in candidates]
    fragmented = out.fragmented = _fragmented(compiled, _free_after(state), c, [n for n, b in blockers if b is not None
                                                                             and b.check is Check.RESOURCES])
    for n, blocker in blockers:
        if blocker is not None and blocker.check is Check.RESOURCES:
            full.append(n)
            lacking = tuple(f < d for f, d in zip(state.free[n], demand))
            said = short.get(lacking) or short.setdefault(lacking, _blocked(compiled, state, c, n, blocker, crowded,
                                                                              proven, fragmented))
            out.blocked[said] += 1
            continue
        out.blocked[_blocked(compiled, state, c, n, blocker, crowded, proven)] += 1
    return full


def _free_before(compiled: Compiled) -> np.ndarray:
    """Each node's free room before the plan (nodes × resources), made once per batch."""
    key = ("free before the plan",)
    if key not in compiled.memo:
        problem = compiled.problem
        compiled.memo[key] = np.array(problem.free).reshape(len(problem.free), len(problem.resources))
    return compiled.memo[key]  # type: ignore[return-value]


def _free_after(state: GreedyState) -> np.ndarray:
    """Each node's free room in the replayed plan, as the state keeps it in step (`GreedyState.room`)."""
    if state.room is None:
        state.room = np.array(state.free).reshape(len(state.free), len(state.p.resources))
    return state.room


def _fragmented(compiled: Compiled, free: np.ndarray, c: int, full: list[int]) -> bool:
    """Whether the nodes without room for one more pod of class c — those the plan filled (`full`) and those too full
    before it (NodeResourcesFit's rejections) — have its requests `free` in total (per node, after the plan): room
    split across nodes, none with it all (Fragmentation rather than Capacity)."""
    fit = BY_CHECK[Check.RESOURCES].name
    rejected = compiled.classes[c].rejected
    too_full = [k for k, r in enumerate(rejected.keys) if r.plugin == fit]
    nodes = np.concatenate([np.asarray(full, dtype=np.int64),
                            np.flatnonzero(np.isin(rejected.code, too_full)) if too_full else np.zeros(0, np.int64)])
    demand = np.asarray(compiled.problem.classes[c].demand)
    asked = demand > 0
    if not nodes.size or not asked.any():
        return False
    total = np.maximum(free[nodes], 0).sum(axis=0)
    return bool((total[asked] >= demand[asked]).all())


def _blocked(compiled: Compiled, state: GreedyState, c: int, n: int, blocker: Blocker | None,
             crowded: bool, proven: bool, fragmented: bool = False) -> Blocked:
    """What stops one more pod of class c on node n in the plan, in upstream's "N node(s) …" style: the
    words of the kind whose check failed, and its code. Nothing did: its gang cannot start, or (`proven` optimal) the
    rest of the batch needs the room the whole gang would, or else the solver ran out of time."""
    if blocker is None:
        if not crowded:
            return Blocked(None, "", "node(s) passed the filters but the gang cannot start")
        if proven and compiled.problem.classes[c].gang is not None:
            return Blocked(None, "", "node(s) passed the filters and had room for a member, but not the whole gang",
                           Code.CAPACITY)
        return Blocked(None, "", "node(s) passed the filters and had room, but the solver did not place it within "
                                 "the time limit", Code.NOT_REACHED)
    resources = compiled.problem.resources
    taken = state.taken(blocker.rule, c) if blocker.check is Check.BUDGET else 0
    spot = Spot(c, dict(zip(resources, compiled.problem.classes[c].demand)), dict(zip(resources, state.free[n])), taken)
    kind = BY_CHECK[blocker.check]
    code = Code.FRAGMENTATION if fragmented and blocker.check is Check.RESOURCES else kind.code
    return Blocked(blocker.check, getattr(blocker.rule, "why", ""), kind.explain(blocker, spot), code)


def _who(taken: dict[int, int], priority: int) -> str:
    higher = sum(k for p, k in taken.items() if p > priority)
    equal = sum(k for p, k in taken.items() if p == priority)
    lower = sum(k for p, k in taken.items() if p < priority)
    who = []
    if higher:
        who.append(f"{higher} higher-priority pod(s)")
    if equal:
        who.append(f"{equal} pod(s) of equal priority")
    if lower:
        who.append(f"{lower} lower-priority pod(s) (placing this pod there would leave more pods out)")
    return ", ".join(who)


def _taken_by(compiled: Compiled, solution: Solution, nodes: list[int], said: frozenset[int]) -> dict[int, int]:
    """Priority -> pods of the batch placed on these nodes (but those of the classes `said` already)."""
    chosen = set(nodes)
    out: Counter = Counter()
    for (other, n), k in solution.placed.items():
        if n in chosen and other not in said:
            out[compiled.classes[other].priority] += k
    return dict(out)


def _held_by_mins(compiled: Compiled, solution: Solution, c: int, nodes: list[int]) -> tuple[str, frozenset[int]] | None:
    """For a class whose pods would borrow beyond their tenant's min: which tenants' mins hold the room on `nodes`
    (the pods of the batch there that a min serves come before any borrowing pod), and that its tenant would
    borrow, each quota with used / min / max after the plan; and the classes of those pods. None: no such pod."""
    usage = compiled.usage
    if usage is None:
        return None
    chosen, by_tenant, classes = set(nodes), Counter[str](), set()
    after = {name: Counter(held) for name, held in usage.held.items()}
    for (a, n), k in solution.placed.items():
        info = compiled.classes[a]
        if (tenant := usage.membership.tenant(info.sample)) is None:
            continue
        after[tenant.name].update({r: v * k for r, v in info.requests.items()})
        if n in chosen and not info.borrowing:
            by_tenant[tenant.name] += k
            classes.add(a)
    own = usage.membership.tenant(compiled.classes[c].sample)
    if not by_tenant or own is None:
        return None
    pooled = [r for r in T.pooled(usage.quotas) if compiled.classes[c].requests.get(r)]
    quotas = sorted((q for q in usage.tenants() if q.name in by_tenant), key=lambda q: (q is own, q.name))

    def how_far(q: Quota) -> str:
        return ", ".join(T.amounts(q, r, after[q.name][r]) for r in pooled) + " with the plan"
    held = "; ".join(f"{by_tenant[q.name]} by its own tenant's min" if q is own else
                     f"{by_tenant[q.name]} by the min of {q.source} ({how_far(q)})" for q in quotas)
    return (f"the room on those nodes is held by pods the tenants' mins serve, which come before any pod that "
            f"borrows: {held}; this pod would borrow beyond the min of its tenant {own.source} ({how_far(own)})",
            frozenset(classes))


def node_table(compiled: Compiled, c: int, here: str | None = None) -> list[tuple[str, str, str]]:
    """(node, verdict, reasons) for every node: which filter rejected the pod, or that it fits.

    `here` is the node the plan gave the pod; None means the pod was left out, so nodes that pass every
    filter only fit it alone.
    """
    rows = []
    info = compiled.classes[c]
    for i, node in enumerate(compiled.cluster.nodes):
        why = info.rejected.get(i)
        if why is None:
            if here is None:
                rows.append((node.name, "fits alone", "passes every filter; the batch's plan used it otherwise"))
            else:
                rows.append((node.name, "placed here" if node.name == here else "fits", ""))
        else:
            rows.append((node.name, why.plugin, joined(why.reasons)))
    return rows


def score_breakdown(compiled: Compiled, c: int, node: str) -> list[tuple[str, int]]:
    """Why this node: each soft term's points for one pod of class c on `node` (terms worth 0 left out),
    then the best any candidate node scores, for comparison."""
    cls = compiled.problem.classes[c]
    names = [compiled.cluster.nodes[i].name for i in cls.candidates]
    if node not in names:
        return []
    k = names.index(node)
    parts = compiled.classes[c].score_parts  # as compile scored the candidates, in their order
    if not parts:
        return []  # nothing scores: every candidate was as good as any other
    out = [(part.label, int(part.points[k])) for part in parts if part.points[k]]
    best = max(cls.scores, default=0)  # the sum of the parts on each candidate, as the solver weighs it
    return out + [("best score of any candidate node", best)]

