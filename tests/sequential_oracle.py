"""A one-pod-at-a-time scheduler written from kube-scheduler's behaviour, independent of ``engine``.

Queue by priority, then creation time (then name); for each pod, Filter = the checker finds no violation
with the pod added to the plan so far; Score = LeastAllocated (mean free share of cpu and memory after
placing); the best node wins (ties: first by name). Gangs go as Coscheduling does them: members are placed
one by one and rolled back unless minMember is reached. The engine must never place less than this.
"""

from __future__ import annotations

from testkit.checker import Cluster


def _created(docs: list[dict]) -> dict[str, str]:
    out = {}
    for d in docs:
        meta = d.get("metadata") or {}
        if d.get("kind") == "Pod":
            out[f"{meta.get('namespace') or 'default'}/{meta.get('name')}"] = str(meta.get("creationTimestamp") or "")
    return out


def _queue(c: Cluster, created: dict[str, str]) -> list[str]:
    return sorted(c.pending, key=lambda k: (-c.pods[k].priority, created.get(k, ""), k))


def _least_allocated(c: Cluster, where: dict[str, str], key: str, node: str) -> float:
    used: dict[str, int] = {}
    for k, n in where.items():
        if n == node:
            for r, v in c.pods[k].requests.items():
                used[r] = used.get(r, 0) + v
    for r, v in c.pods[key].requests.items():
        used[r] = used.get(r, 0) + v
    shares = [(c.nodes[node].cap(r) - used.get(r, 0)) / c.nodes[node].cap(r)
              for r in ("cpu", "memory") if c.nodes[node].cap(r) > 0]
    return sum(shares) / len(shares) if shares else 0.0


def _fits(c: Cluster, plan: dict[str, str], key: str, node: str) -> bool:
    trial = {**plan, key: node}
    return not [v for v in c.violations(trial) if not v.startswith("podgroup ")]


def _place_one(c: Cluster, plan: dict[str, str], key: str) -> bool:
    where = {**c.bound, **plan}
    fits = [n for n in sorted(c.nodes) if _fits(c, plan, key, n)]
    if not fits:
        return False
    plan[key] = max(fits, key=lambda n: (_least_allocated(c, where, key, n), [-ord(ch) for ch in n]))
    return True


def sequential_plan(docs: list[dict], scheduler_name: str = "policy-scheduler") -> dict[str, str]:
    """The plan a one-at-a-time scheduler makes (complete gangs only)."""
    c = Cluster(docs, scheduler_name)
    queue = _queue(c, _created(docs))
    plan: dict[str, str] = {}
    done: set[str] = set()
    for key in queue:
        if key in done:
            continue
        pod = c.pods[key]
        group = (pod.ns, pod.group) if pod.group else None
        if group is None or group not in c.groups:
            done.add(key)
            _place_one(c, plan, key)
            continue
        members = [k for k in queue if (c.pods[k].ns, c.pods[k].group) == group]
        done.update(members)
        trial = dict(plan)
        placed = sum(1 for k in members if _place_one(c, trial, k))
        bound = sum(1 for k, p in c.pods.items() if (p.ns, p.group) == group and k in c.bound)
        if placed + bound >= c.groups[group]:
            plan = trial
    return plan
