"""Why a pod was not placed, in kube-scheduler's words and better.

Static reasons come from the filters (per-node, counted like upstream's "0/N nodes are available"); pods
that fit somewhere alone but lost in the batch are told who took the room, or why their gang failed.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from .compile import Compiled
from .filters import PORTS, shortages
from .scores import score_parts
from .solve.greedy import Blocker, GreedyState, greedy
from .solve.problem import NO_DOMAIN, Solution


def filter_summary(compiled: Compiled, c: int, extra: Counter | None = None) -> str:
    """Upstream style: '0/N nodes are available: 3 Insufficient cpu, 2 node(s) had untolerated taint {a: b}.'"""
    counts: Counter = Counter(extra or {})
    counts.update(compiled.classes[c].rejected.reason_counts())
    parts = ", ".join(f"{n} {reason}" for reason, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    return f"0/{len(compiled.cluster.nodes)} nodes are available: {parts}."


def gang_fit_alone(compiled: Compiled, g: int) -> int:
    """How many pending members of gang g could be placed if the rest of the batch did not exist
    (within one domain, the best one, for a gang that must stay in one)."""
    problem = compiled.problem
    gang = problem.gangs[g]
    members = set(gang.classes)
    classes = [replace(cls, count=cls.count if i in members else 0, gang=None) for i, cls in enumerate(problem.classes)]
    alone = replace(problem, classes=classes, gangs=[])
    if gang.partition is None:
        return sum(greedy(alone).values())
    part = problem.partitions[gang.partition]
    domains = {part[n] for c in members for n in problem.classes[c].candidates} - {NO_DOMAIN}
    if gang.domains is not None:
        domains &= gang.domains
    best = 0
    for d in domains:
        state = GreedyState(alone)
        best = max(best, sum(state.fill(c, alone.classes[c].count, (gang.partition, d)) for c in members))
    return best


def _gang_reason(compiled: Compiled, solution: Solution, g: int) -> tuple[str, bool] | None:
    """Why gang g did not start, and whether the rest of the batch is to blame (None if it started)."""
    gi = compiled.gangs[g]
    need = gi.min_member - gi.bound
    placed = sum(solution.class_counts().get(m, 0) for m in gi.classes)
    if placed >= need:
        return None
    bound = f", {gi.bound} already bound" if gi.bound else ""
    head = f"gang {gi.key} could not be completed: needs {need}"
    if gi.short_of:
        return (f"gang {gi.key} could not be started: its PodGroup's minResources exceed the cluster's free room "
                f"({', '.join(gi.short_of)})"), False
    if gi.pending < need:
        return f"{head} more member(s) (minMember {gi.min_member}{bound}) but only {gi.pending} are pending", False
    fit = gang_fit_alone(compiled, g)
    where = f" in one {gi.within} domain" if gi.within else ""
    if fit < need:
        return f"{head}{where} (minMember {gi.min_member}{bound}); only {fit} fit{where}, even alone", False
    return f"{head}{where} (minMember {gi.min_member}{bound}); {need} fit alone, but the rest of the batch took the room", True


def replay(compiled: Compiled, solution: Solution) -> GreedyState:
    """The plan as a placement state, to ask of each node what stops one more pod."""
    state = GreedyState(compiled.problem)
    for (c, n), k in sorted(solution.placed.items()):
        for _ in range(k):
            state.place(c, n)
    return state


def explain_unplaced(compiled: Compiled, solution: Solution, c: int, state: GreedyState | None = None) -> list[str]:
    """Upstream's per-node summary, with the batch's part said exactly: for each candidate node, the first
    check that stops one more pod of the class in the final plan (room, ports, which anti-affinity,
    affinity, spread or limit rule), and who took the room when room is what lacks."""
    info = compiled.classes[c]
    cls = compiled.problem.classes[c]
    if not cls.candidates:
        return [filter_summary(compiled, c)]
    reasons: list[str] = []
    crowded = True  # did other pods of the batch take what this one needed?
    if cls.gang is not None:
        gang = _gang_reason(compiled, solution, cls.gang)
        if gang is not None:
            reasons.append(gang[0])
            crowded = gang[1]
    state = state or replay(compiled, solution)
    verdicts: Counter = Counter()
    full: list[int] = []
    for n in cls.candidates:
        blocker = state.permanent_blocker(c, n) or state.current_blocker(c, n)
        if blocker is not None and blocker.kind == "resources":
            full.append(n)
        verdicts[_verdict(compiled, state, c, n, blocker, crowded)] += 1
    taken = _taken_by(compiled, solution, full) if full and crowded else {}
    if taken:
        reasons.append(f"the room on those nodes went to {_who(taken, info.priority)} of this batch")
    return [filter_summary(compiled, c, verdicts)] + reasons


def _verdict(compiled: Compiled, state: GreedyState, c: int, n: int, blocker: Blocker | None, crowded: bool) -> str:
    """What stops one more pod of class c on node n in the plan, in upstream's "N node(s) …" style."""
    if blocker is None:
        if not crowded:
            return "node(s) passed the filters but the gang cannot start"
        return "node(s) passed the filters and had room, but the solver did not place it within the time limit"
    kind, rule = blocker.kind, blocker.rule
    if kind == "resources":
        demand = dict(zip(compiled.problem.resources, compiled.problem.classes[c].demand))
        free = dict(zip(compiled.problem.resources, state.free[n]))
        return "node(s) had no room left in this batch's plan (" + ", ".join(shortages(demand, free.__getitem__)) + ")"
    if kind == "ports" or (kind == "one per node" and compiled.classes[c].sample.host_ports):
        return PORTS + " in this batch's plan"
    if kind == "one per node":
        return "node(s) already run a pod of this batch that its own required anti-affinity excludes (one per node)"
    why = getattr(rule, "why", "")
    if kind == "separation":
        if rule.a == c:
            return f"node(s) are in a domain holding pods of this batch that its {why} excludes"
        return f"node(s) are in a domain holding pods of this batch whose {why} excludes it"
    if kind == "limit":
        return f"node(s) are in a domain already at the limit in this batch's plan: {why}"
    if kind == "affinity":
        return f"node(s) had no pod in their domain that its {why} needs"
    return f"node(s) would break its {why} in this batch's plan"


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


def _taken_by(compiled: Compiled, solution: Solution, nodes: list[int]) -> dict[int, int]:
    """Priority -> pods of the batch placed on these nodes."""
    chosen = set(nodes)
    out: Counter = Counter()
    for (other, n), k in solution.placed.items():
        if n in chosen:
            out[compiled.classes[other].priority] += k
    return dict(out)


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
            plugin, reasons = why
            rows.append((node.name, plugin, "; ".join(reasons)))
    return rows


def score_breakdown(compiled: Compiled, c: int, node: str) -> list[tuple[str, int]]:
    """Why this node: each soft term's points for one pod of class c on `node` (terms worth 0 left out),
    then the best any candidate node scores, for comparison."""
    cls = compiled.problem.classes[c]
    names = [compiled.cluster.nodes[i].name for i in cls.candidates]
    if node not in names:
        return []
    k = names.index(node)
    parts = score_parts(compiled.classes[c], cls.candidates, compiled.cluster.nodes, compiled.bound)
    if not parts:
        return []  # nothing scores: every candidate was as good as any other
    out = [(label, values[k]) for label, values in parts if values[k]]
    best = max((sum(v) for v in zip(*(values for _, values in parts))), default=0)
    return out + [("best score of any candidate node", best)]

