"""Unknown fields in a snapshot, as the apiserver's strict field validation reports them (issue 47, point 4): a note
naming the object, file, line and field by default, a whole-input error (exit 2) with --strict, in every command
that reads a snapshot; against real schemas (the client's models, the CRDs, 1.36's OpenAPI), so that maps, int-or-
string fields and every field a real cluster prints are never reported."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from engine.cli import main
from engine.reading.field_validation import schemas
from engine.reading.manifests import load_cluster
from engine.reading.objects import API_VERSIONS
from testkit import schemas as writer
from testkit.manifests import (
    NATIVE_V1ALPHA2,
    NATIVE_V1BETA1,
    native_group,
    node,
    pod,
    podgroup,
)

ROOT = Path(__file__).resolve().parents[1]
NOTE = "policy-scheduler: note: "


# in the object's order, as the apiserver's decoder meets them
TYPOS = 'unknown field "spec.containers[0].resources.request", unknown field "spec.nodeSelectr"'


def typo_pod() -> dict:
    """A pod with the two typos of the issue: `spec.nodeSelectr` and a container's `resources.request`."""
    p = pod("p", cpu="1", ns="team")
    p["spec"]["nodeSelectr"] = {"disk": "ssd"}
    p["spec"]["containers"][0]["resources"]["request"] = p["spec"]["containers"][0]["resources"].pop("requests")
    return p


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def write(tmp_path, docs: list[dict], name: str = "snap.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return str(path)


def line_of(path: str, text: str) -> int:
    return next(i for i, line in enumerate(Path(path).read_text().splitlines(), 1) if text in line)


# --- what is reported, and where ---------------------------------------------------------------------------------

def test_an_unknown_field_is_named_as_the_apiserver_names_it_with_the_object_file_and_line(tmp_path) -> None:
    path = write(tmp_path, [node("n1"), typo_pod()])
    out = run("dry-run", "--cluster", path, "-o", "json")
    assert out.exit_code == 0, out.output
    notes = [line.removeprefix(NOTE) for line in out.stderr.splitlines() if line.startswith(NOTE)]
    assert notes[0] == f"{path}:{line_of(path, 'request:')}: Pod team/p: {TYPOS}"  # the first one's line
    assert "--strict makes them an error" in notes[1]
    plan = json.loads(out.stdout)  # the typos are ignored: no selector, no requests, and the pod is placed
    assert plan["assignments"] == {"team/p": "n1"}


@pytest.mark.parametrize("command", [["dry-run", "-o", "json"], ["explain", "team/p"], ["check", "POLICY"]])
def test_with_strict_every_command_that_reads_a_snapshot_refuses_it(tmp_path, command) -> None:
    path = write(tmp_path, [node("n1"), typo_pod()])
    policy = ROOT / "policies" / "gpu-pools" / "gpu-pools.policy"  # (applies to no pod here: lint warns, no more)
    args = [str(policy) if a == "POLICY" else a for a in command]
    lenient = run(*args, "--cluster", path)
    assert lenient.exit_code == 0 and 'unknown field "spec.nodeSelectr"' in lenient.stderr, lenient.output
    out = run(*args, "--cluster", path, "--strict")
    assert out.exit_code == 2 and out.stdout == "", out.output
    [line] = out.stderr.strip().splitlines()
    assert line == f"policy-scheduler: error: {path}:{line_of(path, 'request:')}: Pod team/p: {TYPOS}"


def test_strict_names_the_first_object_and_counts_the_others(tmp_path) -> None:
    second = typo_pod()
    second["metadata"]["name"] = "q"
    path = write(tmp_path, [node("n1"), typo_pod(), second, {**podgroup("g", 2), "spec": {"minMembers": 2}}])
    out = run("dry-run", "--cluster", path, "--strict")
    assert out.exit_code == 2
    first, more = out.stderr.strip().splitlines()
    assert "Pod team/p: unknown field" in first
    assert more == "policy-scheduler: error: … and 2 more object(s) with unknown fields"


def test_lines_are_found_in_a_kubectl_list_and_in_json(tmp_path) -> None:
    listed = {"apiVersion": "v1", "kind": "List", "items": [node("n1"), typo_pod()]}
    path = write(tmp_path, [listed])
    cluster = load_cluster([path])
    assert cluster.notes[0] == f"{path}:{line_of(path, 'request:')}: Pod team/p: {TYPOS}"
    as_json = tmp_path / "snap.json"
    as_json.write_text(json.dumps(listed, indent=2))
    cluster = load_cluster([str(as_json)])
    line = line_of(str(as_json), '"request":')
    assert cluster.notes[0] == f"{as_json}:{line}: Pod team/p: {TYPOS}"


def test_a_long_list_of_objects_is_counted_not_listed(tmp_path) -> None:
    pods = []
    for i in range(8):
        p = typo_pod()
        p["metadata"]["name"] = f"p{i}"
        pods.append(p)
    notes = load_cluster([write(tmp_path, [node("n1"), *pods])]).notes
    assert [n for n in notes if "Pod team/" in n] == notes[:5]
    assert notes[5] == "… and 3 more object(s) with unknown fields"


# --- what is not reported: maps, free fields, every field real snapshots hold --------------------------------------

def test_maps_and_free_fields_take_any_key() -> None:
    check = schemas()
    p = pod("p", cpu="1", labels={"any.example.com/key": "v"}, nodeSelector={"whatever": "x"},
            requests={"example.com/widget": "2"})
    p["metadata"]["annotations"] = {"a": "b"}
    budget = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "b", "namespace": "ns"},
              "spec": {"maxUnavailable": "50%", "selector": {"matchLabels": {"app": "x"}}}}
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c", "namespace": "ns"},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}],
                                  "config": [{"opaque": {"driver": "d", "parameters": {"anything": {"at": "all"}}}}]}}}
    assert [check.unknown_fields(o) for o in (p, budget, claim)] == [[], [], []]
    assert check.unknown_fields({**budget, "spec": {"maxUnavailabel": 1}}) == ["spec.maxUnavailabel"]
    assert check.unknown_fields({**claim, "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
        "deviceClassName": "gpu", "count": 1, "selector": []}}]}}}) == ["spec.devices.requests[0].exactly.selector"]


def test_custom_resources_are_checked_against_their_crds_and_1_36_groups_against_1_36s_openapi() -> None:
    check = schemas()
    assert check.unknown_fields(podgroup("g", 2)) == []
    assert check.unknown_fields({**podgroup("g", 2), "spec": {"minMember": 2, "minResource": {}}}) == ["spec.minResource"]
    assert check.unknown_fields({**podgroup("g", 2), "status": {"anything": 1}}) == []  # our CRD keeps status free
    quota = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota", "metadata": {"name": "q", "namespace": "team"},
             "spec": {"min": {"cpu": "1"}, "max": {"cpu": "2"}}, "status": {"used": {"cpu": "1"}}}
    assert check.unknown_fields(quota) == []
    assert check.unknown_fields({**quota, "spec": {"mx": {"cpu": "1"}}}) == ["spec.mx"]
    alpha, beta = native_group("a", 2, api_version=NATIVE_V1ALPHA2), native_group("b", 2, api_version=NATIVE_V1BETA1)
    alpha["spec"]["podGroupTemplateRef"] = {"workload": {"workloadName": "w", "podGroupTemplateName": "t"}}
    beta["spec"]["workloadRef"] = {"workloadName": "w", "templateName": "t"}
    assert check.unknown_fields(alpha) == check.unknown_fields(beta) == []
    alpha["spec"]["workloadRef"], beta["spec"]["podGroupTemplateRef"] = beta["spec"]["workloadRef"], {}
    assert (check.unknown_fields(alpha), check.unknown_fields(beta)) == (["spec.workloadRef"], ["spec.podGroupTemplateRef"])
    assert check.unknown_fields({**pod("p"), "metadata": {"name": "p", "labells": {}}}) == ["metadata.labells"]


def _repository_snapshots():
    for path in [ROOT / "engine" / "data" / "demo-cluster.yaml", *sorted((ROOT / "tests" / "cases").rglob("*.yaml*")),
                 *sorted((ROOT / "policies").rglob("*_test.yaml"))]:
        text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
        for doc in yaml.safe_load_all(text):
            yield from _objects(path, doc)


def _objects(path, doc):
    if isinstance(doc, list):
        for d in doc:
            yield from _objects(path, d)
    elif isinstance(doc, dict):
        if "apiVersion" in doc and "kind" in doc and "metadata" in doc:
            yield path, doc
        for key in ("items", "cluster", "cases"):
            if isinstance(doc.get(key), (list, dict)):
                yield from _objects(path, doc[key])


def test_no_snapshot_in_the_repository_has_an_unknown_field() -> None:
    """The demo, the test cases (a 1,500-node export among them) and the policy library's test clusters: real and
    realistic objects, every field of which the schemas must know."""
    check = schemas()
    found = [(str(path.relative_to(ROOT)), obj["kind"], p) for path, obj in _repository_snapshots()
             for p in check.unknown_fields(obj)]
    assert found == []


# --- the schemas are the sources' -----------------------------------------------------------------------------

def test_the_schemas_file_is_what_the_client_the_crds_and_1_36s_openapi_say() -> None:
    """engine/data/schemas.json, written by testkit/schemas.py (`make schemas`): regenerated here from the installed
    client, deploy/'s CRDs and (when the Go module cache has it) Kubernetes 1.36.3's OpenAPI."""
    documents = {gv: writer.openapi_document(gv) for gv in writer.OPENAPI}
    assert writer.render(writer.build(API_VERSIONS, documents)) == writer.OUT.read_text(), \
        "engine/data/schemas.json is out of date: run `make schemas` and commit it"


def test_every_kind_read_has_a_schema() -> None:
    """Every apiVersion and kind the model reads is checked: none is left without a schema."""
    content = json.loads(writer.OUT.read_text())
    assert {key for key, entry in content["kinds"].items() if entry["type"] is None} == set()
    assert set(content["kinds"]) == {f"{v}/{k}" for k, versions in API_VERSIONS.items() for v in versions}
