"""One behaviour, live and dry-run (issue 25, point 4): pods arriving one at a time through the scheduler loop
(with the deployed defaults: a lone pod's cycle is sized to it, preferences get a fifth of it) land where
`plan_batch` would put the same pod on the same state, up to ties. "Up to ties": the loop's node scores as well on the plan's preferences as the node the full solve (CP-SAT to
optimality) chose, with the other nodes tainted. A greedy start that ignored a finer spread put a ReplicaSet's replicas two per node on half
the nodes here, where kube-scheduler and the dry-run put one per node."""
from __future__ import annotations

import copy
from collections import Counter

import pytest

from engine.loop.queue import QueueConfig
from engine.loop.scheduler import Profile, Scheduler, Settings
from engine.planning.planner import Options, plan_batch
from engine.reading.load import build_cluster
from loopfake import FakeAPI
from testkit.manifests import ZONE_KEY, node, owned, pod, replica_set, service, term

WEB, API = {"app": "web"}, {"app": "api"}
DEPLOYED = Settings((Profile("policy-scheduler"),), QueueConfig(batch_window=0.0), time_limit=5.0, time_per_pod=0.005)


def _loop(api: FakeAPI) -> Scheduler:
    s = Scheduler(api, DEPLOYED)
    for r in s.resources:
        items, _ = api.list(r) if r.kind not in api.absent_kinds else ([], "")
        s.store.replace(r, items)
    return s


def _preferences(docs: list[dict]) -> tuple[int, dict[str, str]]:
    """The full solve's placed count and preference objective, and its assignments."""
    cluster = build_cluster([(f"doc{i}", d) for i, d in enumerate(docs)])
    plan = plan_batch(cluster, options=Options(time_limit=10, workers=1))
    assert plan.stats.status == "OPTIMAL"
    return plan.stats.objective.preferences, plan.assignments


def _pinned(state: list[dict], node_name: str) -> list[dict]:
    """The state with every other node tainted NoSchedule: the pod can go only to `node_name`, and its spreads'
    domains stay as they were (upstream's nodeTaintsPolicy defaults to Ignore; node affinity would narrow them)."""
    out = copy.deepcopy(state)
    for obj in out:
        if obj["kind"] == "Node" and obj["metadata"]["name"] != node_name:
            obj["spec"].setdefault("taints", []).append({"key": "pinned-elsewhere", "effect": "NoSchedule"})
    return out


def arrive(nodes: list[dict], others: list[dict], pods: list[dict]) -> list[str]:
    """Create `pods` one at a time and cycle the loop on each; after every placement check that the dry-run on
    the state the loop saw scores the loop's node as well as its own choice. Returns the loop's nodes."""
    api = FakeAPI()
    for obj in [*nodes, *others]:
        api.put(obj["kind"], obj)
    s = _loop(api)
    loop, chosen = s.loops[0], []
    for doc in pods:
        state = [o for (kind, _, _), o in api.objects.items() if kind in ("Node", "Pod", "ReplicaSet", "Service")]
        s.store.apply("Pod", "ADDED", api.put("Pod", doc))
        name = doc["metadata"]["name"]
        loop.cycle([f"default/{name}"]).result()
        bound = api.objects[("Pod", "default", name)]
        s.store.apply("Pod", "MODIFIED", bound)  # the watch shows the binding
        where = bound["spec"].get("nodeName")
        assert where, f"{name} was not placed by the loop"
        best, planned = _preferences([*state, doc])
        loop_score, _ = _preferences([*_pinned(state, where), doc])
        assert loop_score == best, (f"{name}: the loop chose {where} (preferences {loop_score}), the dry-run "
                                    f"{planned[f'default/{name}']} ({best})")
        chosen.append(where)
    s.events.close()
    return chosen


def zoned(count: int, zones: int = 3, cpu: str = "4") -> list[dict]:
    return [node(f"n{i}", cpu=cpu, labels={ZONE_KEY: f"z{i % zones}"}) for i in range(count)]


def replicas(prefix: str, rs: str, labels: dict, count: int, **spec) -> list[dict]:
    return [owned(pod(f"{prefix}-{i}", cpu="100m", labels=labels, **spec), "ReplicaSet", rs) for i in range(count)]


def test_a_replica_sets_replicas_arriving_one_at_a_time_go_one_per_node_as_in_the_dry_run() -> None:
    chosen = arrive(zoned(6), [replica_set("web-1", WEB), service("web", WEB)], replicas("web", "web-1", WEB, 6))
    assert sorted(Counter(chosen).values()) == [1] * 6, chosen
    assert sorted(Counter(int(n[1:]) % 3 for n in chosen).values()) == [2, 2, 2]


def test_two_workloads_interleaved_each_spread_and_counted_apart() -> None:
    web, api = replicas("web", "web-1", WEB, 4), replicas("api", "api-1", API, 4)
    arrivals = [p for pair in zip(web, api) for p in pair]
    others = [replica_set("web-1", WEB), service("web", WEB), replica_set("api-1", API), service("api", API)]
    chosen = arrive(zoned(4, zones=2), others, arrivals)
    assert sorted(Counter(chosen[0::2]).values()) == [1] * 4 and sorted(Counter(chosen[1::2]).values()) == [1] * 4


def test_bare_pods_keep_packing_one_at_a_time_as_in_the_dry_run() -> None:
    chosen = arrive(zoned(4, cpu="1"), [], [pod(f"batch-{i}", cpu="250m") for i in range(8)])
    assert max(Counter(chosen).values()) == 4, chosen


def test_preferred_anti_affinity_arrivals_match_the_dry_run() -> None:
    prefer = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "podAffinityTerm": term(WEB)}]}}
    pods = [pod(f"web-{i}", cpu="100m", labels=WEB, affinity=prefer) for i in range(5)]
    chosen = arrive(zoned(4), [], pods)
    assert len(set(chosen[:4])) == 4, chosen


@pytest.mark.parametrize("bound", [0, 2])
def test_running_replicas_count_for_the_next_arrival(bound: int) -> None:
    nodes = zoned(6)
    running = [owned(pod(f"old-{i}", cpu="100m", labels=WEB, node_name=f"n{i}"), "ReplicaSet", "web-1")
               for i in range(bound)]
    chosen = arrive(nodes, [replica_set("web-1", WEB), service("web", WEB), *running],
                    replicas("web", "web-1", WEB, 6 - bound))
    assert sorted(Counter([*chosen, *(f"n{i}" for i in range(bound))]).values()) == [1] * 6
