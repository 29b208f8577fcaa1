"""build_cluster reads a snapshot in one pass: an object the model cannot read is refused with a typed reference
to it, the rest converted without it; strict callers (the CLI) get the first error, told how many more."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from engine.cli import main
from engine.load import InputError, build_cluster
from engine.model import ObjectRef
from testkit.manifests import node, pod, podgroup, priority_class


def bad_docs() -> list[dict]:
    budget = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "pdb", "namespace": "ns"},
              "spec": {"minAvailable": "lots", "selector": {"matchLabels": {"app": "x"}}}}
    return [node("n1"), node("broken", cpu="lots"), {**priority_class("high", 1), "value": "very"},
            {**podgroup("pg", 1), "spec": {"minMember": "many"}}, budget,
            pod("good"), pod("classy", priorityClassName="high"), pod("bad", cpu="lots", ns="ns"),
            {"kind": "Pod", "metadata": {}}, node("n1")]


def test_every_bad_object_is_refused_by_kind_and_name_and_the_rest_is_built() -> None:
    cluster = build_cluster([(f"doc{i}", d) for i, d in enumerate(bad_docs())], strict=False)
    refs = [r.ref for r in cluster.refused]
    assert refs == [ObjectRef("Node", "", "broken"), ObjectRef("PriorityClass", "", "high"),
                    ObjectRef("PodGroup", "default", "pg"), None, ObjectRef("Node", "", "n1"),
                    ObjectRef("Pod", "ns", "bad"), ObjectRef("PodDisruptionBudget", "ns", "pdb")]
    assert [r.source for r in cluster.refused] == ["doc1", "doc2", "doc3", "doc8", "doc9", "doc7", "doc4"]
    assert cluster.refused[4].message.endswith("duplicate object (it appears more than once)")  # the first n1 stays
    assert [n.name for n in cluster.nodes] == ["n1"] and [p.name for p in cluster.pending] == ["good"]
    assert "PriorityClass 'high' not found" in cluster.skipped["default/classy"]  # as if the class were absent


def test_strict_raises_the_first_refusal_and_counts_the_rest() -> None:
    with pytest.raises(InputError) as raised:
        build_cluster([(f"doc{i}", d) for i, d in enumerate(bad_docs())])
    assert raised.value.ref == ObjectRef("Node", "", "broken") and raised.value.source == "doc1"
    assert str(raised.value).startswith("doc1: Node broken: ") and raised.value.more == 6


def test_the_cli_names_the_first_bad_object_and_how_many_more(tmp_path) -> None:
    import yaml

    snapshot = tmp_path / "snap.yaml"
    snapshot.write_text(yaml.safe_dump_all(bad_docs()))
    out = CliRunner().invoke(main, ["dry-run", "--cluster", str(snapshot)])
    assert out.exit_code == 2
    lines = out.stderr.strip().splitlines()
    assert lines[0].startswith(f"policy-scheduler: error: {snapshot}") and "Node broken" in lines[0]
    assert lines[1] == "policy-scheduler: error: … and 6 more object(s) that cannot be read"
