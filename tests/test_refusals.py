"""build_cluster reads a snapshot in one pass: an object the model cannot read is refused with a typed reference
to it, the rest converted without it; strict callers (the CLI) get the first error, told how many more."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from engine.cli import main
from engine.model.cluster import ObjectRef
from engine.reading.load import InputError, build_cluster
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


# --- apiVersions: one table of what each kind is read at ------------------------------------------------------

def test_every_kind_read_has_its_accepted_api_versions() -> None:
    from engine.reading.objects import API_VERSIONS, KINDS

    assert set(KINDS) == set(API_VERSIONS) and all(API_VERSIONS[kind] for kind in KINDS)
    assert API_VERSIONS["Pod"] == ("v1",) and API_VERSIONS["PodDisruptionBudget"] == ("policy/v1",)


@pytest.mark.parametrize("api_version", ["v2", "example.com/v1", None])
@pytest.mark.parametrize("kind", ["Node", "Pod", "Namespace", "PodGroup", "PriorityClass", "PodDisruptionBudget",
                                  "PersistentVolumeClaim", "PersistentVolume", "StorageClass", "CSINode", "Service",
                                  "ReplicaSet", "StatefulSet", "ReplicationController", "ResourceSlice", "DeviceClass",
                                  "ResourceClaim", "ResourceClaimTemplate", "DeviceTaintRule", "ElasticQuota"])
def test_an_object_at_an_api_version_its_kind_is_not_served_at_is_refused(kind, api_version) -> None:
    from engine.reading.objects import API_VERSIONS

    obj = {"kind": kind, "metadata": {"name": "x", "namespace": "ns"}}
    if api_version is not None:
        obj["apiVersion"] = api_version
    cluster = build_cluster([("snap.yaml", node("n1")), ("snap.yaml", obj)], strict=False)
    assert [r.ref for r in cluster.refused] == [ObjectRef(kind, "ns", "x")]
    message = cluster.refused[0].message
    assert message.startswith(f"snap.yaml: {kind} ns/x: apiVersion: "), message
    assert message.endswith(f"(want {', '.join(API_VERSIONS[kind])})".replace("want ", "want one of ")
                            if len(API_VERSIONS[kind]) > 1 else f"(want {API_VERSIONS[kind][0]})"), message
    assert ("missing" if api_version is None else f"{kind} is not served at '{api_version}'") in message


def test_every_accepted_api_version_is_read() -> None:
    from engine.reading.objects import API_VERSIONS

    docs = [("snap.yaml", {"apiVersion": version, "kind": kind, "metadata": {"name": f"x{i}", "namespace": "ns"}})
            for kind, versions in API_VERSIONS.items() for i, version in enumerate(versions)]
    cluster = build_cluster(docs, strict=False)
    assert not [r.message for r in cluster.refused if "apiVersion" in r.message]


def test_a_pod_at_v2_stops_the_dry_run_with_one_line_naming_it(tmp_path) -> None:
    import yaml

    snapshot = tmp_path / "snap.yaml"
    snapshot.write_text(yaml.safe_dump_all([node("n1"), {**pod("p", ns="team"), "apiVersion": "v2"}]))
    out = CliRunner().invoke(main, ["dry-run", "--cluster", str(snapshot), "-o", "json"])
    assert out.exit_code == 2 and out.stdout == ""
    [line] = out.stderr.strip().splitlines()
    assert line.startswith(f"policy-scheduler: error: {snapshot}:")
    assert line.endswith(": Pod team/p: apiVersion: Pod is not served at 'v2' (want v1)"), line


@pytest.mark.parametrize("api_version", ["scheduling.k8s.io/v1", "scheduling.k8s.io/v1alpha1", "scheduling.x-k8s.io/v2"])
def test_a_pod_group_at_an_api_version_no_release_serves_stops_the_dry_run_as_a_pod_at_v2_does(tmp_path, api_version) -> None:
    """scheduling.k8s.io serves PodGroups at v1alpha2 (1.36), v1beta1 and v1alpha3 (1.37) only: 1.38.0-beta.0's
    scheduling.k8s.io/v1 holds PriorityClasses alone, and v1alpha1 (1.35) had Workloads, no PodGroups."""
    import yaml

    snapshot = tmp_path / "snap.yaml"
    group = {**podgroup("g", 2, ns="team"), "apiVersion": api_version}
    snapshot.write_text(yaml.safe_dump_all([node("n1"), group]))
    out = CliRunner().invoke(main, ["dry-run", "--cluster", str(snapshot), "-o", "json"])
    assert out.exit_code == 2 and out.stdout == ""
    [line] = out.stderr.strip().splitlines()
    assert f": PodGroup team/g: apiVersion: PodGroup is not served at '{api_version}' (want one of " in line, line
