"""Fuzz the loader with mutated valid snapshots: every input ends in a clean InputError or a valid plan.

Mutations change a value's type, replace it with an odd value, delete a key, bury a value in nesting, or cut
the serialized text short. CI runs a modest number of examples (100 per test, a few seconds); `SNAPSHOT_FUZZ_EXAMPLES=5000 python -m pytest
tests/test_fuzz_snapshot.py` searches much harder.
"""

from __future__ import annotations

import copy
import json
import os
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.output import render_json, render_yaml
from engine.planning.plan import make_plan
from engine.reading.load import InputError, build_cluster
from engine.reading.manifests import parse_objects
from testkit.manifests import affinity, anti, expr, node, node_affinity, pod, podgroup, spread, term

EXAMPLES = int(os.environ.get("SNAPSHOT_FUZZ_EXAMPLES", "100"))
LEAKS = ("object has no attribute", "invalid literal", "NoneType", "not subscriptable", "unhashable",
         "Traceback", "not iterable", "takes ", "argument")


def base_snapshot() -> list[dict[str, Any]]:
    """A small snapshot that uses most of what the loader reads."""
    web = {"app": "web"}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml", "labels": {"team": "research"}}},
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000,
         "globalDefault": False},
        node("a", labels={"topology.kubernetes.io/zone": "z1", "cores": "8"},
             taints=[{"key": "gpu", "value": "true", "effect": "NoSchedule"}]),
        node("b", cpu="2", labels={"topology.kubernetes.io/zone": "z2", "cores": "2"}),
        pod("bound", node_name="b", labels=web),
        pod("web-0", labels=web, affinity=anti(term(web)), topologySpreadConstraints=[spread(web)]),
        pod("web-1", labels=web, priorityClassName="high",
            tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
            ports=[{"containerPort": 80, "hostPort": 8080}]),
        pod("ml-0", ns="ml", labels={"scheduling.x-k8s.io/pod-group": "job"}, priority=10,
            affinity={**node_affinity([expr("cores", "Gt", "4")]),
                      **affinity(term({"app": "web"}, namespaceSelector={"matchLabels": {"team": "research"}}))}),
        pod("ml-1", ns="ml", labels={"scheduling.x-k8s.io/pod-group": "job"},
            initContainers=[{"name": "init", "resources": {"requests": {"cpu": "1"}}}]),
        podgroup("job", 2, ns="ml"),
        pod("gated", schedulingGates=[{"name": "wait"}]),
    ]


ODD_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.sampled_from(["", "1e400", "-1", "0", "8Ei", "1.5", "high", "In", "Gt", "Exists", "NoSchedule", "Always",
                     "policy-scheduler", "a", "kubernetes.io/hostname", "Pod", "Node", "List", "---", "<<"]),
    st.lists(st.sampled_from(["x", 1, None]), max_size=3),
    st.dictionaries(st.sampled_from(["key", "operator", "values", "name", "x"]), st.sampled_from(["x", 1, None, []]),
                    max_size=3),
)


def _slots(value: Any, out: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """Every (container, key-or-index) in a document tree."""
    if isinstance(value, dict):
        for k in value:
            out.append((value, k))
            _slots(value[k], out)
    elif isinstance(value, list):
        for i in range(len(value)):
            out.append((value, i))
            _slots(value[i], out)
    return out


class Deep:
    """A value to bury `depth` lists deep, built only inside the test (`bury`): hypothesis prints a failing
    example's arguments with a printer that recurses once per level, so the nesting must not be drawn."""

    def __init__(self, value: Any, depth: int):
        self.value, self.depth = value, depth

    def __repr__(self) -> str:
        return f"Deep({self.value!r}, {self.depth})"


def bury(value: Any) -> Any:
    """The drawn documents with every Deep turned into its nested lists."""
    if isinstance(value, Deep):
        deep = bury(value.value)
        for _ in range(value.depth):
            deep = [deep]
        return deep
    if isinstance(value, dict):
        return {k: bury(v) for k, v in value.items()}
    if isinstance(value, list):
        return [bury(v) for v in value]
    return value


@st.composite
def mutated_docs(draw) -> list[dict[str, Any]]:
    docs = base_snapshot()
    for _ in range(draw(st.integers(1, 4))):
        slots = _slots(docs, [])
        container, key = draw(st.sampled_from(slots))
        action = draw(st.sampled_from(["replace", "replace", "replace", "delete", "wrap", "nest"]))
        if action == "replace":
            container[key] = draw(ODD_VALUES)
        elif action == "delete":
            del container[key]
        elif action == "wrap":
            container[key] = draw(st.sampled_from([[container[key]], {"x": container[key]}, str(container[key])]))
        else:
            container[key] = Deep(container[key], draw(st.integers(1, 300)))
    return docs


def check_outcome(run) -> None:
    """`run()` loads and plans; only an InputError (one clean line) or a plan keeping the contract may come out."""
    try:
        cluster = run()
    except InputError as exc:
        message = str(exc)
        assert message and "\n" not in message, message
        assert not any(leak in message for leak in LEAKS), message
        return
    plan = make_plan(cluster, time_limit=2, workers=1, seed=0)
    pending = {p.key for p in cluster.pending}
    assert set(plan.assignments) | set(plan.unschedulable) == pending
    assert not set(plan.assignments) & set(plan.unschedulable)
    assert all(plan.unschedulable[k] for k in plan.unschedulable)
    assert not set(plan.skipped) & pending
    assert set(plan.assignments.values()) <= {n.name for n in cluster.nodes}
    json.loads(render_json(plan))
    assert "&id" not in render_yaml(plan)


FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                            HealthCheck.data_too_large])


@FUZZ
@given(mutated_docs())
def test_mutated_objects_load_cleanly_or_fail_cleanly(docs):
    docs = bury(docs)
    check_outcome(lambda: build_cluster([("fuzz.yaml", d) for d in docs if isinstance(d, dict)]))


@FUZZ
@given(mutated_docs(), st.sampled_from(["yaml", "json"]), st.floats(0.0, 1.0))
def test_mutated_and_truncated_text_loads_cleanly_or_fails_cleanly(docs, fmt, keep):
    docs = bury(docs)
    try:
        text = yaml.safe_dump_all(docs) if fmt == "yaml" else json.dumps({"kind": "List", "items": docs})
    except (ValueError, yaml.YAMLError, RecursionError):
        return  # not serialisable (NaN in strict JSON; lists buried deeper than PyYAML's dumper recurses): nothing a
        # user could feed in this way
    text = text[: int(len(text) * keep)] if keep < 1.0 else text
    check_outcome(lambda: build_cluster(parse_objects(text, "fuzz." + fmt)))


SNIPPETS = ["&a ", "*a", "<<: ", "<<: *a\n", "!!int ", "!!str ", "!!binary ", "\t", "[", "]", "{", "}", "- ", ": ",
            "? ", "---\n", "...\n", "#", "'", '"', "\\", "\x00", "\ufeff", "\u2028", "\n  ", "~", "1e400", ",", "|"]


@FUZZ
@given(mutated_docs(), st.lists(st.tuples(st.floats(0.0, 1.0), st.sampled_from(SNIPPETS)), min_size=1, max_size=6))
def test_yaml_text_with_stray_syntax_loads_cleanly_or_fails_cleanly(docs, edits):
    docs = bury(docs)
    """Anchors, aliases, merge keys, tags, flow brackets, control characters dropped into the text."""
    try:
        text = yaml.safe_dump_all(docs)
    except RecursionError:
        return  # buried deeper than PyYAML's dumper recurses: no text to edit
    for where, snippet in edits:
        at = int(len(text) * where)
        text = text[:at] + snippet + text[at:]
    check_outcome(lambda: build_cluster(parse_objects(text, "fuzz.yaml")))


def test_base_snapshot_plans():
    """The unmutated snapshot is valid: the fuzz starts from something that works."""
    cluster = build_cluster([("base", d) for d in copy.deepcopy(base_snapshot())])
    assert {p.key for p in cluster.pending} == {"default/web-0", "default/web-1", "ml/ml-0", "ml/ml-1"}
    assert set(cluster.skipped) == {"default/gated"}
    check_outcome(lambda: cluster)
