"""`policy-scheduler simulate` (issue 29): a trace replayed three ways with a virtual clock."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from engine.model.view import View
from engine.planning.plan import make_plan
from engine.planning.planner import Options, TimeInputs, plan_batch
from engine.time import simulate as S
from engine.time.simulate import (
    Job,
    NodeShape,
    Replay,
    Trace,
    TraceError,
    kai_starvation,
    mixed,
    replay,
    trace_of,
    utilisation,
    waits,
)

CONTENDED = mixed(jobs=40, nodes=3, seed=2, load=2)  # three nodes asked for about 140% of their GPUs: queues form


def test_a_steady_stream_starves_the_gang_one_at_a_time_and_as_a_batch_but_not_with_time() -> None:
    """KAI #1969's shape: 16 GPUs busy with 1-GPU jobs bounded at 40 minutes, a stream of more, and a gang asking for
    all 16. Without time the gang waits until the stream ends; with time it starts once the jobs running when it
    arrived have ended, by their bound."""
    trace = kai_starvation(small_jobs=60)
    stream_ends = max(j.arrival for j in trace.jobs)
    runs = {mode: replay(trace, mode) for mode in ("batch", "batch-time")}
    gang = {mode: run.starts["big-gang"] - 1.0 for mode, run in runs.items()}
    assert gang["batch-time"] <= 2400  # bounded by the running jobs' bounds
    assert gang["batch"] > stream_ends - 600  # starved while the stream lasts
    assert all(len(run.starts) == len(trace.jobs) for run in runs.values())  # everyone starts eventually
    assert "big-gang" in runs["batch-time"].promised and runs["batch-time"].delayed() == []  # every job keeps its bound


def test_a_job_displaced_by_a_reservation_keeps_its_place_in_line() -> None:
    """64 GPUs at 90% load, the gang a quarter of them. A 1-GPU job the first plan of a cycle placed in room the
    gang's reservation then keeps is in line again, before the jobs behind it: it is reserved first, and no job
    starts later than its reservation promised (11 did when the reservations went to the jobs the first plan had
    left out)."""
    run = replay(kai_starvation(small_jobs=100, nodes=8, load=0.9), "batch-time")
    assert len(run.promised) > 20 and run.delayed() == []


def test_with_time_the_stream_starts_in_arrival_order_and_waits_no_longer_than_any_fair_scheduler() -> None:
    """KAI #1969's shape on 16 GPUs with time: the 1-GPU jobs start in arrival order (a younger job never takes the
    GPU an older one waits for, reserved or not: 13 did on the 600-job trace, passing a reservation's holder), and
    each waits exactly what bench/time_bound.py works out for any scheduler that starts them in arrival order and
    the gang by its bound under the backfill rule, on one pool of GPUs knowing every runtime."""
    from bench import time_bound

    trace = kai_starvation(small_jobs=120)
    run = replay(trace, "batch-time")
    small = [j for j in trace.jobs if j.kind == time_bound.SMALL]
    starts = [run.starts[j.name] for j in small]
    assert starts == sorted(starts)
    gang = next(j for j in trace.jobs if j.kind == time_bound.GANG)
    fair, gang_start = time_bound.reserved_waits(small, 16, gang, 16, time_bound.latest_bound(trace, gang.arrival))
    assert gang_start == pytest.approx(run.starts["big-gang"])
    assert [run.starts[j.name] - j.arrival for j in small] == pytest.approx(fair, abs=1e-6)


def test_one_at_a_time_places_in_queue_order() -> None:
    """Two 1-GPU jobs and a 2-GPU one on one 2-GPU node: one pod at a time takes them in arrival order."""
    trace = Trace((NodeShape(1, {"cpu": "8", "nvidia.com/gpu": "2"}),), (
        Job("a", 0, 100, {"nvidia.com/gpu": "1"}), Job("b", 1, 100, {"nvidia.com/gpu": "2"}),
        Job("c", 2, 100, {"nvidia.com/gpu": "1"})))
    run = replay(trace, "one-at-a-time")
    assert run.starts == {"a": 0, "c": 2, "b": 102}  # b does not fit beside a; c does


def test_the_cluster_assembled_from_models_is_what_the_manifests_build() -> None:
    """Each job's pods are converted once and a snapshot is assembled from them: it must equal, field by field, the
    cluster build_cluster makes of the same manifests (running pods bound, a waiting gang with its PodGroup), and
    plan alike; the view kept as jobs start and end must be the one worked out afresh."""
    trace = kai_starvation(small_jobs=8)
    world = S._World.of(trace)
    world.begin([(S._models(job), [f"gpu-{k % 2}"]) for k, job in enumerate(trace.jobs[:6])], 0.0)
    world.begin([(S._models(job), ["gpu-0"]) for job in trace.jobs[6:8]], 50.0)
    world.retire(min(j.runtime for j in trace.jobs[:6]) + 1)
    waiting = [S._models(j) for j in trace.jobs[8:]]
    also = [S._running(waiting.pop(), ("gpu-1",), 60.0, world.resource)]
    assert any(m.gang is not None for m in waiting) and len(world.running) == 7
    new = world.cluster(waiting, also)
    old = S._manifest_cluster(trace, [m.job for m in waiting], [*world.running.values(), *also])
    assert new == old and new.bound and new.gangs and new.pod_groups
    for timed in (False, True):
        at = TimeInputs(S.EPOCH + 90.0 if timed else None)
        plans = [plan_batch(c, options=Options(time_limit=2.0, workers=1, preemption=False), view=view, time_inputs=at)
                 for c, view in ((new, world.view.moved(added=also[0].pods)), (old, None))]
        assert plans[0].assignments == plans[1].assignments and plans[0].reservations == plans[1].reservations
    assert make_plan(new, workers=1).assignments == make_plan(old, workers=1).assignments
    fresh = View.of(world.base.nodes, world.bound)
    assert world.view.placed() == fresh.placed() and world.view.pods == world.bound
    assert (world.view.usage.used == fresh.usage.used).all() and world.view.usage.names == fresh.usage.names


def test_a_replay_of_models_is_a_replay_of_manifests(monkeypatch) -> None:
    """The whole replay, every mode, with the cluster built from manifests at every cycle instead and its view
    worked out by every plan (as it was)."""
    fast = {mode: replay(CONTENDED, mode) for mode in S.MODES}

    def from_manifests(self, waiting, also):
        return S._manifest_cluster(CONTENDED, [m.job for m in waiting], [*self.running.values(), *also])

    monkeypatch.setattr(S._World, "cluster", from_manifests)
    monkeypatch.setattr(S, "make_plan", lambda cluster, view, **kw: make_plan(cluster, **kw))
    monkeypatch.setattr(S, "plan_batch", lambda cluster, view, **kw: plan_batch(cluster, **kw))
    for mode, run in fast.items():
        slow = replay(CONTENDED, mode)
        assert (run.starts, run.usage, run.cycles, run.promised) == (slow.starts, slow.usage, slow.cycles, slow.promised)
    assert fast["batch-time"].promised  # reservations were made, and compared


def test_with_a_period_jobs_start_only_at_cycle_times_and_never_before_they_arrive() -> None:
    arrival = {j.name: j.arrival for j in CONTENDED.jobs}
    runtime = {j.name: j.runtime for j in CONTENDED.jobs}
    gpus = {j.name: int(j.requests["nvidia.com/gpu"]) * j.pods for j in CONTENDED.jobs}
    for mode in S.MODES:
        run = replay(CONTENDED, mode, period=120)
        assert len(run.starts) == len(CONTENDED.jobs)
        assert all(t % 120 == 0 and t >= arrival[name] for name, t in run.starts.items())
        assert any(t % 120 for t, _ in run.usage)  # a job's end frees its GPUs when it ends, not at the next cycle
        for at, share in run.usage:
            busy = sum(gpus[name] for name, t in run.starts.items() if t <= at < t + runtime[name])
            assert share == pytest.approx(busy / 24)  # 3 nodes × 8 GPUs
        assert run.cycles < replay(CONTENDED, mode).cycles


def test_one_at_a_time_skips_a_job_that_cannot_fit_where_a_smaller_one_like_it_did_not(monkeypatch) -> None:
    """Within a cycle room only shrinks: once a job did not fit, later ones asking as much per pod, with as many
    pods or more, are not planned; the replay is the same."""
    planned = []

    def counting(cluster, **kw):
        planned.append(1)
        return make_plan(cluster, **kw)

    monkeypatch.setattr(S, "make_plan", counting)
    pruned = replay(CONTENDED, "one-at-a-time")
    fewer = len(planned)
    full = replay(CONTENDED, "one-at-a-time", prune=False)
    assert (pruned.starts, pruned.usage, pruned.cycles) == (full.starts, full.usage, full.cycles)
    assert fewer < len(planned) - fewer


def test_the_mixed_generator_offers_the_same_share_at_any_size() -> None:
    """One job every 30 s per 50 nodes: ten times the nodes, ten times the arrivals (and `load` scales them)."""
    small, large, busy = mixed(jobs=50, nodes=50), mixed(jobs=50, nodes=500), mixed(jobs=50, nodes=50, load=2)
    assert [j.runtime for j in small.jobs] == [j.runtime for j in large.jobs]
    assert all(a.arrival == pytest.approx(10 * b.arrival) == pytest.approx(2 * c.arrival)
               for a, b, c in zip(small.jobs, large.jobs, busy.jobs, strict=True))
    assert 20 < small.jobs[-1].arrival / 50 < 40


def test_waits_and_utilisation_are_summed_per_class() -> None:
    trace = Trace((NodeShape(1, {"cpu": "8"}),), (Job("a", 0, 10, {"cpu": "8"}, kind="k"),
                                                  Job("b", 0, 10, {"cpu": "8"}, kind="k")))
    run = Replay("batch", {"a": 0.0, "b": 10.0}, [(0.0, 1.0), (10.0, 1.0), (20.0, 0.0), (40.0, 0.0)])
    (k,) = waits(trace, run)
    assert (k.jobs, k.started, k.p50, k.p95, k.max) == (2, 2, 5.0, 10.0, 10.0)
    assert utilisation(run) == pytest.approx(0.5)


def test_with_a_period_a_reserved_job_is_late_only_after_the_first_cycle_once_its_room_is_free() -> None:
    run = Replay("batch-time", {"a": 120.0, "b": 180.0}, promised={"a": 100.0, "b": 100.0}, period=60)
    assert run.delayed() == ["b"]
    assert Replay("batch-time", {"a": 120.0}, promised={"a": 100.0}).delayed() == ["a"]


def test_a_bad_trace_says_where() -> None:
    for doc, words in (([], "a mapping"), ({"nodes": [{"count": 1}], "jobs": []}, "allocatable"),
                       ({"nodes": [{"count": 1, "allocatable": {"cpu": 1}}], "jobs": []}, "no nodes or no jobs")):
        with pytest.raises(TraceError, match=words):
            trace_of(doc, "t.yaml")


NODES = [{"count": 2, "allocatable": {"cpu": "8", "nvidia.com/gpu": "8"}}]


@pytest.mark.parametrize("job, words", [
    ({"arrival": -5}, "t.yaml: job 'j': arrival must be at least 0 seconds, got -5"),
    ({"runtime": -10}, "t.yaml: job 'j': runtime must be above 0 seconds, got -10"),
    ({"runtime": float("nan")}, "t.yaml: job 'j': runtime must be above 0 seconds, got nan"),
    ({"runtime": "an hour"}, "t.yaml: job 'j': runtime must be a number of seconds, got 'an hour'"),
    ({"runtime": 3600, "limit": 600}, "t.yaml: job 'j': runtime 3600 is past its limit 600"),
    ({"arival": 0}, "t.yaml: job 'j': unknown key 'arival' (a job has name, arrival, runtime, requests, pods, "),
    ({"requests": {"nvidia.com/gpu": "1x"}}, "t.yaml: job 'j': requests.nvidia.com/gpu: invalid quantity"),
    ({"pods": 3, "requests": {"nvidia.com/gpu": "8"}},
     "t.yaml: job 'j': 3 pod(s) of 8 nvidia.com/gpu each do not fit the whole cluster, even empty (room for 2)"),
    ({"requests": {"nvidia.com/gpu": "9"}}, "t.yaml: job 'j': 1 pod(s) of 9 nvidia.com/gpu each do not fit"),
    ({"pods": 0}, "t.yaml: job 'j': pods must be in 1.."),
])
def test_a_job_the_replay_could_not_honour_is_refused_naming_it(job, words) -> None:
    """Issue 47: a negative time, a runtime past its bound, an unknown key or a gang no empty cluster holds would
    replay as nonsense (or wait forever); each is one error naming the job."""
    entry = {"name": "j", "arrival": 0, "runtime": 60, "requests": {"nvidia.com/gpu": "1"}, **job}
    entry = {k: v for k, v in entry.items() if not (k == "arrival" and "arival" in job)}
    with pytest.raises(TraceError) as err:
        trace_of({"nodes": NODES, "jobs": [{"name": "ok", "arrival": 0, "runtime": 60, "requests": {}}, entry]}, "t.yaml")
    assert words in str(err.value), str(err.value)


def test_an_unnamed_job_or_a_node_entry_is_named_by_its_place() -> None:
    with pytest.raises(TraceError, match=r"t.yaml: jobs\[0\]: job.name: missing field 'name'"):
        trace_of({"nodes": NODES, "jobs": [{"arrival": 0, "runtime": 1, "requests": {}}]}, "t.yaml")
    with pytest.raises(TraceError, match=r"t.yaml: nodes\[0\]: unknown key 'prefx'"):
        trace_of({"nodes": [{**NODES[0], "prefx": "gpu"}], "jobs": []}, "t.yaml")
    with pytest.raises(TraceError, match=r"t.yaml: unknown key 'job' \(a trace has nodes, jobs\)"):
        trace_of({"nodes": NODES, "job": []}, "t.yaml")


@pytest.mark.parametrize("text, words", [
    ("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\n",
     "2 YAML documents holding Kubernetes objects (Node, Pod), not a trace: simulate replays a trace of nodes and jobs"),
    ("apiVersion: v1\nkind: List\nitems: []\n", "a Kubernetes object ('List'), not a trace"),
    ("nodes: []\n---\njobs: []\n", "2 YAML documents; a trace is one"),
])
def test_a_snapshot_or_a_multi_document_file_given_to_simulate_is_refused_clearly(tmp_path, text, words) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(text)
    out = subprocess.run([sys.executable, "-m", "engine", "simulate", str(path)], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    [line] = out.stderr.strip().splitlines()
    assert line.startswith(f"policy-scheduler: error: {path}: ") and words in line, line


def test_the_command(tmp_path) -> None:
    out = subprocess.run([sys.executable, "-m", "engine", "simulate", "--generate", "kai", "--jobs", "10", "-o", "json"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert set(report) == {"one-at-a-time", "batch", "batch-time"}
    assert all(0 < r["utilisation"] <= 1 for r in report.values())
    out = subprocess.run([sys.executable, "-m", "engine", "simulate", "--generate", "mixed", "--jobs", "20", "--nodes",
                          "2", "--load", "2", "--period", "60", "--mode", "batch", "-o", "json"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert set(json.loads(out.stdout)) == {"batch"}
    bad = tmp_path / "t.yaml"
    bad.write_text("jobs: [1, 2]\n")
    out = subprocess.run([sys.executable, "-m", "engine", "simulate", str(bad)], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 2 and "t.yaml" in out.stderr and "Traceback" not in out.stderr


def test_the_command_draws_its_plots(tmp_path) -> None:
    pytest.importorskip("matplotlib")
    out = subprocess.run([sys.executable, "-m", "engine", "simulate", "--generate", "kai", "--jobs", "6", "--mode",
                          "batch", "--plots", str(tmp_path / "plots")], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    for name in ("simulate_utilisation.png", "simulate_waits.png"):
        assert (tmp_path / "plots" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "simulate_utilisation.png, simulate_waits.png" in out.stderr
