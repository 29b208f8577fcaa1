"""A large JSON snapshot loads at least as fast as a plain `json.load` of it (BENCHMARKS.md, "Loading a
snapshot": 0.75x on 189 MiB). Best of three each, alternating, with a margin for a shared machine."""
from __future__ import annotations

import gc
import json
import time

from engine.manifests import read_objects
from testkit.manifests import node, pod


def _best(call, runs: int = 3) -> float:
    best = float("inf")
    for _ in range(runs):
        gc.collect()
        started = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - started)
    return best


def test_a_large_json_snapshot_loads_at_least_as_fast_as_json_load(tmp_path) -> None:
    from engine.manifests import load_cluster

    items = [node(f"n{i}", labels={"topology.kubernetes.io/zone": f"z{i % 3}"}) for i in range(2000)]
    items += [pod(f"p{i}", labels={"app": f"a{i % 50}", "pod-template-hash": f"h{i}"}, node_name=f"n{i % 2000}")
              for i in range(30000)]
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}, indent=4))
    assert path.stat().st_size > 20 << 20

    def engine() -> None:  # the reader as load_cluster runs it: the collector paused
        gc.disable()
        try:
            assert len(read_objects(str(path))) == len(items)
        finally:
            gc.enable()

    def plain() -> None:
        with path.open() as f:
            assert len(json.load(f)["items"]) == len(items)

    plain()
    engine()
    ours, theirs = _best(engine), _best(plain)
    assert ours <= theirs * 1.15, f"engine {ours:.3f} s vs json.load {theirs:.3f} s"
    assert len(load_cluster([str(path)]).bound) == 30000  # and the whole load path reads it
