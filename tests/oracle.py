"""Brute-force optimum for tiny scheduling instances (independent of ``engine``).

The objective is the *placed vector*: number of placed pending pods per distinct
priority level (levels taken from all pending pods), highest priority first, so
that Python tuple comparison is the lexicographic-by-priority order.
"""
from __future__ import annotations

from testkit.checker import Cluster

MAX_PODS = 8


def _levels(c: Cluster) -> list[int]:
    return sorted({c.pods[k].priority for k in c.pending}, reverse=True)


def _vector(c: Cluster, assignments: dict) -> tuple[int, ...]:
    pending = set(c.pending)
    prios = [c.pods[k].priority for k in assignments if k in pending]
    return tuple(prios.count(lv) for lv in _levels(c))


def placed_vector(docs: list[dict], assignments: dict[str, str],
                  scheduler_name: str = "policy-scheduler") -> tuple[int, ...]:
    """Placed pending pods per priority level (highest first) for ``assignments``."""
    return _vector(Cluster(docs, scheduler_name), assignments or {})


def best_plan(docs: list[dict], scheduler_name: str = "policy-scheduler"
              ) -> tuple[tuple[int, ...], dict[str, str]]:
    """Exhaustive search; returns (best placed vector, one plan achieving it).

    Pods are tried one at a time (highest priority first) with exact-necessary
    pruning (node-local filters, cumulative resource fit, lexicographic bound);
    every complete candidate is judged by the checker, which is the final word.
    """
    c = Cluster(docs, scheduler_name)
    pods = sorted(c.pending, key=lambda k: (-c.pods[k].priority, k))
    if len(pods) > MAX_PODS:
        raise ValueError(f"oracle is for tiny instances ({len(pods)} pending pods)")
    levels = _levels(c)
    lvl = [levels.index(c.pods[k].priority) for k in pods]
    options = [[n for n in sorted(c.nodes) if not c.pods[k].node_reasons(c.nodes[n])] + [None]
               for k in pods]
    used = {n: {} for n in c.nodes}
    for k, n in c.bound.items():
        if n in used:
            for r, v in c.pods[k].requests.items():
                used[n][r] = used[n].get(r, 0) + v
    assert not c.violations({}), "the empty plan must always be valid"
    best = [tuple(0 for _ in levels), {}]
    counts = [0] * len(levels)
    assign: dict[str, str] = {}

    def upper(i: int) -> tuple:
        ub = list(counts)
        for j in range(i, len(pods)):
            ub[lvl[j]] += 1
        return tuple(ub)

    def fits(k: str, n: str) -> bool:
        node = c.nodes[n]
        return all(used[n].get(r, 0) + v <= node.cap(r) for r, v in c.pods[k].requests.items())

    def dfs(i: int) -> None:
        if upper(i) <= best[0]:
            return
        if i == len(pods):
            if not c.violations(assign):
                best[0], best[1] = tuple(counts), dict(assign)
            return
        k = pods[i]
        for n in options[i]:
            if n is None:
                dfs(i + 1)
                continue
            if not fits(k, n):
                continue
            req = c.pods[k].requests
            for r, v in req.items():
                used[n][r] = used[n].get(r, 0) + v
            assign[k], counts[lvl[i]] = n, counts[lvl[i]] + 1
            dfs(i + 1)
            del assign[k]
            counts[lvl[i]] -= 1
            for r, v in req.items():
                used[n][r] -= v

    dfs(0)
    return best[0], best[1]


def best_placed(docs: list[dict], scheduler_name: str = "policy-scheduler") -> tuple[int, ...]:
    """Best achievable placed vector (lexicographic by priority) for a tiny instance."""
    return best_plan(docs, scheduler_name)[0]
