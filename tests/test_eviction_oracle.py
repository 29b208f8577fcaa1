"""What an eviction frees, held against the cluster with the eviction made (issue 48, points 1 and 3).

Preemption asks each kind about a node on a view of the trial (`View.moved`: pods gone and added, upstream's Filter
after RemovePod/AddPod). The oracle is the same filter on the cluster where those moves already happened: the bound
pods without the leaving ones and with the arriving ones bound, read into tables of their own. The two must agree
node by node for every kind pods can sway, whatever the moves. Where a kind's static filter is its whole Filter
(room, ports, limits, reservations, volumes), the batch's filter on the moved cluster is the oracle too; for spread
and pod affinity the plain per-node functions of tests/filter_oracle.py are.

What preemption reads off a view about its own questions is held the same way: an answer whose questions did not
reach beyond the node asked about (`View.reads`) is the same with the moves on other nodes dropped.
"""
from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import filter_oracle
from engine import kinds
from engine.kinds.context import Batch, ClassMatcher, ClassSpec
from engine.model.cluster import Cluster, Moment, Reservation
from engine.model.ir import Rules
from engine.model.rejections import Rejections
from engine.model.view import View
from engine.planning.compile import compile_cluster
from engine.policy.lower import lower
from engine.policy.sources import check_sources
from engine.reading.load import build_cluster
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
    """One scene built: the cluster, the class asked about, its view and the view with the moves made."""

    def __init__(self, docs: list[dict], limited: bool, leaving: list[tuple[str, int]], coming: list[tuple[int, int]],
                 reserved: bool) -> None:
        self.rules = lower(check_sources({"limit.policy": LIMIT_POLICY})) if limited else Rules()
        cluster = build_cluster([(f"doc{i}", d) for i, d in enumerate(docs)], gangs=self.rules.gangs)
        self.moment = Moment(NOW, (  # n0 held from NOW + 1,800 s for two GPUs: what runs past then leaves less there
            Reservation("default/held", (("default/held", "n0"),), NOW + 1800, (("n0", (("nvidia.com/gpu", 2),)),)),
        ) if reserved else ())
        asked = next(p for p in cluster.pending if p.name == "asked")
        self.cluster = replace(cluster, pending=[asked])
        self.view = View.of(cluster.nodes, cluster.bound)
        self.position = self.view.positions()
        arriving = {p.name: p for p in cluster.pending if p.name.startswith("come")}
        names = [n.name for n in cluster.nodes]
        self.gone = [next(b for b in cluster.bound if b.name == name) for name, _ in leaving]
        self.come = [replace(arriving[f"come{k}"], node_name=names[i]) for k, i in coming]
        self.spec = self._spec(self.cluster, self.view)
        self.trial = self.view.moved(added=self.come, removed=self.gone)

    def _spec(self, cluster: Cluster, view: View) -> ClassSpec:
        compiled = compile_cluster(cluster, self.rules.placement, view=view, moment=self.moment)
        info = compiled.classes[0]
        return ClassSpec(0, info.sample, info.constraints)

    def moved(self) -> tuple[Cluster, View, ClassSpec]:
        """The cluster with the moves made, and its own view: the leaving pods gone, the arriving ones bound."""
        leaving = {p.key for p in self.gone}
        cluster = replace(self.cluster, bound=[p for p in self.cluster.bound if p.key not in leaving] + self.come)
        view = View.of(cluster.nodes, cluster.bound)
        return cluster, view, self._spec(cluster, view)


def _scene(case, reserved: bool) -> Scene:
    docs, limited, leaving, coming = case
    return Scene(docs, limited, leaving, coming, reserved)


def _verdicts(kind, spec: ClassSpec, batch: Batch) -> list[bool]:
    return [kinds.filter_node(spec, batch, i, (kind,)) is not None for i in range(len(batch.view.nodes))]


PROPERTY = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(scenes(), st.booleans())
def test_each_kinds_answer_on_a_trial_is_its_answer_on_the_cluster_with_the_moves_made(case, reserved) -> None:
    scene = _scene(case, reserved)
    cluster, view, spec = scene.moved()
    for kind in kinds.READ_PODS:
        trial = _verdicts(kind, scene.spec, Batch.alone_on(scene.cluster, scene.trial, scene.moment))
        fresh = _verdicts(kind, spec, Batch.alone_on(cluster, view, scene.moment))
        assert trial == fresh, kind.name


@PROPERTY
@given(scenes(), st.booleans())
def test_a_whole_filter_in_a_batch_on_the_moved_cluster_agrees_with_the_trial(case, reserved) -> None:
    """Where a kind's static filter is its whole Filter, compile's run of it (a batch, no changes) on the moved
    cluster and a trial's (a pod alone, the changes laid over the table) agree: the first of those kinds (in filter
    order) to reject a node is the same either way."""
    scene = _scene(case, reserved)
    cluster, view, spec = scene.moved()
    whole = [kind for kind in kinds.READ_PODS if kind.name in WHOLE_FILTER]
    size = len(view.nodes)
    batch = Batch(cluster, view, [spec.constraints], ClassMatcher([spec.sample]), moment=scene.moment)
    out = Rejections(size)
    for kind in whole:
        kind.filter(spec, batch, out)
    filtered = [None if (r := out.get(i)) is None else r.plugin for i in range(size)]
    alone = Batch.alone_on(scene.cluster, scene.trial, scene.moment)
    asked = [None if (r := kinds.filter_node(scene.spec, alone, i, tuple(whole))) is None else r.plugin
             for i in range(size)]
    assert asked == filtered


@PROPERTY
@given(scenes())
def test_spread_and_pod_affinity_on_a_trial_match_the_plain_per_node_filters(case) -> None:
    """Upstream's PodTopologySpread and InterPodAffinity Filter for one pod, written plainly node by node
    (tests/filter_oracle.py), on the cluster with the moves made."""
    scene = _scene(case, False)
    _, view, spec = scene.moved()
    for name, plain in (("PodTopologySpread", filter_oracle.spread_filter),
                        ("InterPodAffinity", filter_oracle.pod_affinity_filter)):
        kind = kinds.BY_NAME[name]
        trial = _verdicts(kind, scene.spec, Batch.alone_on(scene.cluster, scene.trial, scene.moment))
        assert trial == [plain(spec.sample, spec.constraints, view, i) is not None for i in range(len(view.nodes))], name


@PROPERTY
@given(scenes(), st.booleans())
def test_an_answer_that_read_no_other_node_stands_without_the_moves_elsewhere(case, reserved) -> None:
    """`View.reads` says whether a kind's answer for a node read beyond it (a domain's counts, a claim's users
    anywhere): when it did not, the moves on other nodes cannot change it."""
    scene = _scene(case, reserved)
    for kind in kinds.READ_PODS:
        for i in range(len(scene.view.nodes)):
            with scene.trial.reads() as reached:
                verdict = kinds.filter_node(scene.spec, Batch.alone_on(scene.cluster, scene.trial, scene.moment), i, (kind,))
            if reached[0]:
                continue
            here = scene.view.moved(added=[p for p in scene.come if scene.position[p.node_name] == i],
                                    removed=[p for p in scene.gone if scene.position[p.node_name] == i])
            alone = kinds.filter_node(scene.spec, Batch.alone_on(scene.cluster, here, scene.moment), i, (kind,))
            assert (verdict is None) == (alone is None), (kind.name, i)
