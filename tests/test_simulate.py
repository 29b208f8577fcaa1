"""`policy-scheduler simulate` (issue 29): a trace replayed three ways with a virtual clock."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from engine.simulate import Job, NodeShape, Replay, Trace, TraceError, kai_starvation, replay, trace_of, utilisation, waits


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


def test_one_at_a_time_places_in_queue_order() -> None:
    """Two 1-GPU jobs and a 2-GPU one on one 2-GPU node: one pod at a time takes them in arrival order."""
    trace = Trace((NodeShape(1, {"cpu": "8", "nvidia.com/gpu": "2"}),), (
        Job("a", 0, 100, {"nvidia.com/gpu": "1"}), Job("b", 1, 100, {"nvidia.com/gpu": "2"}),
        Job("c", 2, 100, {"nvidia.com/gpu": "1"})))
    run = replay(trace, "one-at-a-time")
    assert run.starts == {"a": 0, "c": 2, "b": 102}  # b does not fit beside a; c does


def test_waits_and_utilisation_are_summed_per_class() -> None:
    trace = Trace((NodeShape(1, {"cpu": "8"}),), (Job("a", 0, 10, {"cpu": "8"}, kind="k"),
                                                  Job("b", 0, 10, {"cpu": "8"}, kind="k")))
    run = Replay("batch", {"a": 0.0, "b": 10.0}, [(0.0, 1.0), (10.0, 1.0), (20.0, 0.0), (40.0, 0.0)])
    (k,) = waits(trace, run)
    assert (k.jobs, k.started, k.p50, k.p95, k.most) == (2, 2, 5.0, 10.0, 10.0)
    assert utilisation(run) == pytest.approx(0.5)


def test_a_bad_trace_says_where() -> None:
    for doc, words in (([], "a mapping"), ({"nodes": [{"count": 1}], "jobs": []}, "allocatable"),
                       ({"nodes": [{"count": 1, "allocatable": {"cpu": 1}}], "jobs": []}, "no nodes or no jobs")):
        with pytest.raises(TraceError, match=words):
            trace_of(doc, "t.yaml")


def test_the_command(tmp_path) -> None:
    out = subprocess.run([sys.executable, "-m", "engine", "simulate", "--generate", "kai", "--jobs", "10", "-o", "json"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert set(report) == {"one-at-a-time", "batch", "batch-time"}
    assert all(0 < r["utilisation"] <= 1 for r in report.values())
    bad = tmp_path / "t.yaml"
    bad.write_text("jobs: [1, 2]\n")
    out = subprocess.run([sys.executable, "-m", "engine", "simulate", str(bad)], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 2 and "t.yaml" in out.stderr and "Traceback" not in out.stderr
