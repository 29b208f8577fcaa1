"""Reason codes for the pods a plan left out (engine.model.reasons), from the facts their explanation keeps: each
static rejection's code and each check's, as the kind that made it gave it (`Kind.code`, `Rejection.code`,
`ClassReason.class_code`), with the objects each names. Nothing here reads the words.

The dominant cause comes first: what refused the pod before any node was looked at (an error, a PreFilter), then what
the kinds say of its whole class (a gang that did not start), then what stopped it on the nodes that passed every
filter (those came closest: the plan, not the pod's spec, kept it off them) by how many nodes each kept it off, then
the static filters, the later in upstream's filter order first: a node keeps its first filter's rejection, so one a
late filter rejected passed every earlier one. A pod whose nodeSelector picks 3 nodes of 100, all full, waits for
Capacity, not for the 97 nodes its own selector leaves out (Policy, said second).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from ..kinds import BY_CHECK, BY_NAME
from ..model.cluster import Gang, Pod
from ..model.reasons import Cause, Code, Diagnosis, Ref
from ..model.rejections import TIME_LIMIT, Rejection
from ..solve.problem import Check
from .compile import Compiled
from .explain import Explanation

NAMED_NODES = 5  # nodes a cause names at most (its node count says how many there were)


def rejection_code(rejection: Rejection) -> Code:
    """A static rejection's code: its own, an error's (InvalidObject), or its plugin's."""
    if rejection.code is not None:
        return rejection.code
    if rejection.error:
        return Code.INVALID_OBJECT
    kind = BY_NAME.get(rejection.plugin)
    return kind.code if kind is not None else Code.NOT_REACHED if rejection.plugin == TIME_LIMIT else Code.CAPACITY


def diagnose(compiled: Compiled, c: int, explanation: Explanation) -> Diagnosis:
    """The causes that kept class c's left-out pods off every node, the dominant first."""
    ex = explanation
    fit = BY_CHECK[Check.RESOURCES].name
    before = [r for r in ex.rejected if r.error] or [r for r in ex.rejected if r.pre_filter]
    static: Counter[tuple[Code, Rejection]] = Counter()
    for r, n in ex.rejected.items():
        if r not in before and not r.pre_filter:
            code = Code.FRAGMENTATION if ex.fragmented and r.plugin == fit and rejection_code(r) is Code.CAPACITY \
                else rejection_code(r)
            static[(code, r)] += n
    blocked: Counter[Code] = Counter()
    for b, n in ex.blocked.items():
        if b.code is not None:
            blocked[b.code] += n
    causes = [Cause(rejection_code(r), 0, objects(compiled, c, rejection_code(r), (r,))) for r in before]
    causes += [Cause(code, 0, objects(compiled, c, code, ())) for code in ex.codes]
    causes += [Cause(code, n, objects(compiled, c, code, (), ex.short)) for code, n in _most(blocked)]
    by_code: Counter[Code] = Counter()
    late: dict[Code, int] = {}  # per code, the latest position in the filter order of a rejection with it
    for (code, r), n in static.items():
        by_code[code] += n
        late[code] = max(late.get(code, -1), _position(r))
    order = sorted(by_code, key=lambda code: (-late[code], -by_code[code]))
    causes += [Cause(code, by_code[code], objects(compiled, c, code, [r for (k, r) in static if k is code]))
               for code in order]
    if not causes:  # nothing said: a cluster without nodes, or no check reached it
        return Diagnosis.one(Code.NOT_REACHED if ex.nodes else Code.CAPACITY)
    return Diagnosis.of(causes)


def _position(rejection: Rejection | None) -> int:
    """Where the rejection's filter runs in upstream's order (kinds.KINDS); a class never checked (the time limit)
    comes after every filter."""
    names = list(BY_NAME)
    return names.index(rejection.plugin) if rejection is not None and rejection.plugin in BY_NAME else len(names)


def _most(counts: Counter[Code]) -> list[tuple[Code, int]]:
    """Codes by nodes, most first; ties in the set's order."""
    order = list(Code)
    return sorted(counts.items(), key=lambda kv: (-kv[1], order.index(kv[0])))


def objects(compiled: Compiled, c: int, code: Code, rejections: Iterable[Rejection],
            short: Iterable[int] = ()) -> tuple[Ref, ...]:
    """What a cause of class c names: the nodes without room, the policy rules, the group, the quota, the claims or
    volumes, the reservations holding the room."""
    pod = compiled.classes[c].sample
    rejections = list(rejections)
    refs: list[Ref] = [Ref("Policy", str(r.source)) for r in rejections if r.source is not None and r.source.policy]
    if code in (Code.CAPACITY, Code.FRAGMENTATION):
        nodes = list(short)[:NAMED_NODES] + [n for r in rejections for n in _nodes_of(compiled, c, r)[:NAMED_NODES]]
        refs += [Ref("Node", compiled.cluster.nodes[n].name) for n in list(dict.fromkeys(nodes))[:NAMED_NODES]]
    elif code in (Code.GANG_INCOMPLETE, Code.TOPOLOGY) and pod.gang in compiled.cluster.gangs:
        refs.append(gang_ref(compiled.cluster.gangs[pod.gang]))
    elif code is Code.QUOTA and compiled.usage is not None:
        refs += [Ref.namespaced("Quota", q.name) for q in [compiled.usage.membership.tenant(pod)] if q is not None]
    elif code is Code.RESERVED:
        refs += _holders(compiled, c, rejections)
    elif code is Code.DEVICE or (code is Code.INVALID_OBJECT and pod.resource_claims):
        refs += [Ref("ResourceClaim", claim or name, pod.namespace) for name, claim in pod.resource_claims]
    if code is Code.VOLUME or (code is Code.INVALID_OBJECT and pod.claims and not pod.resource_claims):
        refs += [Ref("PersistentVolumeClaim", name, pod.namespace) for name in pod.claims]
    return tuple(dict.fromkeys(refs))


def _nodes_of(compiled: Compiled, c: int, rejection: Rejection) -> list[int]:
    found = compiled.classes[c].rejected.groups.get(rejection)
    return [] if found is None else found.tolist()


def _holders(compiled: Compiled, c: int, rejections: list[Rejection]) -> list[Ref]:
    """The reservations holding room on the nodes `rejections` (the Reservations filter's) kept class c off."""
    names = {compiled.cluster.nodes[n].name for r in rejections for n in _nodes_of(compiled, c, r)}
    gangs = compiled.cluster.gangs
    return [gang_ref(gangs[r.holder]) if r.holder in gangs else Ref.namespaced("Pod", r.holder)
            for r in compiled.moment.reservations if any(node in names for _, node in r.pods)]


def gang_ref(gang: Gang) -> Ref:
    """A gang as an object: its PodGroup, its workload (`gang by workload`), or a policy's gang by label (named by
    its key)."""
    if gang.source.startswith("PodGroup"):
        return Ref.namespaced("PodGroup", gang.key)
    if gang.workload:
        return Ref(gang.workload, gang.value, gang.namespace)
    return Ref("Gang", gang.key.rpartition("/")[2], gang.namespace)


def pod_ref(pod: Pod) -> Ref:
    return Ref("Pod", pod.name, pod.namespace)
