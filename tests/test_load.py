"""Loading snapshots: every input shape kubectl produces, and a clear error for every user mistake."""

from __future__ import annotations

import json

import pytest
import yaml

from engine.reading.load import InputError
from engine.reading.manifests import load_cluster, load_yaml_documents, parse_documents
from testkit.manifests import node, pod, podgroup


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def as_yaml(*docs):
    return yaml.safe_dump_all(docs, sort_keys=False)


def test_multi_document_yaml(tmp_path):
    path = write(tmp_path, "c.yaml", as_yaml(node("a"), pod("p"), pod("q", node_name="a")))
    cluster = load_cluster([path])
    assert [n.name for n in cluster.nodes] == ["a"]
    assert [p.key for p in cluster.pending] == ["default/p"]
    assert [p.key for p in cluster.bound] == ["default/q"]


def test_kind_list_and_json(tmp_path):
    lst = {"apiVersion": "v1", "kind": "List", "items": [node("a"), pod("p"), podgroup("g", 2)]}
    for name, text in (("l.yaml", yaml.safe_dump(lst)), ("l.json", json.dumps(lst))):
        cluster = load_cluster([write(tmp_path, name, text)])
        assert len(cluster.nodes) == 1 and len(cluster.pending) == 1
        assert cluster.pod_groups["default/g"].min_member == 2


def test_stdin(monkeypatch):
    import io
    monkeypatch.setattr("sys.stdin", io.StringIO(as_yaml(node("a"), pod("p"))))
    assert len(load_cluster(["-"]).pending) == 1


def test_other_kinds_are_ignored_with_a_note(tmp_path):
    svc = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "s", "namespace": "default"}}
    cluster = load_cluster([write(tmp_path, "c.yaml", as_yaml(node("a"), svc, svc | {"metadata": {"name": "t"}}))])
    assert "ignored 2 object(s) of kind ConfigMap" in cluster.notes


def test_scheduler_name_selects_pending_pods(tmp_path):
    path = write(tmp_path, "c.yaml", as_yaml(node("a"), pod("mine"), pod("other", scheduler="batch")))
    assert [p.name for p in load_cluster([path]).pending] == ["mine"]
    assert [p.name for p in load_cluster([path], scheduler_name="batch").pending] == ["other"]


def test_terminal_pods_neither_pending_nor_bound(tmp_path):
    path = write(tmp_path, "c.yaml", as_yaml(node("a"), pod("done", node_name="a", phase="Succeeded"),
                                             pod("failed", phase="Failed")))
    cluster = load_cluster([path])
    assert cluster.bound == [] and cluster.pending == []


def test_quantities_and_requests(tmp_path):
    n = node("a", cpu="3500m", memory="1.5Gi", **{"nvidia.com/gpu": "2"})
    p = pod("p", cpu="0.25", memory="128M")
    cluster = load_cluster([write(tmp_path, "c.yaml", as_yaml(n, p))])
    assert cluster.nodes[0].allocatable == {"cpu": 3500, "memory": 1610612736, "pods": 110, "nvidia.com/gpu": 2}
    assert cluster.pending[0].requests == {"cpu": 250, "memory": 128_000_000, "pods": 1}


def test_limits_default_requests(tmp_path):
    p = pod("p", cpu=None)
    p["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "2"}}
    cluster = load_cluster([write(tmp_path, "c.yaml", as_yaml(p))])
    assert cluster.pending[0].requests["cpu"] == 2000


@pytest.mark.parametrize(
    "docs,message",
    [
        ([pod("p", cpu="12XYZ")], 'Pod default/p: spec.containers[0].resources.requests.cpu: '),
        ([pod("p") | {"spec": {"schedulerName": "policy-scheduler", "containers": []}}],
         "Pod default/p: pod has no containers"),
        ([node("a"), node("a")], "Node a: duplicate object"),
        ([pod("p"), pod("p")], "Pod default/p: duplicate object"),
        ([node("a", cpu="lots")], "Node a: status.allocatable.cpu: "),
        ([node("a", taints=[{"key": "k", "effect": "Sometimes"}])], "Node a: spec.taints[0]: unknown taint effect 'Sometimes'"),
        ([pod("p", affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "Like", "values": ["x"]}]}]}}})],
         "unknown operator 'Like'"),
        ([{"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "x"}}], "Pod without metadata.name"),
    ],
)
def test_bad_objects_name_file_object_and_problem(tmp_path, docs, message):
    path = write(tmp_path, "bad.yaml", as_yaml(*docs))
    with pytest.raises(InputError) as err:
        load_cluster([path])
    assert str(err.value).startswith(path + ":")  # file:line: when the loader knows the line
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_bad_quantity_message_says_what_is_wrong(tmp_path):
    path = write(tmp_path, "bad.yaml", as_yaml(pod("p", cpu="12XYZ")))
    with pytest.raises(InputError, match=r"12XYZ"):
        load_cluster([path])


def test_invalid_yaml_has_line_and_column(tmp_path):
    path = write(tmp_path, "bad.yaml", "kind: Node\nmetadata:\n  name: [a\n")
    with pytest.raises(InputError, match=r"bad\.yaml:\d+:\d+: invalid YAML"):
        load_cluster([path])


def test_invalid_json_has_line_and_column():
    with pytest.raises(InputError, match=r"x\.json:1:\d+: invalid JSON"):
        parse_documents('{"kind": "List", "items": [}', "x.json")


def test_unreadable_file(tmp_path):
    with pytest.raises(InputError, match="cannot read file"):
        load_cluster([str(tmp_path / "missing.yaml")])


def test_non_object_document():
    with pytest.raises(InputError, match="not a Kubernetes object"):
        parse_documents("just a string\n", "s.yaml")


@pytest.mark.parametrize(
    "text",
    [
        "a: 1\nb: 'x'\nc: yes\nd:\ne: 1.5\nf: 2024-01-01T00:00:00Z\ng: [1, '2', true, null, ~]\n",
        "h: &x {k: v}\ni: *x\nj: |\n  block\nk: 0x10\nl: '010'\nm: 010\nn: .inf\no: -3\np: +4\n",
        "---\n---\nfoo\n---\n- 1\n- [2, {q: r}]\n",
        'x: !!str 123\ny: !!int "7"\nz: "true"\n',
    ],
)
def test_fast_yaml_loader_matches_safe_load(text):
    assert load_yaml_documents(text) == list(yaml.safe_load_all(text))
