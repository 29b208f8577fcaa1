"""Why a pod was not placed, in kube-scheduler's words and better.

Static reasons come from the filters (per-node, counted like upstream's "0/N nodes are available"); pods
that fit somewhere alone but lost in the batch are told who took the room, or why their gang failed.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from .compile import Compiled
from .ir import CountLimit, PodProximity, SpreadRule
from .solve.greedy import GreedyState, greedy
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
    if gi.pending < need:
        return f"{head} more member(s) (minMember {gi.min_member}{bound}) but only {gi.pending} are pending", False
    fit = gang_fit_alone(compiled, g)
    where = f" in one {gi.within} domain" if gi.within else ""
    if fit < need:
        return f"{head}{where} (minMember {gi.min_member}{bound}); only {fit} fit{where}, even alone", False
    return f"{head}{where} (minMember {gi.min_member}{bound}); {need} fit alone, but the rest of the batch took the room", True


def explain_unplaced(compiled: Compiled, solution: Solution, c: int) -> list[str]:
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
    taken = _taken_by(compiled, solution, c) if crowded else {}
    if taken:
        higher = sum(k for p, k in taken.items() if p > info.priority)
        equal = sum(k for p, k in taken.items() if p == info.priority)
        lower = sum(k for p, k in taken.items() if p < info.priority)
        who = []
        if higher:
            who.append(f"{higher} higher-priority pod(s)")
        if equal:
            who.append(f"{equal} pod(s) of equal priority")
        if lower:
            who.append(f"{lower} lower-priority pod(s) (placing this pod there would leave more pods out)")
        reasons.append(f"the room on those nodes went to {', '.join(who)} of this batch")
    dynamic = _batch_rules(info)
    if dynamic:
        reasons.append("batch constraints also limit where it fits: " + "; ".join(dynamic))
    if taken:
        verdict = "node(s) passed the filters but had no room left in this batch's plan"
    elif cls.gang is not None and not crowded:
        verdict = "node(s) passed the filters but the gang cannot start"
    else:
        verdict = "node(s) passed the filters but the batch's constraints rule them out"
    return [filter_summary(compiled, c, Counter({verdict: len(cls.candidates)}))] + reasons


def _taken_by(compiled: Compiled, solution: Solution, c: int) -> dict[int, int]:
    """Priority -> pods of other classes placed on this class's candidate nodes."""
    candidates = set(compiled.problem.classes[c].candidates)
    out: Counter = Counter()
    for (other, n), k in solution.placed.items():
        if n in candidates:
            out[compiled.classes[other].priority] += k
    return dict(out)


def _batch_rules(info) -> list[str]:
    out = []
    for rule in info.constraints:
        if isinstance(rule, PodProximity) and rule.weight is None:
            kind = "anti-affinity" if rule.anti else "affinity"
            out.append(f"required pod {kind} ({rule.term.selector}) per {rule.term.topology_key} [{rule.source}]")
        elif isinstance(rule, SpreadRule) and rule.spread.hard:
            out.append(f"topology spread maxSkew {rule.spread.max_skew} per {rule.spread.topology_key} [{rule.source}]")
        elif isinstance(rule, CountLimit):
            out.append(f"at most {rule.most} per {rule.term.topology_key} of pods {rule.term.selector} [{rule.source}]")
    if info.sample.host_ports:
        out.append("host ports " + ", ".join(f"{p.port}/{p.protocol}" for p in info.sample.host_ports))
    return out


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
