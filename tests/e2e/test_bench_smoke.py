"""Smoke check of the side-by-side benchmark (bench/compare.py): it runs every scheduler against the real
control plane and writes its report (a section with every run, linking its plots), its PNG plots and
results.json (policy-scheduler's cycles read from its /metrics). No performance threshold: CI's machine is not
the benchmark's.

Builds scheduler-plugins' kube-scheduler on first use (tests/e2e/coscheduling/build.sh, about 5 minutes),
like the control plane fixture builds its binaries. Starts control planes of its own (one per workload), not
the session's, and stops everything it started.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from testkit import controlplane

REPO = Path(__file__).resolve().parents[2]
SCHEDULERS = ("policy-scheduler", "kube-scheduler", "kube-binpack", "coscheduling", "kube-workload")
PLOTS = ("compare_throughput.png", "compare_tight_packing.png", "compare_gangs.png", "compare_solve_time.png")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# the code paths: stream and batch arrival, gangs, a policy ConfigMap for policy-scheduler, DRA claims and
# native PodGroups (made afresh and cleared for every turn), ElasticQuotas with pods created bound for every turn
# (what capacity-scheduling, which runs only there, reclaims); issue 28's native gangs of scheduler_perf's gang suite
# and partitionable devices, in the API of the release the control plane runs
WORKLOADS = ("basic", "tight-packing", "gangs", "cost", "gpu-dra", "tenants", "tenants-reclaim", "gangs-of-3",
             "dra-partitionable")
QUOTA_WORKLOADS = {"tenants": "capacity-scheduling", "tenants-reclaim": "capacity-scheduling"}
EXPECTED = {(w, s) for w in WORKLOADS for s in SCHEDULERS} | set(QUOTA_WORKLOADS.items())
TIMEOUT_S = 1800  # a cold scheduler-plugins build included


def test_compare_quick_mode_writes_a_report_for_every_scheduler(tmp_path: Path) -> None:
    report = tmp_path / "report.md"
    report.write_text("# Benchmarks\n\nhand-written text that must survive\n")
    argv = [sys.executable, str(REPO / "bench" / "compare.py"), "--mode", "quick", "--nodes", "10", "--idle", "3",
            "--report", str(report), "--plots", str(tmp_path / "plots"), "--out", str(tmp_path / "out")]
    for workload in WORKLOADS:
        argv += ["-w", workload]
    result = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-8000:]

    text = report.read_text()
    assert f"Kubernetes {controlplane.kube_version()}: control plane and kube-scheduler." in text
    assert text.startswith("# Benchmarks\n\nhand-written text that must survive\n")
    section = text.split("<!-- compare:start", 1)[1].split("<!-- compare:end -->", 1)[0]
    rows = re.findall(r"^\| ([a-z0-9-]+) \| (?:stream|batch)[^|]* \| 10 \| ([a-z-]+) \| (\d+)/(\d+) \|", section,
                      re.M)  # "Everything"
    assert {(w, s) for w, s, _, _ in rows} == EXPECTED, section
    assert all(int(pending) > 0 for _, _, _, pending in rows)
    assert "⚠" not in section and "Failed runs" not in section, section
    for name in PLOTS:
        assert (tmp_path / "plots" / name).stat().st_size > 0
        assert (tmp_path / "plots" / name).read_bytes().startswith(PNG_SIGNATURE), name
        assert f"(plots/{name})" in section, f"{name} not linked from the report:\n{section}"

    results = list((tmp_path / "out").glob("run-*/results.json"))
    assert len(results) == 1, results
    runs = json.loads(results[0].read_text())
    assert sorted((r["workload"], r["scheduler"]) for r in runs) == sorted(EXPECTED)
    assert not [r["error"] for r in runs if r["error"]]
    for r in runs:  # the apiserver's share, and no physical device promised twice
        assert r["apiserver_cpu_s"] > 0 and r["scheduler_cpu_s"] > 0, r
        assert (r["devices_overcommitted"] == 0) if r["workload"] in ("gpu-dra", "dra-partitionable") else True, r
    for r in runs:  # per tenant figures where there are quotas, and the tables that show them
        assert (r["tenants"] is not None) == (r["workload"] in QUOTA_WORKLOADS), r
    assert "#### Per tenant" in section and "| tenants-reclaim | 10 | tenant-b |" in section, section
    reclaim = {r["scheduler"]: r for r in runs if r["workload"] == "tenants-reclaim"}
    assert reclaim["capacity-scheduling"]["preemptions"] > 0, reclaim["capacity-scheduling"]  # it reclaims
    assert reclaim["kube-scheduler"]["placed"] == 0 and reclaim["kube-scheduler"]["preemptions"] == 0
    for r in runs:  # policy-scheduler's cycles come from its /metrics; the others have none
        if r["scheduler"] == "policy-scheduler":
            assert r["batches"] >= 1 and r["batch_pods"] >= r["placed"] and r["solve_s"] is not None, r
        else:
            assert r["batches"] is None and r["solve_s"] is None, r


def test_workload_trace_replays_jobs_jobsets_pytorchjobs_and_rayclusters_for_both_schedulers(tmp_path: Path) -> None:
    """bench/workload_trace.py at a tiny size (4 nodes, 8 workloads running 2-4 s, the CRDs from their pinned
    manifests): both schedulers replay the trace and the table has a row for each; with `gang by workload` every
    workload starts whole (each fits the empty cluster; --idle outlasts the 10 s backoff) and none is left partly
    started."""
    argv = [sys.executable, str(REPO / "bench" / "workload_trace.py"), "--nodes", "4", "--workloads", "8",
            "--runtime", "2", "4", "--idle", "12", "--timeout", "300", "--out", str(tmp_path)]
    result = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=900, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-8000:]
    rows = re.findall(r"^\| (policy-scheduler|kube-scheduler) \| (\d+)/8 \|", result.stdout, re.M)
    assert sorted(s for s, _ in rows) == ["kube-scheduler", "policy-scheduler"], result.stdout
    (results,) = tmp_path.glob("run-*/results.json")
    figures = {r["scheduler"]: r for r in json.loads(results.read_text())["rows"]}
    ours = figures["policy-scheduler"]
    assert (ours["whole"], ours["ended"], ours["partial_end"], ours["error"]) == (8, 8, 0, ""), ours
    assert figures["kube-scheduler"]["pods_bound"] > 0 and not figures["kube-scheduler"]["error"], figures
    assert (tmp_path / results.parent.name / "trace.yaml").is_file()
