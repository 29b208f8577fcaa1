"""Time in the plan (issue 29): reservations at a unit's shadow time, backfill around them.

The issue's snapshot, taken at 12:00: 4 nodes × 8 GPUs; running 1-GPU pods that end (`status.startTime` +
`spec.activeDeadlineSeconds`) at 12:10 on half of n1, 12:20 on n2, 14:00 on n3 and n4; pending: an old 2×8-GPU gang
(priority 1000, preemptionPolicy Never), four older 4-hour 1-GPU pods and four 5-minute 1-GPU pods. Without time,
the four 4-hour pods start on n1 now and the gang cannot start before 14:00; with time, n1 and n2 are held for the
gang from 12:20, and the four 5-minute pods start on n1's free GPUs meanwhile (done by 12:05).
"""

from __future__ import annotations

from engine.planning.planner import Options, TimeInputs, plan_batch
from engine.policy.lower import lower
from engine.policy.parse import duration
from engine.policy.sources import check_sources
from engine.reading.load import build_cluster
from engine.time.timeline import end_times, ends, seconds, snapshot_time
from testkit.manifests import POD_GROUP_LABEL, node, pod, podgroup, priority_class

GPU = "nvidia.com/gpu"
NOON = "2026-11-25T12:00:00Z"


def at(hh: int, mm: int) -> str:
    return f"2026-11-25T{hh:02d}:{mm:02d}:00Z"


def gpu_pod(name: str, *, node_name: str | None = None, gpus: int = 1, created: str = "2026-11-25T11:00:00Z",
            started: str | None = None, deadline: int | None = None, **extra) -> dict:
    doc = pod(name, cpu="100m", requests={GPU: str(gpus)}, node_name=node_name, **extra)
    doc["metadata"]["creationTimestamp"] = created
    if deadline is not None:
        doc["spec"]["activeDeadlineSeconds"] = deadline
    if started is not None:
        doc["status"]["startTime"] = started
    return doc


def running(name: str, where: str, ends_at: str) -> dict:
    """A 1-GPU pod started at 11:00 whose bound ends it at `ends_at`."""
    start = "2026-11-25T11:00:00Z"
    return gpu_pod(name, node_name=where, started=start, deadline=int(seconds(ends_at) - seconds(start)))


def snapshot() -> list[dict]:
    docs: list[dict] = [node(f"n{i}", cpu="32", **{GPU: "8"}) for i in (1, 2, 3, 4)]
    docs += [priority_class("train", 1000, preemption_policy="Never"), podgroup("train", 2)]
    docs += [running(f"n1-{k}", "n1", at(12, 10)) for k in range(4)]
    docs += [running(f"n2-{k}", "n2", at(12, 20)) for k in range(8)]
    docs += [running(f"{n}-{k}", n, at(14, 0)) for n in ("n3", "n4") for k in range(8)]
    docs += [gpu_pod(f"train-{k}", gpus=8, created="2026-11-25T09:00:00Z", labels={POD_GROUP_LABEL: "train"},
                     priorityClassName="train") for k in range(2)]
    docs += [gpu_pod(f"long-{k}", deadline=4 * 3600, created="2026-11-25T10:00:00Z") for k in range(4)]
    docs += [gpu_pod(f"short-{k}", deadline=300, created=NOON) for k in range(4)]
    return docs


def plan(now: str | None = NOON):
    cluster = build_cluster([(f"doc{i}", d) for i, d in enumerate(snapshot())])
    return cluster, plan_batch(cluster, options=Options(time_limit=5.0, workers=1),
                               time_inputs=TimeInputs(seconds(now) if now else None))


def test_running_pods_end_by_their_start_plus_their_bound() -> None:
    cluster, _ = plan()
    now = seconds(NOON)
    assert [t - now for t in end_times(cluster, now, 24 * 3600)] == [600, 1200, 7200]
    assert snapshot_time(cluster) == now  # the newest time the snapshot holds: the short pods' creation
    late = next(p for p in cluster.bound if p.name == "n1-0")
    assert ends(late, seconds(at(12, 30))) == seconds(at(12, 30))  # past its bound: ending now


def test_without_time_the_long_pods_take_n1_and_the_gang_waits() -> None:
    _, got = plan(now=None)
    assert sorted(k for k, n in got.assignments.items() if n == "n1") == [f"default/long-{k}" for k in range(4)]
    assert not got.reservations


def test_the_gang_is_reserved_at_its_shadow_time_and_short_pods_backfill() -> None:
    _, got = plan()
    held, then = got.reservations  # the gang first; then the first 4-hour pod, which the gang's room displaces
    assert held.holder == "default/train"
    assert held.start == seconds(at(12, 20))
    assert (then.holder, then.start) == ("default/long-0", seconds(at(14, 0)))  # as the loop reserves (below)
    assert sorted(node for _, node in held.pods) == ["n1", "n2"]
    assert sorted(k for k, n in got.assignments.items() if n == "n1") == [f"default/short-{k}" for k in range(4)]
    assert not any(k.startswith("default/long-") for k in got.assignments)  # they would delay the gang
    assert any(f"Insufficient {GPU} reserved for default/train from 2026-11-25T12:20:00Z" in why
               for why in got.unschedulable["default/long-0"])
    assert any("expected to start" in why and "12:20" in why for why in got.unschedulable["default/train-0"])
    shown = got.to_dict()["reservations"]
    assert {k: v["start"] for k, v in shown.items()} == {**{f"default/train-{k}": at(12, 20) for k in range(2)},
                                                         "default/long-0": at(14, 0)}


def test_every_other_waiting_pod_gets_an_estimated_start() -> None:
    """The 4-hour pods, kept out of the gang's room, start when n3 and n4 free at 14:00; a pod that fits nowhere
    even then cannot be estimated, and says why."""
    docs = snapshot() + [gpu_pod("huge", gpus=16, deadline=600, created=NOON)]
    cluster = build_cluster([(f"doc{i}", d) for i, d in enumerate(docs)])
    got = plan_batch(cluster, options=Options(time_limit=5.0, workers=1), time_inputs=TimeInputs(seconds(NOON)))
    estimates = got.to_dict()["estimates"]
    assert {estimates[f"default/long-{k}"]["start"] for k in (1, 2, 3)} == {at(14, 0)}  # (long-0: reserved then)
    assert "does not fit even once" in estimates["default/huge"]["unknown"]
    assert not set(estimates) & {key for r in got.reservations for key, _ in r.pods}
    assert any("expected to start by 2026-11-25T14:00:00Z" in why for why in got.unschedulable["default/long-1"])


def test_a_runtime_statement_estimates_pods_without_a_deadline() -> None:
    """`runtime 5m` in a policy: the short pods, now without activeDeadlineSeconds, backfill as before; a
    statement out of their scope leaves them unbounded (they never take reserved room)."""
    docs = snapshot()
    for d in docs:
        if d["metadata"]["name"].startswith("short-"):
            del d["spec"]["activeDeadlineSeconds"]
            d["metadata"]["labels"] = {"size": "short"}
    cluster = build_cluster([(f"doc{i}", d) for i, d in enumerate(docs)])
    for label, backfilled in (("short", True), ("other", False)):
        rules = lower(check_sources({"p.policy": f"""policy quick {{
            applies to pods where label "size" == "{label}"
            runtime 5m
        }}"""}))
        got = plan_batch(cluster, rules, Options(time_limit=5.0, workers=1), time_inputs=TimeInputs(seconds(NOON)))
        on_n1 = sorted(k for k, n in got.assignments.items() if n == "n1")
        assert on_n1 == ([f"default/short-{k}" for k in range(4)] if backfilled else [])
        assert got.reservations[0].holder == "default/train"


def test_a_reserve_statement_sets_how_many_and_how_far_ahead() -> None:
    """`reserve at most N within D` over the gang's pods: none at all, or a horizon short of 12:20, and the 4-hour
    pods take n1 as without time; the default (2 within 7 days) reserves."""
    cluster = build_cluster([(f"doc{i}", d) for i, d in enumerate(snapshot())])
    for line, reserved in (("reserve at most 0 within 1d", False), ("reserve at most 1 within 10m", False),
                           ("reserve at most 1 within 30m", True)):
        rules = lower(check_sources({"p.policy": f"""policy train {{
            applies to pods where label "{POD_GROUP_LABEL}" == "train"
            {line}
        }}"""}))
        got = plan_batch(cluster, rules, Options(time_limit=5.0, workers=1), time_inputs=TimeInputs(seconds(NOON)))
        assert [r.holder for r in got.reservations][:1] == (["default/train"] if reserved else []), line
        on_n1 = {k for k, n in got.assignments.items() if n == "n1"}
        assert on_n1 == ({f"default/short-{k}" for k in range(4)} if reserved else {f"default/long-{k}" for k in range(4)})


def test_durations() -> None:
    assert [duration(t) for t in ("90s", "5m", "4h", "1h30m", "2d")] == [90, 300, 14400, 5400, 172800]


def test_runtime_lines_are_checked() -> None:
    from engine.policy.parse import PolicyError

    for text, words in (("runtime 0s", "longer than 0s"), ("runtime 5m\n runtime 1h", "second 'runtime' line"),
                        ("runtime 5", ""), ("reserve at most 1 within 0s", "longer than 0s"),
                        ("reserve at most 1 within 1h\n reserve at most 2 within 1h", "second 'reserve' line")):
        try:
            check_sources({"p.policy": f"policy p {{ applies to all pods\n {text} }}"})
        except PolicyError as exc:
            shown = "\n".join(d.render() for d in exc.diagnostics)
            assert "p.policy:" in shown and words in shown
        else:
            raise AssertionError(f"{text!r} was accepted")


def test_dry_run_shows_reservations_from_now_or_the_snapshot_time(tmp_path) -> None:
    """The real command: `--now` sets the plan's now (default: the snapshot's newest pod time, here 12:00); a
    bad --now is a usage error (exit 2, no traceback)."""
    import json
    import subprocess
    import sys

    import yaml

    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": snapshot()}))

    def dry_run(*extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "engine", "dry-run", "--cluster", str(path), "-q", *extra],
                              capture_output=True, text=True, timeout=120)
    for extra in ((), ("--now", NOON)):
        out = dry_run("-o", "json", *extra)
        assert out.returncode == 0, out.stderr
        shown = json.loads(out.stdout)["reservations"]
        assert {v["for"]: v["start"] for v in shown.values()} == {"default/train": at(12, 20),
                                                                  "default/long-0": at(14, 0)}
    later = json.loads(dry_run("-o", "json", "--now", at(14, 30)).stdout)  # every running pod is past its bound
    assert {v["start"] for k, v in later["reservations"].items() if v["for"] == "default/train"} == {at(14, 30)}
    assert not later["assignments"]  # (they still hold their room until they are gone)
    bad = dry_run("--now", "noon")
    assert bad.returncode == 2 and "--now" in bad.stderr and "Traceback" not in bad.stderr


# --- the property: backfill never delays a reservation ------------------------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@st.composite
def timed_clusters(draw) -> list[dict]:
    """A few 8-GPU nodes, each with running 1-GPU pods ending within a few hours (or never), a pending gang of
    whole-node pods, and pending 1-GPU pods of random runtimes (some unbounded)."""
    nodes = draw(st.integers(2, 4))
    docs: list[dict] = [node(f"n{i}", cpu="32", **{GPU: "8"}) for i in range(nodes)]
    docs += [podgroup("big", 2)]
    for i in range(nodes):
        for k in range(draw(st.integers(0, 8))):
            minutes = draw(st.one_of(st.none(), st.integers(1, 240)))
            doc = running(f"run-{i}-{k}", f"n{i}", NOON)
            doc["spec"]["activeDeadlineSeconds"] = 3600 + 60 * minutes if minutes else None
            if minutes is None:
                del doc["spec"]["activeDeadlineSeconds"]
            docs.append(doc)
    docs += [gpu_pod(f"big-{k}", gpus=8, created="2026-11-25T09:00:00Z", labels={POD_GROUP_LABEL: "big"},
                     priorityClassName="train") for k in range(2)]
    docs.append(priority_class("train", 1000, preemption_policy="Never"))
    for k in range(draw(st.integers(0, 10))):
        minutes = draw(st.one_of(st.none(), st.integers(1, 300)))
        docs.append(gpu_pod(f"small-{k}", deadline=None if minutes is None else 60 * minutes, created=NOON))
    return docs


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(timed_clusters())
def test_no_backfilled_pod_delays_a_reservation_when_every_pod_keeps_its_bound(docs) -> None:
    cluster = build_cluster([(f"doc{i}", d) for i, d in enumerate(docs)])
    now = seconds(NOON)
    got = plan_batch(cluster, options=Options(time_limit=2.0, workers=1), time_inputs=TimeInputs(now))
    pods = {p.key: p for p in (*cluster.bound, *cluster.pending)}
    for r in got.reservations:
        assert not set(dict(r.pods)) & set(got.assignments)  # a reserved pod is not also placed now
        for node_name, need in r.need:
            allocatable = next(n for n in cluster.nodes if n.name == node_name).allocatable
            still = [p for p in cluster.bound if p.node_name == node_name and ((e := ends(p, now)) is None or e > r.start)]
            still += [pods[k] for k, n in got.assignments.items() if n == node_name
                      and (pods[k].runtime is None or now + pods[k].runtime > r.start)]
            for resource, amount in need:
                used = sum(p.requests.get(resource, 0) for p in still)
                assert allocatable.get(resource, 0) - used >= amount, (r.holder, node_name, resource)


# --- the loop's plan stage: reservations carried from cycle to cycle -----------------------------------------

def test_the_plan_stage_carries_reservations_until_they_start() -> None:
    """Cycle 1 plans the gang alone: it waits, and the stage keeps its reservation. Cycle 2 plans the 4-hour and
    5-minute pods: the carried reservation keeps the 4-hour ones off n1 (early binding and all) while the short
    ones backfill. Past its start the room stays its holder's for RESERVATION_GRACE, then is let go."""
    import threading

    from engine.loop.cache import ClusterCache
    from engine.loop.plan_stage import PlanStage
    from engine.loop.profile import Profile, Settings
    from engine.loop.store import Store
    from engine.model.ir import Rules

    store = Store()
    cache = ClusterCache(store.assumptions)
    store.subscribe(lambda change: cache.apply(change.kind, change.old, change.new))
    for doc in snapshot():
        doc["metadata"].setdefault("uid", doc["metadata"]["name"])
        store.apply(doc["kind"], "ADDED", doc)
    clock = [seconds(NOON)]
    stage = PlanStage("policy-scheduler", Settings((Profile("policy-scheduler"),)), store, cache, threading.Lock(),
                      wall=lambda: clock[0])
    gang = stage.plan(["default/train-0", "default/train-1"], Rules())
    assert not gang.result.plan.assignments
    (held,) = stage.reservations
    assert held.holder == "default/train" and held.start == seconds(at(12, 20))
    rest = stage.plan([f"default/{kind}-{k}" for kind in ("long", "short") for k in range(4)], Rules())
    assert sorted(p.key for p in rest.placements) == [f"default/short-{k}" for k in range(4)]
    kept, then = stage.reservations  # its holder was not in the batch: carried as it was, and counted first
    assert kept == held and (then.holder, then.start) == ("default/long-0", seconds(at(14, 0)))
    assert [r.holder for r in stage._carried(seconds(at(12, 21)))] == ["default/train", "default/long-0"]
    assert [r.holder for r in stage._carried(seconds(at(12, 26)))] == ["default/long-0"]  # unclaimed 5 min: let go


def test_the_head_of_the_line_is_not_beaten_by_smaller_pods() -> None:
    """Two free 8-GPU nodes; the old gang asks for both, sixteen newer 1-GPU pods for as much. Without time the
    batch places the sixteen (more pods); with time the gang, first in line and beaten only by smaller pods, gets its
    room now, so a stream of small pods cannot starve it. Pods like each other still compete as before."""
    docs: list[dict] = [node(f"n{i}", cpu="32", **{GPU: "8"}) for i in (1, 2)]
    docs += [podgroup("train", 2)]
    docs += [gpu_pod(f"train-{k}", gpus=8, created="2026-11-25T09:00:00Z", labels={POD_GROUP_LABEL: "train"})
             for k in range(2)]
    docs += [gpu_pod(f"small-{k}", deadline=300, created=NOON) for k in range(16)]
    cluster = build_cluster([(f"doc{i}", d) for i, d in enumerate(docs)])
    plain = plan_batch(cluster, options=Options(time_limit=5.0, workers=1))
    assert len(plain.assignments) == 16 and "default/train-0" not in plain.assignments
    timed = plan_batch(cluster, options=Options(time_limit=5.0, workers=1), time_inputs=TimeInputs(seconds(NOON)))
    assert {"default/train-0", "default/train-1"} <= set(timed.assignments) and len(timed.assignments) == 2
    assert not timed.reservations  # started now: nothing left held

    alike = build_cluster([(f"doc{i}", d) for i, d in enumerate(
        [node("n1", cpu="32", **{GPU: "8"})] + [gpu_pod(f"p-{k}", deadline=300, created=NOON) for k in range(10)])])
    got = plan_batch(alike, options=Options(time_limit=5.0, workers=1), time_inputs=TimeInputs(seconds(NOON)))
    assert len(got.assignments) == 8 and not got.reservations
