"""Why a pod was not placed, in kube-scheduler's words and better.

Static reasons come from the filters (per-node, counted like upstream's "0/N nodes are available"); pods
that fit somewhere alone but lost in the batch are told who took the room, or why their gang failed.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from .compile import Compiled
from .kinds import BY_CHECK, KINDS, Spot, score_parts
from .solve.greedy import Blocker, GreedyState
from .solve.problem import Check, Solution


def filter_summary(compiled: Compiled, c: int, extra: Counter | None = None) -> str:
    """Upstream style: '0/N nodes are available: 3 Insufficient cpu, 2 node(s) had untolerated taint {a: b}.'"""
    counts: Counter = Counter(extra or {})
    counts.update(compiled.classes[c].rejected.reason_counts())
    parts = ", ".join(f"{n} {reason}" for reason, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    return f"0/{len(compiled.cluster.nodes)} nodes are available: {parts}."


def class_reasons(compiled: Compiled, solution: Solution, c: int) -> tuple[list[str], bool]:
    """What the kinds say of the whole class (a gang that did not start), and whether the rest of the batch
    may be to blame for the nodes that had room."""
    reasons: list[str] = []
    crowded = True
    for kind in KINDS:
        said = kind.class_reason(compiled, solution, c)
        if said is not None:
            reasons.append(said[0])
            crowded = crowded and said[1]
    return reasons, crowded


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
    reasons, crowded = class_reasons(compiled, solution, c)  # crowded: did others of the batch take the room?
    state = state or replay(compiled, solution)
    verdicts: Counter = Counter()
    full: list[int] = []
    for n in cls.candidates:
        blocker = state.permanent_blocker(c, n) or state.current_blocker(c, n)
        if blocker is not None and blocker.check is Check.RESOURCES:
            full.append(n)
        verdicts[_verdict(compiled, state, c, n, blocker, crowded)] += 1
    taken = _taken_by(compiled, solution, full) if full and crowded else {}
    if taken:
        reasons.append(f"the room on those nodes went to {_who(taken, info.priority)} of this batch")
    return [filter_summary(compiled, c, verdicts)] + reasons


def _verdict(compiled: Compiled, state: GreedyState, c: int, n: int, blocker: Blocker | None, crowded: bool) -> str:
    """What stops one more pod of class c on node n in the plan, in upstream's "N node(s) …" style: the
    words of the kind whose check failed."""
    if blocker is None:
        if not crowded:
            return "node(s) passed the filters but the gang cannot start"
        return "node(s) passed the filters and had room, but the solver did not place it within the time limit"
    resources = compiled.problem.resources
    spot = Spot(c, dict(zip(resources, compiled.problem.classes[c].demand)), dict(zip(resources, state.free[n])))
    return BY_CHECK[blocker.check].explain(blocker, spot)


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
            rows.append((node.name, why.plugin, "; ".join(why.reasons)))
    return rows


def score_breakdown(compiled: Compiled, c: int, node: str) -> list[tuple[str, int]]:
    """Why this node: each soft term's points for one pod of class c on `node` (terms worth 0 left out),
    then the best any candidate node scores, for comparison."""
    cls = compiled.problem.classes[c]
    names = [compiled.cluster.nodes[i].name for i in cls.candidates]
    if node not in names:
        return []
    k = names.index(node)
    parts = score_parts(compiled.classes[c], np.asarray(cls.candidates, dtype=np.int64), compiled.bound)
    if not parts:
        return []  # nothing scores: every candidate was as good as any other
    out = [(part.label, int(part.points[k])) for part in parts if part.points[k]]
    best = int(sum(part.points for part in parts).max())
    return out + [("best score of any candidate node", best)]

