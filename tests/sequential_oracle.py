"""A one-pod-at-a-time scheduler written from kube-scheduler's behaviour, independent of ``engine``.

Queue by priority, then creation time (then name); for each pod, Filter = its required pod affinity holds
where it would go as upstream judges an incoming pod (support there, or nothing matching anywhere yet), and
the checker finds no violation with the pod added to the plan so far; Score = LeastAllocated (mean free share of cpu and memory after
placing); the best node wins (ties: first by name). Gangs go as Coscheduling does them: members are placed
one by one and rolled back unless minMember is reached. A pod (or gang) that fits nowhere is tried again,
in queue order, after pods it did not see have landed, until a pass places none: kube-scheduler moves an
unschedulable pod back to its queue when a pod is added (its affinity's support or a spread's counts may
have changed) and, at the latest, at its periodic flush. The engine must never place less than this.
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


def _used(c: Cluster, where: dict[str, str]) -> dict[str, dict[str, int]]:
    """Per node, what the pods on it request."""
    used: dict[str, dict[str, int]] = {n: {} for n in c.nodes}
    for k, n in where.items():
        for r, v in c.pods[k].requests.items():
            used.setdefault(n, {})[r] = used.setdefault(n, {}).get(r, 0) + v
    return used


def _least_allocated(c: Cluster, used: dict[str, int], key: str, node: str) -> float:
    after = dict(used)
    for r, v in c.pods[key].requests.items():
        after[r] = after.get(r, 0) + v
    shares = [(c.nodes[node].cap(r) - after.get(r, 0)) / c.nodes[node].cap(r)
              for r in ("cpu", "memory") if c.nodes[node].cap(r) > 0]
    return sum(shares) / len(shares) if shares else 0.0


def _fits(c: Cluster, plan: dict[str, str], key: str, node: str) -> bool:
    if c.pods[key].node_reasons(c.nodes[node]):
        return False  # what the full check below would say first, at a fraction of its cost
    present = {**{k: n for k, n in c.bound.items() if n in c.nodes}, **plan}
    if c.affinity_status(key, node, present) == "no":
        return False  # the checker would find an order that puts the pod earlier: a scheduler cannot
    trial = {**plan, key: node}
    return not [v for v in c.violations(trial) if not v.startswith("podgroup ")]


def _place_one(c: Cluster, plan: dict[str, str], key: str) -> bool:
    """The best-scoring node that fits (ties: first by name): nodes by score, the first that fits."""
    used = _used(c, {**c.bound, **plan})
    ranked = sorted(c.nodes, key=lambda n: (_least_allocated(c, used[n], key, n), [-ord(ch) for ch in n]),
                    reverse=True)
    for n in ranked:
        if _fits(c, plan, key, n):
            plan[key] = n
            return True
    return False


def _units(c: Cluster, queue: list[str]) -> list[list[str]]:
    """The queue as units: a pod, or a gang's members (at its first member's place)."""
    units: list[list[str]] = []
    done: set[str] = set()
    for key in queue:
        if key in done:
            continue
        pod = c.pods[key]
        group = (pod.ns, pod.group) if pod.group else None
        members = [key] if group is None or group not in c.groups else \
            [k for k in queue if (c.pods[k].ns, c.pods[k].group) == group]
        done.update(members)
        units.append(members)
    return units


def _place_unit(c: Cluster, plan: dict[str, str], members: list[str]) -> bool:
    pod = c.pods[members[0]]
    group = (pod.ns, pod.group)
    if not pod.group or group not in c.groups:
        return _place_one(c, plan, members[0])
    trial = dict(plan)
    placed = sum(1 for k in members if _place_one(c, trial, k))
    bound = sum(1 for k, p in c.pods.items() if (p.ns, p.group) == group and k in c.bound)
    if placed + bound < c.groups[group]:
        return False
    plan.update(trial)
    return True


def sequential_plan(docs: list[dict], scheduler_name: str = "policy-scheduler") -> dict[str, str]:
    """The plan a one-at-a-time scheduler makes (complete gangs only), unschedulable pods requeued."""
    c = Cluster(docs, scheduler_name)
    plan: dict[str, str] = {}
    waiting = [(unit, -1) for unit in _units(c, _queue(c, _created(docs)))]  # (unit, pods placed when it failed)
    while any(seen < len(plan) for _, seen in waiting):
        retry, waiting = waiting, []
        for unit, seen in retry:
            if seen == len(plan) or not _place_unit(c, plan, unit):
                waiting.append((unit, len(plan)))
    return plan
