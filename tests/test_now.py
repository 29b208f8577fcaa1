"""The plan's "now" in plain sight (issue 47, point 6): which now a plan was made at and where it came from (`--now`,
a live cluster's clock, the snapshot's newest pod time) in the table and `stats.now`; a pod time far beyond the rest
does not silently become now; `explain` takes `--now`.

The snapshot: one node of 2 GPUs, both held by 1-GPU pods that started at 11:30 with a one-hour bound (they end at
12:30), a pending 1-GPU pod created at 12:00 — and, in some tests, a pod whose creation time is in 2062 (a clock set
wrong, a hand-edited year). Taken as now, 2062 would end both running pods and place the pending one at once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import yaml

from engine.reading.load import build_cluster
from engine.time.timeline import CLOCK, FLAG, OUTLIER_GAP, SNAPSHOT, choose_now, first_outlier, seconds, snapshot_now
from testkit.manifests import node, pod

GPU = "nvidia.com/gpu"
NOON = "2026-11-25T12:00:00Z"
FAR = "2062-11-25T12:00:00Z"


def gpu_pod(name: str, created: str, *, node_name: str | None = None, started: str | None = None) -> dict:
    doc = pod(name, cpu="100m", requests={GPU: "1"}, node_name=node_name)
    doc["metadata"]["creationTimestamp"] = created
    if node_name is not None:
        doc["spec"]["activeDeadlineSeconds"] = 3600
        doc["status"]["startTime"] = started
    return doc


def docs(*extra: dict) -> list[dict]:
    running = [gpu_pod(f"run-{k}", "2026-11-25T11:29:00Z", node_name="n1", started="2026-11-25T11:30:00Z")
               for k in range(2)]
    return [node("n1", cpu="8", **{GPU: "2"}), *running, gpu_pod("wait", NOON), *extra]


def far_pod() -> dict:
    """A small pod running on n1, created in 2062."""
    doc = pod("from-the-future", cpu="1m", node_name="n1")
    doc["metadata"]["creationTimestamp"] = FAR
    return doc


def cli(tmp_path, *args: str) -> subprocess.CompletedProcess:
    path = tmp_path / "cluster.yaml"
    if not path.exists():
        path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": docs(far_pod())}))
    return subprocess.run([sys.executable, "-m", "engine", args[0], "--cluster", str(path), *args[1:]],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"})


def test_a_pod_time_far_beyond_the_rest_is_left_out_and_named() -> None:
    cluster = build_cluster([(f"doc{i}", d) for i, d in enumerate(docs(far_pod()))])
    now = snapshot_now(cluster)
    assert now is not None and (now.at, now.source) == (seconds(NOON), SNAPSHOT)
    assert (now.pod, now.field) == ("default/wait", "creationTimestamp")
    assert now.outliers == (("default/from-the-future", "creationTimestamp", seconds(FAR)),)
    (note,) = now.notes()
    assert "default/from-the-future" in note and FAR in note and "--now" in note
    assert "1 pod time(s) far beyond the rest left out" in now.words()
    plain = snapshot_now(build_cluster([(f"doc{i}", d) for i, d in enumerate(docs())]))
    assert plain is not None and plain.at == seconds(NOON) and not plain.outliers and not plain.notes()


def test_now_comes_from_the_flag_else_the_clock_else_the_snapshot() -> None:
    cluster = build_cluster([(f"doc{i}", d) for i, d in enumerate(docs())])
    flag, clock = choose_now(cluster, 1.0, 2.0), choose_now(cluster, None, 2.0)
    assert flag is not None and (flag.at, flag.source, flag.words()) == (1.0, FLAG, "1970-01-01T00:00:01Z, from --now")
    assert clock is not None and (clock.at, clock.source, clock.to_dict()) == (2.0, CLOCK, {
        "at": "1970-01-01T00:00:02Z", "source": "clock"})
    assert choose_now(cluster) == snapshot_now(cluster)
    assert choose_now(build_cluster([("n", node("a")), ("p", pod("p"))])) is None  # no pod times, no flag, no clock


def test_what_counts_as_far_beyond_the_rest() -> None:
    hour, day = 3600.0, 24 * 3600.0
    assert first_outlier([0, 60, 120, 10 * 365 * day]) == 3  # within minutes, then years later
    assert first_outlier([0, 60, 120, 10 * 365 * day, 10 * 365 * day + 60]) == 3  # two together, far ahead
    # a cluster busy for a month, then quiet for two days: the newest pod is now, not an outlier
    month = [k * day for k in range(30)]
    assert first_outlier([*month, 31 * day]) == 31
    # within a day of the rest is never far, however tight the rest is
    assert first_outlier([0, 1, 2, OUTLIER_GAP]) == 4 and first_outlier([0, 0, 0, OUTLIER_GAP + hour]) == 3
    # the rest must outnumber what is left out: two pods a year apart say nothing about which is right
    assert first_outlier([0, 365 * day]) == 2 and first_outlier([0, 0, 365 * day, 365 * day]) == 4
    assert first_outlier([]) == 0 and first_outlier([5.0]) == 1


def test_dry_run_says_which_now_and_where_it_came_from(tmp_path) -> None:
    out = cli(tmp_path, "dry-run", "-o", "json")
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    assert plan["stats"]["now"] == {"at": NOON, "source": "snapshot", "pod": "default/wait",
                                    "field": "creationTimestamp", "ignored": {"default/from-the-future": FAR}}
    assert not plan["assignments"]  # 2062 is not now: both running pods still hold the GPUs
    assert plan["reservations"]["default/wait"]["start"] == "2026-11-25T12:30:00Z"
    assert "note: now is 2026-11-25T12:00:00Z" in out.stderr and "default/from-the-future" in out.stderr
    given = json.loads(cli(tmp_path, "dry-run", "-o", "json", "--now", "2026-11-25T12:45:00Z").stdout)
    assert given["stats"]["now"] == {"at": "2026-11-25T12:45:00Z", "source": "flag"}
    # both running pods are past their bound (ending: they hold their room until they are gone), so from 12:45
    expected = {**given.get("reservations", {}), **given.get("estimates", {})}
    assert expected["default/wait"]["start"] == "2026-11-25T12:45:00Z"
    table = cli(tmp_path, "dry-run", "-q")
    assert table.returncode == 0, table.stderr
    assert f"now: {NOON}, the snapshot's newest pod time (default/wait's creationTimestamp; 1 pod time(s) far " \
           "beyond the rest left out)" in " ".join(table.stdout.split())


def test_a_snapshot_without_pod_times_says_it_has_no_now(tmp_path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [node("a"), pod("p")]}))
    table = cli(tmp_path, "dry-run", "-q")
    assert "now: none known" in table.stdout and "--now sets one" in table.stdout
    assert "now" not in json.loads(cli(tmp_path, "dry-run", "-o", "json").stdout)["stats"]


def test_explain_takes_now(tmp_path) -> None:
    snapshot_time = json.loads(cli(tmp_path, "explain", "default/wait", "-o", "json").stdout)
    assert snapshot_time["node"] is None and snapshot_time["now"]["at"] == NOON
    assert any("2026-11-25T12:30:00Z" in r for r in snapshot_time["unschedulable"])  # when room frees
    later = cli(tmp_path, "explain", "default/wait", "-o", "json", "--now", FAR)  # the far pod's time, if asked
    assert later.returncode == 0, later.stderr
    shown = json.loads(later.stdout)
    assert shown["now"] == {"at": FAR, "source": "flag"}
    assert not any("2026-11-25T12:30:00Z" in r for r in shown["unschedulable"])  # the running pods are long over
    table = cli(tmp_path, "explain", "default/wait", "--now", "2026-11-25T12:45:00Z")
    assert "now: 2026-11-25T12:45:00Z, from --now" in table.stdout
    bad = cli(tmp_path, "explain", "default/wait", "--now", "noon")
    assert bad.returncode == 2 and "--now" in bad.stderr and "Traceback" not in bad.stderr
