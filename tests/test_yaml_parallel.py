"""The parallel parse of big kubectl Lists gives what the serial parse gives, or steps aside."""

from __future__ import annotations

import pytest
import yaml

from engine.reading import manifests
from engine.reading.load import InputError, build_cluster
from engine.reading.yaml_parallel import parse_list, prune
from testkit.manifests import node, pod


def kubectl_list(items: list[dict]) -> str:
    """As kubectl prints it: items at column 0, then kind and metadata after them."""
    return yaml.safe_dump({"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}},
                          sort_keys=True)


def snapshot() -> list[dict]:
    items = [node(f"n{i}") for i in range(5)] + [pod(f"p{i}", labels={"app": f"a{i % 3}"}) for i in range(40)]
    items[7]["spec"]["volumes"] = [{"name": "data", "emptyDir": {}}]
    items[7]["status"] = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False"}]}
    return items


def serial(text: str) -> list:
    lines: dict[int, int] = {}
    return manifests._yaml_documents(text, lines), lines


def test_parallel_parse_equals_serial_parse_after_pruning():
    text = kubectl_list(snapshot())
    lines: dict[int, int] = {}
    fast = parse_list(text, lines, manifests._yaml_documents, workers=3, min_bytes=0)
    slow, slow_lines = serial(text)
    for item in slow[0]["items"]:
        prune(item)
    assert fast == slow
    assert sorted(lines[id(i)] for i in fast[0]["items"]) == sorted(slow_lines[id(i)] for i in slow[0]["items"])


def test_pruning_drops_only_what_scheduling_never_reads():
    docs = [("t", d) for d in snapshot()]
    pruned = [("t", yaml.safe_load(yaml.safe_dump(d))) for _, d in docs]
    for _, d in pruned:
        prune(d)
    a, b = build_cluster(docs), build_cluster(pruned)
    assert (a.nodes, a.bound, a.pending) == (b.nodes, b.bound, b.pending)


def test_a_broken_part_falls_back_to_the_serial_parse_and_its_error(monkeypatch):
    text = kubectl_list(snapshot()).replace("name: p30\n", "name: [p30\n")
    assert parse_list(text, {}, manifests._yaml_documents, workers=2, min_bytes=0) is None
    monkeypatch.setattr(manifests, "parse_list", lambda *a, **k: parse_list(*a, **k, workers=2, min_bytes=0))
    with pytest.raises(InputError) as parallel_error:
        manifests.parse_objects(text, "snap.yaml")
    monkeypatch.setattr(manifests, "parse_list", lambda *a, **k: None)
    with pytest.raises(InputError) as serial_error:
        manifests.parse_objects(text, "snap.yaml")
    assert str(parallel_error.value) == str(serial_error.value)


def test_texts_that_are_not_one_kubectl_list_are_left_to_the_serial_parse():
    multi = "---\n" + "\n---\n".join(yaml.safe_dump(d) for d in snapshot())
    assert parse_list(multi, {}, manifests._yaml_documents, workers=2, min_bytes=0) is None
    assert parse_list(yaml.safe_dump(snapshot()[0]), {}, manifests._yaml_documents, workers=2, min_bytes=0) is None


def test_pruning_keeps_what_a_converter_reads_volumes_images_and_start_times():
    """The pruner read a hand-kept list that dropped every pod's spec.volumes: on the parallel path (large YAML
    snapshots) a pod mounting a PersistentVolumeClaim lost its claim. It now drops only what engine.reading.objects lists."""
    from testkit.manifests import claim, mounts, node, pod, storage_class

    mounting = pod("mounting", volumes=mounts("data"))
    mounting["spec"]["containers"][0]["image"] = "busybox"
    mounting["status"] = {"phase": "Pending", "startTime": "2026-11-25T12:00:00Z", "conditions": [{"type": "x"}]}
    worker = node("n1")
    worker["status"]["images"] = [{"names": ["busybox"], "sizeBytes": 1}]
    docs = [("t", d) for d in (worker, storage_class("local"), claim("data"), mounting)]
    pruned = [("t", yaml.safe_load(yaml.safe_dump(d))) for _, d in docs]
    for _, d in pruned:
        prune(d)
    kept = pruned[-1][1]
    assert kept["spec"]["volumes"] == mounting["spec"]["volumes"] and kept["spec"]["containers"][0]["image"] == "busybox"
    assert kept["status"] == {"phase": "Pending", "startTime": "2026-11-25T12:00:00Z"}
    assert pruned[0][1]["status"]["images"] == worker["status"]["images"]
    a, b = build_cluster(docs), build_cluster(pruned)
    assert a.pending == b.pending and b.pending[0].claims == ("data",) and b.pending[0].volumes.waiting
