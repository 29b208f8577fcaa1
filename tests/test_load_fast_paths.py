"""The load path's shortcuts read exactly what the long way reads (issue 27 point 7).

The JSON nesting check reads the text (bytes operations) and walks the parsed value only when the text nests
too deep; the converters take the common shapes (string maps, quantities met before, absent fields) without
spelling out field names. Each shortcut is checked against the long way: the value walk for nesting, and for
the converters the same manifests made of `dict` and `str` subclasses, which no shortcut takes.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.reading.convert.fields import MAX_QUANTITY, resource_amounts, str_map
from engine.reading.load import InputError, build_cluster
from engine.reading.manifests import MAX_DEPTH, _depth_at_most, _nesting_at_most, parse_objects
from test_fuzz_snapshot import FUZZ, base_snapshot, bury, mutated_docs
from testkit.manifests import node, pod

# strings holding what the text check must see through: brackets, quotes, backslashes, escapes
TRICKY = st.text(alphabet='ab"\\[]{}/é\n\u2028', max_size=6)
JSON_VALUES = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), TRICKY),
                           lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                   st.dictionaries(TRICKY, inner, max_size=3)), max_leaves=30)


def _depth(value: Any) -> int:
    if isinstance(value, dict | list):
        return 1 + max(map(_depth, value.values() if isinstance(value, dict) else value), default=0)
    return 0


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES, st.booleans(), st.sampled_from([None, 1]))
def test_the_nesting_read_off_the_text_is_the_value_s(value, ascii_only, indent):
    text = json.dumps(value, ensure_ascii=ascii_only, indent=indent)
    depth = _depth(value)
    for limit in range(max(depth - 1, 0), depth + 2):
        assert _nesting_at_most(text, limit) == _depth_at_most(value, limit) == (depth <= limit)


def _nested(depth: int) -> str:
    """A pod whose annotation-like field nests `depth` levels in all, with brackets and quotes in its strings."""
    inner = '{"s": "]]}}\\"[{\\\\", "t": "\\\\"}'
    for _ in range(depth - 4):
        inner = f'[{inner}, "}}]"]'
    return '{"kind": "List", "items": [{"kind": "Pod", "x": ' + inner + "}]}"


def test_json_nested_to_the_limit_loads_and_one_deeper_is_refused_where_it_goes_too_deep():
    assert parse_objects(_nested(MAX_DEPTH), "deep.json")
    with pytest.raises(InputError) as refused:
        parse_objects(_nested(MAX_DEPTH + 1), "deep.json")
    column = _nested(MAX_DEPTH + 1).index('{"s"') + 1  # the innermost mapping is one level too many
    assert str(refused.value) == f"deep.json:1:{column}: invalid JSON: nested more than {MAX_DEPTH} levels deep"


def test_a_deep_value_a_duplicate_key_replaces_is_not_counted():
    """json.loads keeps a key's last value: the text nests deeper than what is read, and what is read counts."""
    deep = "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5)
    (_, obj), = parse_objects('{"kind": "Pod", "x": ' + deep + ', "x": 1}', "dup.json")
    assert obj == {"kind": "Pod", "x": 1}


class Text(str):
    """A str the shortcuts do not take (they test `type(x) is str`): the long way, with equal values."""


class Mapping(dict):
    """Likewise for `type(x) is dict`."""


def long_way(value: Any) -> Any:
    if isinstance(value, dict):
        return Mapping({long_way(k): long_way(v) for k, v in value.items()})
    if isinstance(value, list):
        return [long_way(v) for v in value]
    return Text(value) if isinstance(value, str) else value


def _as_plain(message: str) -> str:
    """A quantity's message names its type: the long way's mappings are a subclass (an artefact of the test)."""
    return message.replace("got Mapping", "got a mapping")


def outcome(docs: list[Any]) -> Any:
    """What a snapshot loads to, orders included (equal dicts may differ in order), or its first error line and
    how many more objects were refused."""
    try:
        cluster = build_cluster([("f.json", d) for d in docs if isinstance(d, dict)])
    except InputError as exc:
        return _as_plain(str(exc)), exc.more
    pods = [*cluster.pending, *cluster.bound]
    return (cluster.nodes, pods, [(list(p.requests.items()), list(p.labels.items())) for p in pods],
            [list(n.allocatable.items()) for n in cluster.nodes], cluster.skipped, cluster.notes)


def test_the_common_shapes_read_as_the_long_way_reads_them():
    docs = base_snapshot() + [
        node("c", labels={"n": "1"}, **{"example.com/x": "2"}),
        pod("two", limits={"cpu": "1", "memory": "1Gi"}, requests={"memory": "512Mi", "example.com/x": "1"},
            ports=[{"containerPort": 80}, {"containerPort": 81, "hostPort": 0}, {"containerPort": 82, "hostPort": 9}],
            initContainers=[{"name": "i", "resources": {"limits": {"cpu": "2"}}}],
            overhead={"cpu": "10m"}, nodeSelector={"n": "1"}),
    ]
    docs[-1]["metadata"]["ownerReferences"] = [{"kind": "ReplicaSet", "name": "rs", "controller": True}]
    assert outcome(copy.deepcopy(docs)) == outcome(long_way(docs))


@FUZZ
@given(mutated_docs())
def test_mutated_objects_read_as_the_long_way_reads_them(docs):
    """The same objects, values or the same first error (which field is read first decides which one)."""
    docs = bury(docs)
    assert outcome(copy.deepcopy(docs)) == outcome(long_way(docs))


def test_a_string_map_is_a_copy_with_its_order():
    labels = {"b": "1", "a": "2"}
    read = str_map(labels, "metadata.labels")
    assert read == labels and list(read) == ["b", "a"] and read is not labels
    assert str_map({"a": 1, "b": True, "c": None}, "m") == {"a": "1", "b": "true", "c": ""}
    assert str_map(None, "m") == {}
    with pytest.raises(ValueError, match="m must be a mapping, got a list"):
        str_map([], "m")


def test_a_quantity_met_before_reads_the_same_for_each_resource_and_limit():
    for _ in range(2):  # the second time from what the first remembered
        assert resource_amounts({"cpu": "1", "memory": "1", "x/y": "1k"}, "r") == {"cpu": 1000, "memory": 1, "x/y": 1000}
        assert resource_amounts({"memory": "9Pi"}, "r", clamp=True) == {"memory": MAX_QUANTITY}
        with pytest.raises(ValueError, match=r"r\.memory: quantity '9Pi' is too large \(more than 2\^53 units\)"):
            resource_amounts({"memory": "9Pi"}, "r")
        with pytest.raises(ValueError, match=r"r\.cpu: quantity '-1' must not be negative"):
            resource_amounts({"cpu": "-1"}, "r")
    assert resource_amounts({1: "1"}, "r") == {"1": 1}  # a number as a resource name reads as its text
