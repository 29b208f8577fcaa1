"""Bad input of every shape a user produces: one clear line naming file, object and field, exit 2, no traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from engine.reading.load import InputError
from engine.reading.manifests import load_cluster, load_yaml_documents, parse_documents
from testkit.manifests import node, pod, podgroup


def cli(*args: str, stdin: str | bytes | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "300", **(env or {})}
    data = stdin.encode() if isinstance(stdin, str) else stdin
    out = subprocess.run([sys.executable, "-m", "engine", *args], input=data, capture_output=True, timeout=120, env=env)
    return subprocess.CompletedProcess(out.args, out.returncode, out.stdout.decode(errors="replace"),
                                       out.stderr.decode(errors="replace"))


def write(tmp_path, name: str, text: str | bytes) -> str:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return str(path)


def as_yaml(*docs) -> str:
    return yaml.safe_dump_all(docs, sort_keys=False)


def assert_clean_error(out: subprocess.CompletedProcess, *fragments: str) -> str:
    """Exit 2, one line on stderr, no Python leaking through; returns that line."""
    assert out.returncode == 2, (out.returncode, out.stdout[-500:], out.stderr[-2000:])
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr[-2000:]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    for leak in ("object has no attribute", "invalid literal for int()", "NoneType", "Error:"):
        assert leak not in lines[0], lines[0]
    return lines[0]


# --- empty input -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", ["", "---\n", "---\n---\n...\n", "# only a comment\n", "\n\n"])
def test_empty_file_is_an_error(tmp_path, text):
    path = write(tmp_path, "empty.yaml", text)
    assert_clean_error(cli("dry-run", "--cluster", path, "-o", "json"), path, "no Kubernetes objects")


def test_empty_stdin_is_an_error():
    assert_clean_error(cli("dry-run", "--cluster", "-", "-o", "json", stdin=""), "<stdin>", "no Kubernetes objects")


def test_empty_list_is_a_valid_empty_snapshot(tmp_path):
    """`kubectl get pods -o yaml` on an empty namespace prints a List without items: nothing to do, not an error."""
    path = write(tmp_path, "c.yaml", yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": []}))
    out = cli("dry-run", "--cluster", path, "-o", "json")
    assert out.returncode == 0, out.stderr


def test_pods_without_nodes_warn(tmp_path):
    path = write(tmp_path, "c.yaml", as_yaml(pod("p")))
    cluster = load_cluster([path])
    assert any("no Nodes" in n for n in cluster.notes), cluster.notes
    out = cli("dry-run", "--cluster", path, "-o", "json")
    assert out.returncode == 0 and "no Nodes" in out.stderr


def test_node_without_status_warns(tmp_path):
    bare = node("bare")
    del bare["status"]
    cluster = load_cluster([write(tmp_path, "c.yaml", as_yaml(node("a"), bare, pod("p")))])
    assert any("Node bare" in n and "status" in n for n in cluster.notes), cluster.notes


# --- tracebacks seen -----------------------------------------------------------------------------------------

def test_huge_quantity_is_rejected(tmp_path):
    path = write(tmp_path, "c.yaml", as_yaml(node("a"), pod("p", cpu="1e400")))
    assert_clean_error(cli("dry-run", "--cluster", path), path, "Pod default/p",
                       "spec.containers[0].resources.requests.cpu", "too large")


def test_huge_node_capacity_is_rejected(tmp_path):
    path = write(tmp_path, "c.yaml", as_yaml(node("a", memory="1e30"), pod("p")))
    assert_clean_error(cli("dry-run", "--cluster", path), path, "Node a", "status.allocatable.memory", "too large")


def test_deep_yaml_has_a_positioned_depth_error(tmp_path):
    p = pod("p")
    text = as_yaml(node("a"), p).replace("labels: {}", "labels: {x: " + "[" * 5000 + "]" * 5000 + "}")
    path = write(tmp_path, "deep.yaml", text)
    # libyaml >= 0.2.6 (PyYAML 6.0.4's wheels) stops at its own depth limit before our MAX_DEPTH: either message
    line = assert_clean_error(cli("dry-run", "--cluster", path))
    assert "nested more than" in line or "maximum nesting depth" in line, line
    assert line.startswith(f"policy-scheduler: error: {path}:") and line.split(":")[3].isdigit(), line


def test_deep_json_has_a_positioned_depth_error(tmp_path):
    path = write(tmp_path, "deep.json", "[" * 100_000)
    line = assert_clean_error(cli("dry-run", "--cluster", path), "nested more than")
    assert line.startswith(f"policy-scheduler: error: {path}:1:"), line


def test_moderately_deep_json_is_rejected_too(tmp_path):
    obj = {"kind": "List", "items": [node("a")]}
    obj["items"][0]["metadata"]["annotations"] = {"x": json.loads("[" * 500 + "]" * 500)}
    path = write(tmp_path, "deep.json", json.dumps(obj))
    assert_clean_error(cli("dry-run", "--cluster", path), path, "nested more than")


@pytest.mark.parametrize("locale", ["C.UTF-8", "C"])
def test_binary_stdin(locale):
    data = bytes(range(256)) * 4
    out = cli("dry-run", "--cluster", "-", stdin=data, env={"LC_ALL": locale, "PYTHONIOENCODING": ""})
    assert_clean_error(out, "<stdin>", "UTF-8")


def test_binary_file(tmp_path):
    path = write(tmp_path, "bin.yaml", b"kind: Node\nmetadata: {name: \xff\xfe}\n")
    assert_clean_error(cli("dry-run", "--cluster", path), path, "UTF-8")


def test_control_characters_are_a_yaml_error(tmp_path):
    path = write(tmp_path, "ctl.yaml", "kind: Node\nmetadata: {name: a\x00b}\n")
    assert_clean_error(cli("dry-run", "--cluster", path), path)


def test_snapshot_with_a_bom_is_read(tmp_path):
    path = write(tmp_path, "bom.yaml", "\ufeff" + as_yaml(node("a"), pod("p")))
    assert len(load_cluster([path]).pending) == 1


# --- messages that leaked Python; every one names file, object and field path ------------------------------

PODAFF = "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"
NODEAFF = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"


def with_spec(p: dict, **spec) -> dict:
    p["spec"].update(spec)
    return p


def node_terms(*exprs) -> dict:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": list(exprs)}]}}}


def pod_term(**extra) -> dict:
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname", **extra}]}}


BAD_OBJECTS = [
    (with_spec(pod("p"), affinity=node_terms("zone In a")), f"{NODEAFF}.matchExpressions[0]", "mapping"),
    (with_spec(pod("p"), affinity=pod_term(labelSelector={"matchExpressions": ["app In x"]})),
     f"{PODAFF}.labelSelector.matchExpressions[0]", "mapping"),
    (with_spec(pod("p"), affinity=pod_term(labelSelector=["app"])), f"{PODAFF}.labelSelector", "mapping"),
    (with_spec(pod("p"), affinity=pod_term(namespaceSelector=["a", "b"])), f"{PODAFF}.namespaceSelector", "mapping"),
    (pod("p", priority="high"), "spec.priority", "integer"),
    (with_spec(pod("p"), topologySpreadConstraints=[{"maxSkew": "one", "topologyKey": "zone",
                                                      "labelSelector": {}}]),
     "spec.topologySpreadConstraints[0].maxSkew", "integer"),
    (with_spec(pod("p"), topologySpreadConstraints=["zone"]), "spec.topologySpreadConstraints[0]", "mapping"),
    (pod("p", ports=[{"containerPort": 80, "hostPort": "eighty"}]), "spec.containers[0].ports[0].hostPort", "integer"),
    (pod("p", ports=["80"]), "spec.containers[0].ports[0]", "mapping"),
    (podgroup("g", "many"), "spec.minMember", "integer"),
    (with_spec(pod("p"), nodeSelector=["disk=ssd"]), "spec.nodeSelector", "mapping"),
    (with_spec(pod("p"), nodeSelector=[]), "spec.nodeSelector", "mapping"),
    (with_spec(pod("p"), affinity=node_terms({"key": "cores", "operator": "Gt", "values": ["many"]})),
     f"{NODEAFF}.matchExpressions[0].values", "integer"),
    (with_spec(pod("p"), affinity=node_terms({"key": "cores", "operator": "Lt", "values": ["1.5"]})),
     f"{NODEAFF}.matchExpressions[0].values", "integer"),
    (with_spec(pod("p"), affinity=node_terms({"key": "zone", "operator": "In"})),
     f"{NODEAFF}.matchExpressions[0]", "needs values"),
    (with_spec(pod("p"), affinity=node_terms({"key": "zone", "operator": "In", "values": []})),
     f"{NODEAFF}.matchExpressions[0]", "needs values"),
    (with_spec(pod("p"), affinity=node_terms({"key": "zone", "operator": "Exists", "values": ["a"]})),
     f"{NODEAFF}.matchExpressions[0]", "values"),
    (with_spec(pod("p"), affinity=node_terms({"operator": "Exists"})), f"{NODEAFF}.matchExpressions[0].key", "missing"),
    (with_spec(pod("p"), affinity=pod_term(labelSelector={"matchExpressions": [{"key": "app", "operator": "NotIn"}]})),
     f"{PODAFF}.labelSelector.matchExpressions[0]", "needs values"),
    (with_spec(pod("p"), tolerations=["gpu"]), "spec.tolerations[0]", "mapping"),
    (with_spec(pod("p"), tolerations=[{"key": "gpu", "tolerationSeconds": "x", "operator": "Sometimes"}]),
     "spec.tolerations[0]", "operator"),
    (with_spec(pod("p"), affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": ["x"]}}),
     "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]", "mapping"),
    (with_spec(pod("p"), affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": "heavy", "preference": {}}]}}),
     "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight", "integer"),
    (with_spec(pod("p"), containers=["main"]), "spec.containers[0]", "mapping"),
    (with_spec(pod("p"), schedulingGates="wait"), "spec.schedulingGates", "list"),
    (node("a", taints=["gpu"]), "spec.taints[0]", "mapping"),
    (node("a", taints=[{"effect": "NoSchedule"}]), "spec.taints[0].key", "missing"),
    (pod("p") | {"metadata": {"name": "p", "namespace": "default", "labels": ["a"]}}, "metadata.labels", "mapping"),
    (pod("p") | {"metadata": {"name": "p", "namespace": "default", "ownerReferences": ["rs"]}},
     "metadata.ownerReferences[0]", "mapping"),
    ({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n", "labels": ["a"]}}, "metadata.labels", "mapping"),
    ({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "hi"}, "value": "high"},
     "value", "integer"),
]


@pytest.mark.parametrize("obj,field,problem", BAD_OBJECTS, ids=[f"{o['kind']}:{f}" for o, f, _ in BAD_OBJECTS])
def test_bad_field_names_file_object_and_field(tmp_path, obj, field, problem):
    path = write(tmp_path, "bad.yaml", as_yaml(node("n0"), obj))
    with pytest.raises(InputError) as err:
        load_cluster([path])
    message = str(err.value)
    meta = obj["metadata"]
    ident = f"{obj['kind']} {meta['namespace']}/{meta['name']}" if meta.get("namespace") else f"{obj['kind']} {meta['name']}"
    assert message.startswith(f"{path}:"), message
    assert ident in message and field in message and problem in message, message
    assert "\n" not in message
    for leak in ("object has no attribute", "invalid literal", "NoneType", "not subscriptable", "KeyError"):
        assert leak not in message, message


def test_object_errors_carry_the_line_of_the_object(tmp_path):
    bad = pod("p", priority="high")
    text = as_yaml(node("a"), node("b"), bad)
    line = text.splitlines().index("kind: Pod") + 1
    path = write(tmp_path, "bad.yaml", text)
    with pytest.raises(InputError) as err:
        load_cluster([path])
    assert str(err.value).startswith(f"{path}:"), err.value
    start = int(str(err.value).split(":")[1])
    assert start <= line and line - start < 5, (err.value, line)


def test_object_errors_in_a_list_carry_the_item_line(tmp_path):
    text = yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [node("a"), pod("p", priority="high")]})
    path = write(tmp_path, "bad.yaml", text)
    with pytest.raises(InputError) as err:
        load_cluster([path])
    start = int(str(err.value).split(":")[1])
    lines = text.splitlines()
    assert start > 1 and "Pod" in "\n".join(lines[start - 1:start + 10]), err.value


@pytest.mark.parametrize("obj", [o for o, _, _ in BAD_OBJECTS[:8]])
def test_bad_fields_exit_2_from_the_cli(tmp_path, obj):
    path = write(tmp_path, "bad.yaml", as_yaml(node("n0"), obj))
    assert_clean_error(cli("dry-run", "--cluster", path), path)


# --- YAML details -------------------------------------------------------------------------------------------

MERGE_CASES = [
    "base: &b {cpu: 1, memory: 2}\nx:\n  <<: *b\n  cpu: 3\n",
    "a: &a {k: 1}\nb: &b {k: 2, j: 3}\nc:\n  <<: [*a, *b]\n  z: 0\n",
    "c:\n  z: 0\n  <<: {k: 1, z: 9}\n",
    "- &x {a: 1}\n- <<: *x\n  b: 2\n- '<<': not a merge\n",
]


@pytest.mark.parametrize("text", MERGE_CASES)
def test_merge_keys_match_safe_load(text):
    assert load_yaml_documents(text) == list(yaml.safe_load_all(text))


def test_merged_pod_is_loaded(tmp_path):
    text = (
        as_yaml(node("a")) + "---\n"
        "apiVersion: v1\nkind: List\nitems:\n"
        "- &p\n  apiVersion: v1\n  kind: Pod\n  metadata: {name: p, namespace: default}\n"
        "  spec: {schedulerName: policy-scheduler, containers: [{name: c, resources: {requests: {cpu: 100m}}}]}\n"
        "- <<: *p\n  metadata: {name: q, namespace: default}\n"
    )
    cluster = load_cluster([write(tmp_path, "m.yaml", text)])
    assert sorted(p.key for p in cluster.pending) == ["default/p", "default/q"]


def test_bad_merge_value_is_a_yaml_error():
    with pytest.raises(InputError, match="merg"):
        parse_documents("a:\n  <<: 3\n", "m.yaml")


def test_yaml_output_has_no_aliases(tmp_path):
    docs = [node("a", cpu="1")] + [pod(f"big-{i}", cpu="8", labels={"app": "big"}) for i in range(3)]
    out = cli("dry-run", "--cluster", write(tmp_path, "c.yaml", as_yaml(*docs)), "-o", "yaml")
    assert out.returncode == 0, out.stderr
    assert "&id" not in out.stdout and "*id" not in out.stdout
    assert len(yaml.safe_load(out.stdout)["unschedulable"]) == 3


# --- policies -----------------------------------------------------------------------------------------------

def policy_file(tmp_path, body: str, name: str = "p.policy", prefix: str = "") -> str:
    return write(tmp_path, name, f"{prefix}policy p {{\n{body}\n}}\n")


def assert_policy_error(out: subprocess.CompletedProcess, code: int, *fragments: str) -> None:
    assert out.returncode == code, (out.returncode, out.stderr[-2000:])
    assert "Traceback" not in out.stderr and "RecursionError" not in out.stderr
    for fragment in fragments:
        assert fragment in out.stderr, out.stderr[-2000:]


def test_policy_with_hundreds_of_or_terms_is_a_positioned_error(tmp_path):
    ors = " or ".join(f'label "x" == "v{i}"' for i in range(500))
    path = policy_file(tmp_path, f"  applies to pods where {ors}\n  require node label \"a\" exists")
    assert_policy_error(cli("check", path), 1, f"{path}:2:", "nested more than")
    assert_policy_error(cli("dry-run", "--policy", path), 2, f"{path}:2:", "nested more than")


def test_policy_with_thousands_of_nested_nots_is_a_positioned_error(tmp_path):
    path = policy_file(tmp_path, "  applies to all pods\n  require " + "not " * 3000 + 'node label "a" exists')
    assert_policy_error(cli("check", path), 1, f"{path}:3:", "nested more than")


def test_policy_with_a_few_dozen_terms_is_fine(tmp_path):
    ors = " or ".join(f'label "x" == "v{i}"' for i in range(40))
    path = policy_file(tmp_path, f"  applies to pods where {ors}\n  require not not node label \"a\" exists")
    out = cli("check", path)
    assert out.returncode == 0, out.stderr


def test_policy_with_a_utf8_bom_is_accepted(tmp_path):
    path = policy_file(tmp_path, '  applies to all pods\n  require node label "a" exists', prefix="\ufeff")
    out = cli("check", path)
    assert out.returncode == 0, out.stderr


# --- policy test files --------------------------------------------------------------------------------------

def make_test_file(tmp_path, case: dict, extra_cases: tuple = ()) -> str:
    write(tmp_path, "gpu.policy", 'policy gpu {\n  applies to all pods\n  require node label "gpu" exists\n}\n')
    base = {"name": "one", "policies": ["gpu.policy"],
            "cluster": [node("a", labels={"gpu": "yes"}), pod("p")]}
    cases = [base | case, *extra_cases]
    return write(tmp_path, "gpu_test.yaml", yaml.safe_dump({"cases": cases}, sort_keys=False))


def test_placed_count_must_be_a_number(tmp_path):
    path = make_test_file(tmp_path, {"expect": {"placed_count": "zero"}})
    out = cli("test", path)
    line = assert_clean_error(out, path, "placed_count", "'zero'")
    assert f"{path}:" in line and line.split(f"{path}:")[1].split(":")[0].isdigit(), line


def test_unknown_case_key_is_named_with_its_line(tmp_path):
    path = make_test_file(tmp_path, {"expcet": {"placed": {"default/p": "a"}}})
    text = Path(path).read_text().splitlines()
    line = next(i for i, row in enumerate(text, 1) if "expcet" in row)
    assert_clean_error(cli("test", path), f"{path}:{line}:", "expcet", "expect")


def test_unknown_expect_key_is_named_with_its_line(tmp_path):
    path = make_test_file(tmp_path, {"expect": {"placd": {"default/p": "a"}}})
    text = Path(path).read_text().splitlines()
    line = next(i for i, row in enumerate(text, 1) if "placd" in row)
    assert_clean_error(cli("test", path), f"{path}:{line}:", "placd", "placed")


def test_case_without_an_expectation_is_an_error(tmp_path):
    path = make_test_file(tmp_path, {})
    assert_clean_error(cli("test", path), f"{path}:", "one", "expect")
    path = make_test_file(tmp_path, {"expect": {}})
    assert_clean_error(cli("test", path), f"{path}:", "one", "expect")


def test_good_test_file_still_passes(tmp_path):
    path = make_test_file(tmp_path, {"expect": {"placed": {"default/p": "a"}, "placed_count": 1}})
    out = cli("test", path)
    assert out.returncode == 0, out.stdout + out.stderr


def test_test_file_expects_skipped_pods(tmp_path):
    gated = pod("g", schedulingGates=[{"name": "wait"}])
    path = make_test_file(tmp_path, {"cluster": [node("a", labels={"gpu": "yes"}), gated],
                                "expect": {"skipped": {"default/g": "wait"}}})
    out = cli("test", path)
    assert out.returncode == 0, out.stdout + out.stderr
    path = make_test_file(tmp_path, {"cluster": [node("a", labels={"gpu": "yes"}), gated],
                                     "expect": {"skipped": {"default/g": "terminating"}}})
    out = cli("test", path)
    assert out.returncode == 1 and "default/g" in out.stdout, out.stdout + out.stderr


# --- assorted shapes of bad input: each one line, exit 2, naming the file ------------------------------------

LOL = "".join(f"{a}: &{a} [{', '.join([f'*{p}' if p else 'x'] * 9)}]\n"
              for a, p in zip("abcdefg", ["", "a", "b", "c", "d", "e", "f"]))
ASSORTED = {
    "scalar document": ("5\n", "not a Kubernetes object"),
    "items not a list": ("kind: List\nitems: {a: 1}\n", "items is not a list"),
    "trailing JSON": ('{"kind": "Node"} xx', "invalid JSON"),
    "NaN quantity": ('{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "a"}, "status": {"allocatable": {"cpu": NaN}}}',
                     "not a finite number"),
    "python tag": ("kind: Node\nmetadata: {name: !!python/name:os.system }\n", "unsupported tag"),
    "bad !!int": ("kind: Node\nmetadata: {name: a, x: !!int abc}\n", "cannot read 'abc'"),
    "empty !!int": ("kind: Node\nmetadata: {name: a, x: !!int ''}\n", "cannot read ''"),
    "binary name": ("kind: Node\nmetadata: {name: !!binary aGVsbG8=}\n", "metadata.name must be a string"),
    "list as key": ("kind: Node\nmetadata: {name: a, labels: {? [a, b] : c}}\n", "cannot be a key"),
    "bad merge": ("kind: Node\nmetadata:\n  <<: [1, 2]\n  name: a\n", "merging"),
    "billion laughs name": (LOL + "kind: Node\nmetadata: {name: *g}\n", "metadata.name must be a string"),
    "billion laughs label": (LOL + "apiVersion: v1\nkind: Node\nmetadata: {name: a, labels: {x: *g}}\n", "metadata.labels.x"),
    "self alias": ("&a [*a]\n", "nested more than"),
    "huge priority": (as_yaml(node("a"), pod("p", priority=10**30)), "spec.priority must be in"),
    "hostPort range": (as_yaml(node("a"), pod("p", ports=[{"hostPort": 70000}])), "hostPort must be in 0..65535"),
    "Gt beyond int64": (as_yaml(node("a"), with_spec(pod("p"), affinity=node_terms(
        {"key": "c", "operator": "Gt", "values": ["99999999999999999999"]}))), "needs an integer value"),
}


@pytest.mark.parametrize("text,fragment", ASSORTED.values(), ids=list(ASSORTED))
def test_assorted_bad_input(tmp_path, text, fragment):
    path = write(tmp_path, "bad.yaml", text)
    assert_clean_error(cli("dry-run", "--cluster", path), path, fragment)


def test_unquoted_timestamps_are_read(tmp_path):
    text = as_yaml(node("a"), pod("p")).replace("name: p\n", "name: p\n  creationTimestamp: 2024-01-01T00:00:00Z\n")
    cluster = load_cluster([write(tmp_path, "c.yaml", text)])
    assert cluster.pending[0].created == "2024-01-01T00:00:00Z"


def test_a_directory_is_not_a_snapshot(tmp_path):
    assert_clean_error(cli("dry-run", "--cluster", str(tmp_path)), str(tmp_path), "cannot read file")


def test_failing_case_says_when_a_pod_was_skipped(tmp_path):
    gated = pod("g", schedulingGates=[{"name": "example.com/wait"}])
    path = make_test_file(tmp_path, {"cluster": [node("a", labels={"gpu": "yes"}), gated],
                                     "expect": {"placed": {"default/g": "a"}}})
    out = cli("test", path)
    assert out.returncode == 1 and "skipped: gated by scheduling gate(s): example.com/wait" in out.stdout, out.stdout
