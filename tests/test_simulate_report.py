"""What `simulate` shows (issue 47, point 9): the table and the JSON use the same words, a class's name is never cut
at 80 columns, and the waits' distribution is drawn as steps with each mode told apart by dashes and markers."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from engine.time.simulate import WAIT_WORDS, Job, NodeShape, Trace, replay

LONG = "a-rather-long-class-name-for-distributed-training-jobs"


def trace_file(tmp_path) -> str:
    """Two nodes of 8 GPUs; jobs named by their size (the default class names, long) and one with a long class."""
    gpu = {"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": "1"}
    doc = {"nodes": [{"count": 2, "allocatable": {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "8"}}],
           "jobs": [{"name": "a", "arrival": 0, "runtime": 600, "requests": gpu},
                    {"name": "b", "arrival": 10, "runtime": 600, "pods": 2, "requests": {**gpu, "nvidia.com/gpu": "4"}},
                    {"name": "c", "arrival": 20, "runtime": 600, "pods": 2, "requests": {**gpu, "nvidia.com/gpu": "8"},
                     "class": LONG}]}
    path = tmp_path / "trace.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def simulate(*args: str, columns: int = 200) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine", "simulate", *args], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "COLUMNS": str(columns)})


def column(table: str, index: int) -> list[str]:
    """The cells of column `index` (0: the first), one per table line, stripped."""
    return [line.split("│")[index + 1].strip() for line in table.splitlines() if line.startswith("│")]


def test_the_table_and_the_json_use_the_same_words(tmp_path) -> None:
    path = trace_file(tmp_path)
    report = json.loads(simulate(path, "-o", "json").stdout)
    for mode in report.values():
        assert "utilisation" in mode
        assert all(tuple(c) == WAIT_WORDS for c in mode["classes"])
        assert {c["class"] for c in mode["classes"]} >= {LONG}
    table = simulate(path)
    assert table.returncode == 0, table.stderr
    header = next(line for line in table.stdout.splitlines() if line.startswith("┃"))
    assert [w.strip() for w in header.strip("┃").split("┃")] == ["mode", *WAIT_WORDS, "utilisation"]


def test_at_80_columns_no_class_name_is_cut(tmp_path) -> None:
    path = trace_file(tmp_path)
    names = {c["class"] for mode in json.loads(simulate(path, "-o", "json").stdout).values() for c in mode["classes"]}
    out = simulate(path, columns=80)
    assert out.returncode == 0, out.stderr
    assert "…" not in out.stdout, out.stdout
    assert all(len(line) <= 80 for line in out.stdout.splitlines())
    classes = "".join(column(out.stdout, 1)).replace(" ", "")  # folded or wrapped onto more lines, but whole
    for name in names:
        assert name.replace(" ", "") in classes, (name, out.stdout)
    modes = [m for m in column(out.stdout, 0) if m]
    assert modes == ["one-at-a-time", "batch", "batch-time"]  # whole, once per mode


def test_the_waits_are_drawn_as_steps_each_mode_in_its_own_dashes_and_markers() -> None:
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from engine.cli import utilisation_figure, waits_figure

    trace = Trace((NodeShape(1, {"cpu": "8"}),), tuple(Job(f"j{k}", 10.0 * k, 600, {"cpu": "4"}) for k in range(6)))
    runs = [replay(trace, mode) for mode in ("one-at-a-time", "batch", "batch-time")]
    lines = waits_figure(runs, trace).axes[0].get_lines()
    assert [line.get_label() for line in lines] == ["one-at-a-time", "batch", "batch-time"]
    assert all(line.get_drawstyle() == "steps-post" for line in lines)
    assert len({(line.get_linestyle(), line.get_marker()) for line in lines}) == 3  # identical waits stay visible
    for line, run in zip(lines, runs, strict=True):
        xs, ys = line.get_data()
        waits = sorted((run.starts[j.name] - j.arrival) / 60 for j in trace.jobs)
        assert (xs[0], ys[0]) == (0.0, 0.0) and list(xs[1:]) == waits and ys[-1] == 1.0
    steps = utilisation_figure(runs).axes[0].get_lines()
    assert len({line.get_linestyle() for line in steps}) == 3
