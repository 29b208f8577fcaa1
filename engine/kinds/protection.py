"""Protection from preemption (ours, from policies): `protect from preemption` keeps running pods from ever
being victims; `at most N evictions [per namespace] per cycle` caps how many of the pods it covers one cycle
may evict. Read by batch preemption (engine.preempt) through the `guard` phase."""

from __future__ import annotations

from ..ir import EvictionCap, PreemptionRules, Protected, Source
from ..model import Pod
from .base import EvictionGuard, Guard


def protected_reason(pods: list[str], source: str) -> str:
    """Why preemption found no node when protected pods are in the way (the first of them named)."""
    more = f" and {len(pods) - 1} more" if len(pods) > 1 else ""
    return f"preemption may not evict protected pods ({pods[0]}{more}: {source})"


def cap_reason(source: Source) -> str:
    return f"preemption would go over an eviction cap ({source})"


def cap_key(cap: EvictionCap, pod: Pod) -> tuple[Source, str]:
    """Which count an eviction of `pod` adds to: the cap's, per namespace if it says so."""
    return cap.source, pod.namespace if cap.per_namespace else ""


class Protection(EvictionGuard):
    name = "Protection"

    def guard(self, pod: Pod, rules: PreemptionRules | None) -> Guard:
        found = rules(pod) if rules else ()
        shield = next((r for r in found if isinstance(r, Protected)), None)
        caps = tuple(r for r in found if isinstance(r, EvictionCap))
        return Guard(shield.source if shield else None, caps)


KIND = Protection()
