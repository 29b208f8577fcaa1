"""The independent checker's quota rules (scheduler-plugins' ElasticQuota, as CapacityScheduling admits pods):
after the plan, a namespace with an ElasticQuota uses at most its `max` of each resource it lists, and the
namespaces with ElasticQuotas use together at most the sum of their `min`s — wherever the plan added to them.

Does NOT import anything from ``engine``.
"""
from __future__ import annotations

from collections import Counter

from .quantity import amount

QUOTA_KIND = "ElasticQuota"


def _quantities(spec: dict, field: str) -> dict[str, int]:
    return {r: amount(r, q) for r, q in ((spec.get(field) or {}).items())}


def quota_violations(docs: list[dict], requests: dict[str, dict[str, int]], bound: set[str],
                     placed: set[str]) -> list[str]:
    """`requests`: pod key -> its requests; `bound`: pods running (not terminating or finished); `placed`: the
    plan's."""
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
    return out
