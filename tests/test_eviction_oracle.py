"""What an eviction frees, held against the cluster with the eviction made (issue 48, point 1).

Preemption asks each kind about a node once pods have left and arrived (`Kind.after` over `Moves`: upstream's Filter
after RemovePod/AddPod). The oracle is the same question asked of the cluster where those moves already happened:
the bound pods without the leaving ones and with the arriving ones bound. The two must agree node by node for every
kind eviction can sway, whatever the moves. Where a kind's static filter is its whole Filter (room, ports, limits,
reservations, volumes), that filter on the moved cluster is the oracle too; for spread and pod affinity the plain
per-node functions of tests/filter_oracle.py are.

The caching contracts preemption relies on are held the same way: a kind that says moves on other nodes cannot
change a node's verdict (`wide` False) must give the same verdict with those moves dropped, and a pod a kind says
it is not swayed by (`sways` False) must not change any verdict by leaving or arriving.
"""
from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import filter_oracle
from engine import kinds
from engine.compile import compile_cluster
from engine.index import BoundState
from engine.ir import Rules
from engine.kinds import Moves
from engine.kinds.context import Batch, ClassMatcher, ClassSpec
from engine.load import build_cluster
from engine.model import Cluster, Pod, Reservation
from engine.policy.lower import lower
from engine.policy.sources import check_sources
from engine.rejections import Rejections
from testkit.manifests import claim, csinode, mounts, node, pod, storage_class, volume

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
APPS = ("web", "db")
EBS = "ebs.csi.aws.com"
NOW = 1_800_000_000.0
# kinds whose static filter on the cluster with the moves made is their whole Filter: it must agree with `after`
WHOLE_FILTER = {"NodeResourcesFit", "NodePorts", "CountLimit", "Reservations", "VolumeRestrictions", "NodeVolumeLimits"}
LIMIT_POLICY = ('policy one-app {\n  applies to pods where label "app" == "web"\n'
                '  at most 1 per label "topology.kubernetes.io/zone" of pods with same label "app"\n}\n')


def _anti(app: str, key: str) -> dict:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}]}}


def _rules(draw, pending: bool) -> dict:
    """What a pod may carry that a kind eviction sways reads: anti-affinity, a host port, a claim; a pending pod
    also affinity and a hard zone spread."""
    extra: dict = {}
    if draw(st.integers(0, 2)) == 0:
        extra["affinity"] = _anti(draw(st.sampled_from(APPS)), draw(st.sampled_from([HOST, ZONE])))
    elif pending and draw(st.integers(0, 2)) == 0:
        extra["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": draw(st.sampled_from(APPS))}},
             "topologyKey": draw(st.sampled_from([HOST, ZONE]))}]}}
    if draw(st.integers(0, 3)) == 0:
        extra["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    if pending and draw(st.integers(0, 1)) == 0:
        extra["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                                               "labelSelector": {"matchLabels": {"app": draw(st.sampled_from(APPS))}}}]
    if draw(st.integers(0, 3)) == 0:
        extra["volumes"] = mounts(draw(st.sampled_from(["solo", "shared", "ebs-0", "ebs-1", "ebs-2"])))
    return extra


def _storage() -> list[dict]:
    """A ReadWriteOncePod claim (`solo`), a plain one (`shared`) and three CSI volumes of one driver."""
    docs = [storage_class("ebs", provisioner=EBS),
            volume("pv-solo", claim_ref=("default", "solo"), modes=("ReadWriteOncePod",)),
            claim("solo", modes=("ReadWriteOncePod",), volume="pv-solo"),
            volume("pv-shared", claim_ref=("default", "shared")), claim("shared", volume="pv-shared")]
    for k in range(3):
        docs += [volume(f"pv-ebs-{k}", storage_class="ebs", claim_ref=("default", f"ebs-{k}"), csi=(EBS, f"vol-{k}")),
                 claim(f"ebs-{k}", storage_class="ebs", volume=f"pv-ebs-{k}")]
    return docs


@st.composite
def scenes(draw) -> tuple[list[dict], bool, list[tuple[str, int]], list[tuple[int, int]]]:
    """Zoned nodes with running pods, one pending pod (the class asked about) and a few arriving ones; whether a
    policy limit applies; which running pods leave (name, 0) and where arriving ones come (arrival, node)."""
    docs: list[dict] = _storage()
    count = draw(st.integers(2, 5))
    running: list[str] = []
    for i in range(count):
        docs.append(node(f"n{i}", cpu=str(draw(st.integers(2, 4))), pods=draw(st.sampled_from([3, 10])),
                         labels={ZONE: f"z{i % 2}"}, **{"nvidia.com/gpu": "2"}))
        docs.append(csinode(f"n{i}", {EBS: draw(st.integers(1, 2))}))
        for j in range(draw(st.integers(0, 3))):
            running.append(f"r{i}-{j}")
            docs.append(_timed(pod(f"r{i}-{j}", cpu=str(draw(st.integers(1, 2))), node_name=f"n{i}", priority=0,
                                   labels={"app": draw(st.sampled_from(APPS))},
                                   requests={"nvidia.com/gpu": draw(st.sampled_from(["1", "1", "0"]))},
                                   **_rules(draw, False)),
                               draw(st.sampled_from([None, 600, 600, 7200]))))
    docs.append(pod("asked", cpu=str(draw(st.integers(1, 2))), priority=100, labels={"app": draw(st.sampled_from(APPS))},
                    requests={"nvidia.com/gpu": draw(st.sampled_from(["1", "1", "0"]))}, **_rules(draw, True)))
    arrivals = draw(st.integers(0, 3))
    for k in range(arrivals):
        docs.append(pod(f"come{k}", cpu="1", priority=100, labels={"app": draw(st.sampled_from(APPS))},
                        requests={"nvidia.com/gpu": str(draw(st.integers(0, 1)))}, **_rules(draw, False)))
    leaving = [name for name in running if draw(st.booleans())]
    coming = [(k, draw(st.integers(0, count - 1))) for k in range(arrivals)]
    return docs, draw(st.booleans()), [(name, 0) for name in leaving], coming


def _timed(doc: dict, deadline: int | None) -> dict:
    """A running pod started at NOW - 300 s, bounded by `activeDeadlineSeconds` when given."""
    doc["status"]["startTime"] = "2027-01-15T07:55:00Z"
    if deadline is not None:
        doc["spec"]["activeDeadlineSeconds"] = deadline
    return doc


class Scene:
    """One scene built: the cluster, the class asked about, the moves by node index, and the kinds' answers asked
    either way."""

    def __init__(self, docs: list[dict], limited: bool, leaving: list[tuple[str, int]], coming: list[tuple[int, int]],
                 reserved: bool) -> None:
        self.rules = lower(check_sources({"limit.policy": LIMIT_POLICY})) if limited else Rules()
        cluster = build_cluster([(f"doc{i}", d) for i, d in enumerate(docs)], gangs=self.rules.gangs)
        cluster = replace(cluster, now=NOW)
        if reserved:  # n0 held from NOW + 1,800 s for two GPUs: what runs past then leaves less there
            cluster = replace(cluster, reservations=(
                Reservation("default/held", (("default/held", "n0"),), NOW + 1800, (("n0", (("nvidia.com/gpu", 2),)),)),))
        asked = next(p for p in cluster.pending if p.name == "asked")
        self.cluster = replace(cluster, pending=[asked])
        self.index = BoundState.of(cluster.nodes, cluster.bound)
        self.position = self.index.positions()
        arriving = {p.name: p for p in cluster.pending if p.name.startswith("come")}
        gone: dict[int, list[Pod]] = {}
        for name, _ in leaving:
            p = next(b for b in cluster.bound if b.name == name)
            gone.setdefault(self.position[p.node_name or ""], []).append(p)
        come: dict[int, list[Pod]] = {}
        for k, i in coming:
            come.setdefault(i, []).append(arriving[f"come{k}"])
        self.moves = Moves(gone, come)
        self.spec = self._spec(self.cluster, self.index)

    def _spec(self, cluster: Cluster, index: BoundState) -> ClassSpec:
        compiled = compile_cluster(cluster, self.rules.placement, index=index)
        info = compiled.classes[0]
        return ClassSpec(0, info.sample, info.constraints)

    def batch(self) -> Batch:
        return Batch(self.cluster, self.index, [self.spec.constraints], ClassMatcher([self.spec.sample]))

    def moved(self, moves: Moves) -> tuple[Batch, ClassSpec]:
        """The cluster with `moves` made: the leaving pods gone, the arriving ones bound where they come."""
        leaving = {id(p) for _, p in moves.gone_pods()}
        names = [n.name for n in self.index.nodes]
        bound = [p for p in self.cluster.bound if id(p) not in leaving]
        bound += [replace(p, node_name=names[i]) for i, p in moves.come_pods()]
        cluster = replace(self.cluster, bound=bound)
        index = BoundState.of(cluster.nodes, bound)
        spec = self._spec(cluster, index)
        return Batch(cluster, index, [spec.constraints], ClassMatcher([spec.sample])), spec


def _scene(case, reserved: bool) -> Scene:
    docs, limited, leaving, coming = case
    return Scene(docs, limited, leaving, coming, reserved)


def _verdicts(kind, spec: ClassSpec, batch: Batch, moves: Moves) -> list[bool]:
    return [kind.after(spec, batch, i, moves) is not None for i in range(len(batch.index.nodes))]


PROPERTY = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(scenes(), st.booleans())
def test_each_kinds_answer_after_moves_is_its_answer_on_the_cluster_with_the_moves_made(case, reserved) -> None:
    scene = _scene(case, reserved)
    moved, spec = scene.moved(scene.moves)
    for kind in kinds.MOVED:
        delta = _verdicts(kind, scene.spec, scene.batch(), scene.moves)
        fresh = _verdicts(kind, spec, moved, Moves({}, {}))
        assert delta == fresh, kind.name


@PROPERTY
@given(scenes(), st.booleans())
def test_a_whole_filter_on_the_moved_cluster_agrees_with_after(case, reserved) -> None:
    """Where a kind's static filter is its whole Filter, `after` with no moves is that filter node by node: the first
    of those kinds (in filter order) to reject a node is the same either way. (A filter may leave out what an earlier
    kind already rejects: a reservation binds nothing where the node's own room is less than it leaves.)"""
    scene = _scene(case, reserved)
    moved, spec = scene.moved(scene.moves)
    whole = [kind for kind in kinds.MOVED if kind.name in WHOLE_FILTER]
    size = len(moved.index.nodes)
    filtered: list[str | None] = [None] * size
    for kind in reversed(whole):
        out = Rejections(size)
        kind.filter(spec, moved, out)
        for i in range(size):
            if out.code[i] >= 0:
                filtered[i] = kind.name
    asked = [next((k.name for k in whole if k.after(spec, moved, i, Moves({}, {})) is not None), None) for i in range(size)]
    assert asked == filtered


@PROPERTY
@given(scenes())
def test_spread_and_pod_affinity_after_moves_match_the_plain_per_node_filters(case) -> None:
    """Upstream's PodTopologySpread and InterPodAffinity Filter for one pod, written plainly node by node
    (tests/filter_oracle.py), on the cluster with the moves made."""
    scene = _scene(case, False)
    moved, spec = scene.moved(scene.moves)
    index = moved.index
    for name, plain in (("PodTopologySpread", filter_oracle.spread_filter),
                        ("InterPodAffinity", filter_oracle.pod_affinity_filter)):
        kind = kinds.BY_NAME[name]
        delta = _verdicts(kind, scene.spec, scene.batch(), scene.moves)
        assert delta == [plain(spec.sample, spec.constraints, index, i) is not None for i in range(len(index.nodes))], name


def _only_on(moves: Moves, i: int) -> Moves:
    return Moves({i: list(moves.gone_from(i))} if moves.gone_from(i) else {},
                 {i: list(moves.come_to(i))} if moves.come_to(i) else {})


@PROPERTY
@given(scenes(), st.booleans())
def test_a_kind_that_is_not_wide_answers_for_a_node_from_that_nodes_moves_alone(case, reserved) -> None:
    """`wide` False promises that moves on other nodes cannot change a node's verdict: preemption then reuses a
    node's answer while only other nodes change."""
    scene = _scene(case, reserved)
    batch = scene.batch()
    for kind in kinds.MOVED:
        if kind.wide(scene.spec, batch, scene.moves):
            continue
        for i in range(len(batch.index.nodes)):
            assert ((kind.after(scene.spec, batch, i, scene.moves) is None)
                    == (kind.after(scene.spec, scene.batch(), i, _only_on(scene.moves, i)) is None)), (kind.name, i)


@PROPERTY
@given(scenes(), st.booleans())
def test_a_pod_a_kind_is_not_swayed_by_changes_none_of_its_verdicts(case, reserved) -> None:
    """`sways` False promises that the pod leaving (or arriving) cannot change the kind's verdict anywhere:
    preemption asks only the swayed kinds again when it gives a unit back."""
    scene = _scene(case, reserved)
    batch = scene.batch()
    leaving = {id(p) for _, p in scene.moves.gone_pods()}
    for kind in kinds.MOVED:
        for p in scene.cluster.bound:
            if id(p) in leaving or kind.sways(scene.spec, batch, p):
                continue
            i = scene.position[p.node_name or ""]
            more = Moves({**scene.moves.gone, i: [*scene.moves.gone_from(i), p]}, scene.moves.come)
            assert (_verdicts(kind, scene.spec, batch, scene.moves)
                    == _verdicts(kind, scene.spec, scene.batch(), more)), (kind.name, p.name)
