"""The independent checker's quota rules (scheduler-plugins' ElasticQuota, as CapacityScheduling admits pods):
after the plan, a namespace with an ElasticQuota uses at most its `max` of each resource it lists, and the
namespaces with ElasticQuotas use together at most the sum of their `min`s — wherever the plan added to them;
and (issue 19) what the plan newly borrows beyond the tenants' mins is at most the minimums no tenant asked for,
less what was borrowed already. `dominant_share` is the docs' weighted DRF share, for the fairness tests.

Does NOT import anything from ``engine``.
"""
from __future__ import annotations

import math
from collections import Counter
from fractions import Fraction

from .quantity import amount

QUOTA_KIND = "ElasticQuota"


def _quantities(spec: dict, field: str) -> dict[str, int]:
    return {r: amount(r, q) for r, q in ((spec.get(field) or {}).items())}


def quota_violations(docs: list[dict], requests: dict[str, dict[str, int]], bound: set[str],
                     placed: set[str], pending: set[str] | None = None) -> list[str]:
    """`requests`: pod key -> its requests; `bound`: pods running (not terminating or finished); `placed`: the
    plan's; `pending`: every pod the plan could have placed (for what each tenant asked)."""
    quotas = {(d.get("metadata") or {}).get("namespace") or "default": d.get("spec") or {}
              for d in docs if isinstance(d, dict) and d.get("kind") == QUOTA_KIND}
    if not quotas:
        return []
    use: dict[str, Counter[str]] = {ns: Counter() for ns in quotas}
    added: dict[str, Counter[str]] = {ns: Counter() for ns in quotas}
    for key in bound | placed:
        ns = key.split("/", 1)[0]
        if ns in use:
            use[ns].update(requests[key])
            if key in placed:
                added[ns].update(requests[key])
    out = []
    for ns, spec in sorted(quotas.items()):
        for r, most in _quantities(spec, "max").items():
            if added[ns][r] and use[ns][r] > most:
                out.append(f"ElasticQuota in {ns}: {r} used {use[ns][r]} > max {most}")
    total_min: Counter[str] = Counter()
    for spec in quotas.values():
        total_min.update(_quantities(spec, "min"))
    for r, most in sorted(total_min.items()):
        total = sum(u[r] for u in use.values())
        if sum(a[r] for a in added.values()) and total > most:
            out.append(f"ElasticQuotas: {r} used {total} > the mins' sum {most}")
    if pending is not None:
        out += _lent_beyond_idle(quotas, requests, use, added, pending)
    return out


def _lent_beyond_idle(quotas: dict[str, dict], requests: dict[str, dict[str, int]], use: dict[str, Counter[str]],
                      added: dict[str, Counter[str]], pending: set[str]) -> list[str]:
    """Per resource some min names: Σ new borrowing ≤ max(0, Σ unasked min − Σ borrowed before the plan)."""
    asked: dict[str, Counter[str]] = {ns: Counter() for ns in quotas}
    for key in pending:
        ns = key.split("/", 1)[0]
        if ns in asked:
            asked[ns].update(requests[key])
    out = []
    mins = {ns: _quantities(spec, "min") for ns, spec in quotas.items()}
    for r in sorted({r for m in mins.values() for r in m}):
        idle = borrowed = new = 0
        for ns in quotas:
            low, before = mins[ns].get(r, 0), use[ns][r] - added[ns][r]
            idle += max(0, low - min(low, before + asked[ns][r]))
            borrowed += max(0, before - low)
            new += max(0, use[ns][r] - max(low, before))
        if new > max(0, idle - borrowed):
            out.append(f"ElasticQuotas: {r} newly borrowed {new} > the idle mins {idle} less {borrowed} borrowed")
    return out


def dominant_share(use: dict[str, int], totals: dict[str, int], weight: Fraction = Fraction(1)) -> int:
    """⌈1000 · max_r use_r / total_r / weight⌉: a tenant's weighted dominant share in thousandths."""
    top = max((Fraction(use.get(r, 0), t) for r, t in totals.items() if t), default=Fraction(0))
    return math.ceil(1000 * top / weight)


def reclaim_violations(docs: list[dict], requests: dict[str, dict[str, int]], priority: dict[str, int],
                       bound: set[str], placed: set[str], preemptions: dict[str, list[str]]) -> list[str]:
    """Violations of who a plan's preemptors evict under ElasticQuotas (CapacityScheduling's rule, with ours that
    reclaim takes only borrowed room). `preemptions`: preemptor -> its victims; `bound`: running pods before the
    plan; `placed`: the plan's. A pod evicts a pod of its own quota (or, without one, a pod without one) only of a
    lower priority; another quota's pod only when its own quota stays within its min with it, the victim's quota
    used more than its min, and after the plan that quota still uses at least its min of every resource it used
    beyond it."""
    quotas = {(d.get("metadata") or {}).get("namespace") or "default": d.get("spec") or {}
              for d in docs if isinstance(d, dict) and d.get("kind") == QUOTA_KIND}
    if not quotas:
        return []
    mins = {ns: _quantities(spec, "min") for ns, spec in quotas.items()}
    pooled = sorted({r for m in mins.values() for r in m})
    evicted = {v for victims in preemptions.values() for v in victims}
    before = _held(quotas, requests, bound)
    after = _held(quotas, requests, (bound - evicted) | placed)
    out = []
    for preemptor, victims in sorted(preemptions.items()):
        mine = preemptor.split("/", 1)[0]
        for victim in victims:
            theirs = victim.split("/", 1)[0]
            if (mine in quotas) == (theirs in quotas) and (mine == theirs or mine not in quotas):
                if priority[victim] >= priority[preemptor]:
                    out.append(f"{preemptor} evicts {victim} of priority {priority[victim]} >= its own")
                continue
            if mine not in quotas or theirs not in quotas:
                out.append(f"{preemptor} evicts {victim} across the line between pods with and without a quota")
                continue
            if any(before[mine][r] + requests[preemptor].get(r, 0) > mins[mine].get(r, 0) for r in pooled):
                out.append(f"{preemptor} reclaims from {theirs} although {mine} goes beyond its min with it")
            if not any(before[theirs][r] > mins[theirs].get(r, 0) for r in pooled):
                out.append(f"{preemptor} reclaims {victim} although {theirs} used no more than its min")
    for ns in sorted({v.split("/", 1)[0] for v in evicted} & set(quotas)):
        for r in pooled:
            low = mins[ns].get(r, 0)
            if before[ns][r] > low and after[ns][r] < low:
                out.append(f"ElasticQuota in {ns}: evictions take {r} from {before[ns][r]} to {after[ns][r]} < min {low}")
    return out


def _held(quotas: dict[str, dict], requests: dict[str, dict[str, int]], pods: set[str]) -> dict[str, Counter[str]]:
    use: dict[str, Counter[str]] = {ns: Counter() for ns in quotas}
    for key in pods:
        ns = key.split("/", 1)[0]
        if ns in use:
            use[ns].update(requests[key])
    return use
