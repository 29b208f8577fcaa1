"""A large JSON snapshot: the reader gives what a plain `json.load` gives, and the whole load path reads it; and (a
`perf` test: `python -m pytest -m perf tests/test_snapshot_load_speed.py`) it loads at least as fast as `json.load`
(BENCHMARKS.md, "Loading a snapshot": 0.75x on 189 MiB), best of three each, alternating, with a margin for a shared
machine."""
from __future__ import annotations

import gc
import json
import time
from pathlib import Path

import pytest

from engine.reading.manifests import load_cluster, read_objects
from testkit.manifests import node, pod

NODES, PODS = 2000, 30000


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    items = [node(f"n{i}", labels={"topology.kubernetes.io/zone": f"z{i % 3}"}) for i in range(NODES)]
    items += [pod(f"p{i}", labels={"app": f"a{i % 50}", "pod-template-hash": f"h{i}"}, node_name=f"n{i % NODES}")
              for i in range(PODS)]
    path = tmp_path_factory.mktemp("snapshot") / "snapshot.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}, indent=4))
    assert path.stat().st_size > 20 << 20
    return path


def _engine(path: Path) -> list[tuple[str, dict]]:
    """The reader as load_cluster runs it: the collector paused."""
    gc.disable()
    try:
        return read_objects(str(path))
    finally:
        gc.enable()


def _plain(path: Path) -> list[dict]:
    with path.open() as f:
        return json.load(f)["items"]


def test_a_large_json_snapshot_reads_as_json_load_reads_it(snapshot: Path) -> None:
    assert [obj for _, obj in _engine(snapshot)] == _plain(snapshot)
    assert len(load_cluster([str(snapshot)]).bound) == PODS  # and the whole load path reads it


def _best(call, runs: int = 3) -> float:
    best = float("inf")
    for _ in range(runs):
        gc.collect()
        started = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - started)
    return best


@pytest.mark.perf
def test_a_large_json_snapshot_loads_at_least_as_fast_as_json_load(snapshot: Path) -> None:
    _plain(snapshot)
    _engine(snapshot)
    ours, theirs = _best(lambda: _engine(snapshot)), _best(lambda: _plain(snapshot))
    assert ours <= theirs * 1.15, f"engine {ours:.3f} s vs json.load {theirs:.3f} s"
