"""Lint checked policies against a cluster snapshot: rules that can never apply, and hard rules that
leave a pod in scope no node at all (the latter are errors: those pods could never be scheduled)."""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from dataclasses import dataclass

from ..devices.dra import extended_classes
from ..model.cluster import Cluster
from ..model.ir import Source
from ..planning.compile import compile_cluster
from . import ast as A
from .lower import policy_rules
from .parse import Diagnostic
from .plausible import positioned, resource_uses, warnings


@dataclass(frozen=True, slots=True)
class Finding:
    diagnostic: Diagnostic
    error: bool


def lint(policies: list[A.Policy], cluster: Cluster, sources: dict[str, str]) -> list[Finding]:
    out: list[Finding] = []

    def report(pos: A.Pos, message: str, error: bool = False) -> None:
        out.append(Finding(positioned(pos, f"{'error' if error else 'warning'}: {message}", sources), error))

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
            elif isinstance(s, A.LessFragmentation) and s.device_class not in cluster.devices.classes:
                close = difflib.get_close_matches(s.device_class, sorted(cluster.devices.classes), n=1, cutoff=0.75)
                report(s.pos, f"no DeviceClass {s.device_class!r} in the snapshot: 'prefer less fragmentation' scores "
                              "every node alike" + (f" (did you mean {close[0]!r}?)" if close else ""))
            elif (isinstance(s, (A.Proximity, A.AtMost)) and isinstance(s.pods, A.PodsWhere)
                  and not any(s.pods.expr.matches(p) for p in pods)):
                    report(s.pods.pos, f"'pods where {s.pods.expr}' matches no pod in the snapshot")

    for pos, message in unknown_resources(policies, cluster):
        report(pos, message)
    _lint_rejections(policies, cluster, report)
    return out


def unknown_resources(policies: list[A.Policy], cluster: Cluster) -> Iterator[tuple[A.Pos, str]]:
    """Resources a policy names that no node advertises and no pod asks for (a typo such as 'nvidia.com/gpus'):
    a quota on one never counts anything, a rule on one sees 0 on every node."""
    known = {r for n in cluster.nodes for r in n.allocatable} | set(extended_classes(cluster.devices))
    for p in cluster.pending + cluster.bound:
        known.update(p.requests)
        known.update(e.resource for e in p.extended)
    for policy in policies:
        for resource, pos in resource_uses(policy):
            if resource not in known:
                close = difflib.get_close_matches(resource, sorted(known), n=1, cutoff=0.75)
                yield pos, (f"no node in the snapshot advertises {resource!r} and no pod asks for it"
                            + (f" (did you mean {close[0]!r}?)" if close else ""))


def notes(policies: list[A.Policy], cluster: Cluster, sources: dict[str, str]) -> list[str]:
    """What a dry run says about its policies, a line each: the static warnings and the resources the snapshot
    does not know (not the rest of the lint: a rule matching nothing in one snapshot is common and harmless)."""
    found = warnings(policies, sources) + [positioned(pos, f"warning: {message}", sources)
                                           for pos, message in unknown_resources(policies, cluster)]
    return [d.headline() for d in sorted(found, key=lambda d: (d.file, d.line, d.column))]


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
