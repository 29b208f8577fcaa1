"""Lint checked policies against a cluster snapshot: rules that can never apply, and hard rules that
leave a pod in scope no node at all (the latter are errors: those pods could never be scheduled)."""

from __future__ import annotations

from dataclasses import dataclass

from ..compile import compile_cluster
from ..ir import Source
from ..model import Cluster
from . import ast as A
from .lower import policy_rules
from .parse import Diagnostic


@dataclass(frozen=True, slots=True)
class Finding:
    diagnostic: Diagnostic
    error: bool


def lint(policies: list[A.Policy], cluster: Cluster, sources: dict[str, str]) -> list[Finding]:
    out: list[Finding] = []

    def report(pos: A.Pos, message: str, error: bool = False) -> None:
        lines = sources.get(pos.file, "").splitlines()
        source = lines[pos.line - 1] if 0 < pos.line <= len(lines) else ""
        kind = "error" if error else "warning"
        out.append(Finding(Diagnostic(pos.file, pos.line, pos.column, f"{kind}: {message}", source), error))

    pods = cluster.pending + cluster.bound
    for policy in policies:
        scope = policy.scope
        if scope is not None and not any(scope.expr.matches(p) for p in pods):
            report(scope.pos, f"policy {policy.name!r} applies to no pod in the snapshot")
        for s in policy.statements:
            if isinstance(s, A.NodeRequirement):
                matching = sum(1 for n in cluster.nodes if s.expr.matches(n))
                if s.verb in ("require", "prefer", "avoid") and matching == 0:
                    report(s.pos, f"'{s.verb} {s.expr}' matches no node in the snapshot")
                if s.verb == "forbid" and matching == len(cluster.nodes):
                    report(s.pos, f"'forbid {s.expr}' matches every node in the snapshot")
            elif isinstance(s, A.GangBy) and s.label and scope is not None:
                sizes: dict[tuple[str, str], int] = {}
                for p in pods:
                    if s.label in p.labels and scope.expr.matches(p):
                        key = (p.namespace, p.labels[s.label])
                        sizes[key] = sizes.get(key, 0) + 1
                for (ns, value), size in sorted(sizes.items()):
                    if size < s.min_member:
                        report(s.pos, f"gang {ns}/{s.label}={value} has {size} pod(s) in the snapshot but needs "
                                      f"{s.min_member}: it cannot start")
            elif (isinstance(s, (A.Proximity, A.AtMost)) and isinstance(s.pods, A.PodsWhere)
                  and not any(s.pods.expr.matches(p) for p in pods)):
                    report(s.pods.pos, f"'pods where {s.pods.expr}' matches no pod in the snapshot")

    _lint_rejections(policies, cluster, report)
    return out


def _lint_rejections(policies: list[A.Policy], cluster: Cluster, report) -> None:
    """Hard policy rules that leave a pod class no candidate node: errors, at the first rule to blame (each
    rejection names the policy rule behind it, if any)."""
    compiled = compile_cluster(cluster, policy_rules(policies))
    for c, info in enumerate(compiled.classes):
        if compiled.problem.classes[c].candidates:
            continue
        blamed: dict[Source, int] = {}  # policy source -> nodes its rejection took first
        for rejection, members in info.rejected.groups.items():
            if rejection.source is not None:
                blamed[rejection.source] = blamed.get(rejection.source, 0) + len(members)
        if not blamed:
            continue  # the pod's own spec already rules out every node: not the policies' doing
        source = next(rule.source for rule in info.constraints if rule.source in blamed)
        names = ", ".join(p.key for p in info.pods[:3]) + (" …" if len(info.pods) > 3 else "")
        report(A.Pos(source.file, source.line, 1),
               f"hard rules leave {len(info.pods)} pod(s) in scope no candidate node ({names}): "
               f"{sum(blamed.values())}/{len(cluster.nodes)} node(s) rejected by policy rules", error=True)
