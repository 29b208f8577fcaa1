"""Load Kubernetes manifests (a snapshot) into the typed cluster model.

Accepts multi-document YAML, a `kind: List`, JSON, or `-` for stdin. Every user mistake becomes an
`InputError` naming the file and the object, so the CLI can print one line and exit 2.
"""

from __future__ import annotations

import datetime
import gc
import json
import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml

from .model import (
    Cluster,
    HostPort,
    LabelSelector,
    Node,
    NodeSelectorTerm,
    Pod,
    PodAffinityTerm,
    PodGroup,
    Requirement,
    SpreadConstraint,
    Taint,
    Toleration,
)
from .quantity import QuantityError, to_int, to_milli
from .yaml_parallel import parse_list

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
TERMINAL_PHASES = ("Succeeded", "Failed")
POD_GROUP_APIS = ("scheduling.x-k8s.io/v1alpha1", "scheduling.sigs.k8s.io/v1alpha1")
DEFAULT_SCHEDULER = "policy-scheduler"


class InputError(Exception):
    """A problem with user input; its message is the whole one-line explanation."""


MAX_DEPTH = 200  # nesting levels; real manifests use ~20, and deeper input only serves to crash parsers
MAX_QUANTITY = 2**53  # per resource, in its unit (millicores, bytes); no real node has more
INT32 = 2**31


def read_documents(path: str) -> list[dict[str, Any]]:
    """Parse a file (or `-` for stdin) into the list of top-level objects, flattening `kind: List`."""
    return [obj for _, obj in read_objects(path)]


def read_objects(path: str) -> list[tuple[str, dict[str, Any]]]:
    """(source, object) pairs from a file or stdin; the source is `file:line` where the line is known."""
    name = "<stdin>" if path == "-" else path
    return parse_objects(_read_text(path, name), name)


def _read_text(path: str, name: str) -> str:
    """The input as text: bytes decoded as UTF-8 here (not by the locale), so binary input is one clear error."""
    try:
        if path == "-":
            stream = getattr(sys.stdin, "buffer", sys.stdin)
            data = stream.read()
        else:
            data = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"{name}: cannot read file: {exc.strerror or exc}") from None
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{name}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
                         "a snapshot is YAML or JSON") from None


def parse_documents(text: str, name: str = "<input>") -> list[dict[str, Any]]:
    return [obj for _, obj in parse_objects(text, name)]


def parse_objects(text: str, name: str = "<input>") -> list[tuple[str, dict[str, Any]]]:
    """Top-level objects with their source (`name:line` for YAML); empty input is an error."""
    text = text.removeprefix("\ufeff")
    lines: dict[int, int] = {}
    try:
        if text.lstrip()[:1] in ("{", "["):
            docs: list[Any] = [_load_json(text, name)]
        else:
            docs = parse_list(text, lines, _yaml_documents) or _yaml_documents(text, lines)
    except json.JSONDecodeError as exc:
        raise InputError(f"{name}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
    except yaml.reader.ReaderError as exc:
        line, col = _line_col(text, exc.position)
        raise InputError(f"{name}:{line}:{col}: invalid YAML: unacceptable character #x{exc.character:04x}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{name}:{mark.line + 1}:{mark.column + 1}" if mark else name
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"{where}: invalid YAML: {problem}") from None
    if all(d is None for d in docs):
        raise InputError(f"{name}: no Kubernetes objects (the input is empty)")
    return list(_flatten(docs, name, lines))


def _line_col(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


_JSON_NESTING = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def _load_json(text: str, name: str) -> Any:
    """json.loads with an explicit nesting limit (the C decoder would otherwise hit Python's recursion limit)."""
    try:
        value = json.loads(text)
    except RecursionError:
        value = None
    else:
        if _depth_at_most(value, MAX_DEPTH):
            return value
    offset = _too_deep_offset(text)
    line, col = _line_col(text, offset)
    raise InputError(f"{name}:{line}:{col}: invalid JSON: nested more than {MAX_DEPTH} levels deep")


def _depth_at_most(value: Any, limit: int) -> bool:
    """Whether containers nest at most `limit` deep: one level at a time (the point is not to recurse)."""
    level = [value] if type(value) is dict or type(value) is list else []
    for _ in range(limit):
        if not level:
            return True
        level = [c for item in level for c in (item.values() if type(item) is dict else item)
                 if type(c) is dict or type(c) is list]
    return not level


def _too_deep_offset(text: str) -> int:
    depth = 0
    for m in _JSON_NESTING.finditer(text):
        token = m.group()
        if token in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return m.start()
        elif token in "]}":
            depth -= 1
    return 0


_STR = "tag:yaml.org,2002:str"
_RESOLVER = yaml.resolver.Resolver()
_CONSTRUCTOR = yaml.constructor.SafeConstructor()
_MAYBE_TYPED = frozenset("0123456789+-.~yYnNtTfFoO")


@lru_cache(maxsize=1 << 16)
def _typed_scalar(value: str, tag: str | None) -> Any:
    """A plain (or explicitly tagged) scalar as safe_load would construct it."""
    if tag is None or tag == "!":
        tag = _RESOLVER.resolve(yaml.ScalarNode, value, (True, False))
    if tag == _STR:
        return value
    construct = _CONSTRUCTOR.yaml_constructors.get(tag)
    if construct is None:
        raise yaml.constructor.ConstructorError(None, None, f"unsupported tag {tag!r}", None)
    return construct(_CONSTRUCTOR, yaml.ScalarNode(tag, value))


def _tagged(ev: Any) -> Any:
    """An explicitly tagged scalar; an unsupported or malformed one is an error at its position."""
    try:
        return _typed_scalar(ev.value, ev.tag)
    except (yaml.YAMLError, ValueError, TypeError, IndexError, KeyError, OverflowError) as exc:
        problem = getattr(exc, "problem", None) or f"cannot read {ev.value[:40]!r} as {ev.tag}"
        raise yaml.constructor.ConstructorError(None, None, problem, ev.start_mark) from None


def load_yaml_documents(text: str) -> list[Any]:
    """yaml.safe_load_all, but built straight from libyaml's parse events (see _yaml_documents)."""
    return _yaml_documents(text, {})


def _yaml_documents(text: str, lines: dict[int, int]) -> list[Any]:
    """yaml.safe_load_all, but built straight from libyaml's parse events.

    PyYAML's constructor is pure Python and takes ~11 s on a 15,000-object snapshot; libyaml parses it
    in ~1 s, and building plain dicts and lists from its events costs little more. Scalars resolve as
    in safe_load (ints, bools, nulls, floats, timestamps); anchors, aliases and merge keys (`<<`) are
    honoured. Nesting deeper than MAX_DEPTH is an error with its position. `lines` receives the
    starting line of the mappings near the top (documents and List items), by id, for messages.
    """
    docs: list[Any] = []
    stack: list[Any] = []  # containers under construction; a mapping carries its pending key
    keys: list[Any] = []
    anchors: dict[str, Any] = {}
    for ev in yaml.parse(text, Loader=_Loader):
        cls = type(ev)
        if cls is yaml.ScalarEvent:
            if not ev.implicit[0]:  # quoted or block scalars are strings unless explicitly tagged
                value: Any = ev.value if ev.tag in (None, "!", _STR) else _tagged(ev)
            elif ev.tag is None and ev.value and ev.value[0] not in _MAYBE_TYPED:
                value = _MERGE if ev.value == "<<" and stack and keys[-1] is _NO_KEY and type(stack[-1]) is dict \
                    else ev.value  # a plain scalar that cannot resolve to anything but a string
            else:
                value = _typed_scalar(ev.value, ev.tag) if ev.tag is None else _tagged(ev)
        elif cls is yaml.MappingStartEvent or cls is yaml.SequenceStartEvent:
            if len(stack) >= MAX_DEPTH:
                raise yaml.composer.ComposerError(None, None, f"nested more than {MAX_DEPTH} levels deep", ev.start_mark)
            value = {} if cls is yaml.MappingStartEvent else []
            if ev.anchor:
                anchors[ev.anchor] = value
            if len(stack) < 3 and cls is yaml.MappingStartEvent:
                lines[id(value)] = ev.start_mark.line + 1
            _attach(stack, keys, docs, value, ev)
            stack.append(value)
            keys.append(_NO_KEY)
            continue
        elif cls is yaml.MappingEndEvent or cls is yaml.SequenceEndEvent:
            done = stack.pop()
            keys.pop()
            if cls is yaml.MappingEndEvent and _MERGE in done:
                _merge(done, ev.start_mark)
            continue
        elif cls is yaml.AliasEvent:
            if ev.anchor not in anchors:
                raise yaml.composer.ComposerError(None, None, f"found undefined alias {ev.anchor!r}", ev.start_mark)
            value = anchors[ev.anchor]
        else:
            continue
        if cls is yaml.ScalarEvent and ev.anchor:
            anchors[ev.anchor] = value
        _attach(stack, keys, docs, value, ev)
    return docs


_NO_KEY = object()
_MERGE = type("_Merge", (), {"__repr__": lambda self: "<<"})()  # the `<<` merge key, as a unique dict key


def _merge(mapping: dict[Any, Any], mark: Any) -> None:
    """Apply a `<<` key as safe_load does: merged keys first, the mapping's own keys win, earlier sources win."""
    source = mapping.pop(_MERGE)
    sources = source if isinstance(source, list) else [source]
    if not all(isinstance(s, dict) for s in sources):
        raise yaml.constructor.ConstructorError(
            None, None, "expected a mapping or list of mappings for merging", mark)
    own = dict(mapping)
    mapping.clear()
    for s in sources:
        for k, v in s.items():
            mapping.setdefault(k, v)
    mapping.update(own)


def _attach(stack: list[Any], keys: list[Any], docs: list[Any], value: Any, ev: Any) -> None:
    if not stack:
        docs.append(value)
        return
    top = stack[-1]
    if type(top) is list:
        top.append(value)
    elif keys[-1] is _NO_KEY:
        keys[-1] = value
    else:
        try:
            top[keys[-1]] = value
        except TypeError:  # a list or mapping as a key: safe_load refuses it too
            raise yaml.constructor.ConstructorError(None, None, "a list or mapping cannot be a key", ev.start_mark) from None
        keys[-1] = _NO_KEY


def _flatten(docs: Iterable[Any], name: str, lines: dict[int, int], depth: int = 0) -> Iterator[tuple[str, dict[str, Any]]]:
    if depth > 3:
        raise InputError(f"{name}: lists of objects nested more than 3 deep")
    for i, doc in enumerate(docs):
        if doc is None:
            continue
        if isinstance(doc, list):
            yield from _flatten(doc, name, lines, depth + 1)
            continue
        src = f"{name}:{lines[id(doc)]}" if id(doc) in lines else name
        if not isinstance(doc, dict):
            raise InputError(f"{name}: document {i + 1} is not a Kubernetes object (got {_show(doc)})")
        kind = doc.get("kind")
        if kind == "List" or (isinstance(kind, str) and kind.endswith("List") and "items" in doc):
            items = doc.get("items") or []
            if not isinstance(items, list):
                raise InputError(f"{src}: {kind}.items is not a list")
            yield from _flatten(items, name, lines, depth + 1)
        else:
            yield src, doc


def load_cluster(paths: Iterable[str], scheduler_name: str = DEFAULT_SCHEDULER) -> Cluster:
    """Read every file and build one cluster model (objects from all files are merged).

    The cyclic garbage collector is paused meanwhile: loading creates millions of containers and no
    cycles, and full collections over them would only cost time.
    """
    docs: list[tuple[str, dict[str, Any]]] = []
    collecting = gc.isenabled()
    gc.disable()
    try:
        for path in paths:
            docs.extend(read_objects(path))
        return build_cluster(docs, scheduler_name)
    finally:
        if collecting:
            gc.enable()


KINDS = ("Node", "Pod", "PodGroup", "Namespace", "PriorityClass")
BUILTIN_PRIORITY_CLASSES = {"system-cluster-critical": 2_000_000_000, "system-node-critical": 2_000_001_000}
_PROBLEMS = (QuantityError, ValueError, TypeError, KeyError, AttributeError)


@dataclass(frozen=True, slots=True)
class Priorities:
    """PriorityClass values by name (built-ins included) and the globalDefault value, as admission resolves them."""

    values: dict[str, int]
    default: int = 0

    def of(self, spec: dict[str, Any]) -> int | None:
        """spec.priority when set, else the named class's value, else the default; None for an unknown class."""
        if spec.get("priority") is not None:
            return _int(spec["priority"], "spec.priority")
        name = spec.get("priorityClassName")
        if name is None or name == "":
            return self.default
        return self.values.get(_text(name, "spec.priorityClassName"))


def build_cluster(docs: Iterable[tuple[str, dict[str, Any]]], scheduler_name: str = DEFAULT_SCHEDULER) -> Cluster:
    """Turn (source name, raw object) pairs into the typed model, and decide which pods are pending."""
    cluster = Cluster()
    seen: set[tuple[str, str, str]] = set()
    ignored: dict[str, int] = {}
    raw_pods: list[tuple[str, dict[str, Any]]] = []
    classes: dict[str, tuple[int, bool]] = {}
    bare_nodes: list[str] = []

    for src, obj in docs:
        kind, meta = obj.get("kind"), obj.get("metadata")
        if not isinstance(meta, dict) or not meta.get("name"):
            raise InputError(f"{src}: {kind if isinstance(kind, str) and kind else 'object'} without metadata.name")
        if kind not in KINDS:
            shown = kind if isinstance(kind, str) else "<none>" if kind is None else "<not a string>"
            ignored[shown] = ignored.get(shown, 0) + 1
            continue
        try:
            ident = (kind, _text(meta.get("namespace") or "", "metadata.namespace"), _text(meta["name"], "metadata.name"))
        except ValueError as exc:
            raise InputError(f"{src}: {kind}: {exc}") from None
        if ident in seen:
            raise InputError(f"{src}: {_describe(kind, meta)}: duplicate object (it appears more than once)")
        seen.add(ident)
        try:
            if kind == "Node":
                cluster.nodes.append(_node(obj))
                if not _has_capacity(obj):
                    bare_nodes.append(cluster.nodes[-1].name)
            elif kind == "Namespace":
                cluster.namespaces[ident[2]] = _str_map(meta.get("labels"), "metadata.labels")
            elif kind == "PodGroup":
                group = _pod_group(obj)
                cluster.pod_groups[group.key] = group
            elif kind == "PriorityClass":
                classes[ident[2]] = _priority_class(obj)
            else:
                raw_pods.append((src, obj))
        except _PROBLEMS as exc:
            raise InputError(f"{src}: {_describe(kind, meta)}: {_reason(exc)}") from None

    priorities = _priorities(classes)
    namespaces = set(cluster.namespaces) | {str(o["metadata"].get("namespace") or "default") for _, o in raw_pods}
    ns_labels = {ns: {"kubernetes.io/metadata.name": ns, **cluster.namespaces.get(ns, {})} for ns in namespaces}
    other_scheduler = 0
    for src, obj in raw_pods:
        try:
            pod = _pod(obj, ns_labels, priorities)
        except _PROBLEMS as exc:
            raise InputError(f"{src}: {_describe('Pod', obj['metadata'])}: {_reason(exc)}") from None
        if pod.phase in TERMINAL_PHASES:
            continue
        if pod.node_name:
            cluster.bound.append(pod)  # a terminating bound pod still holds its node until it is gone
        elif pod.scheduler_name != scheduler_name:
            other_scheduler += 1
        elif reason := _skip_reason(obj, pod, cluster.pod_groups, priorities):
            cluster.skipped[pod.key] = reason
        else:
            cluster.pending.append(pod)

    cluster.notes.extend(_notes(cluster, ignored, other_scheduler, scheduler_name, bare_nodes))
    return cluster


def _notes(cluster: Cluster, ignored: dict[str, int], other_scheduler: int, scheduler_name: str,
           bare_nodes: list[str]) -> list[str]:
    """Warnings about the snapshot as a whole: what was left out, and what looks like a broken export."""
    out = [f"ignored {n} object(s) of kind {kind}" for kind, n in sorted(ignored.items())]
    if other_scheduler:
        out.append(f"ignored {other_scheduler} pending pod(s) for other schedulers (not {scheduler_name!r})")
    known = {n.name for n in cluster.nodes}
    unknown = sorted({p.node_name for p in cluster.bound if p.node_name not in known})
    if unknown:
        out.append(f"{len(unknown)} node(s) named by bound pods are not in the snapshot: {', '.join(unknown[:5])}")
    if not cluster.nodes and (cluster.pending or cluster.skipped or cluster.bound):
        out.append("the snapshot has pods but no Nodes, so nothing can be placed "
                   "(include nodes: kubectl get nodes,pods,podgroups -A -o yaml)")
    if bare_nodes:
        out.append(f"{len(bare_nodes)} Node(s) without status.allocatable or status.capacity have 0 allocatable "
                   f"(only pods requesting nothing fit): {', '.join(('Node ' + n) for n in bare_nodes[:5])}")
    return out


def _skip_reason(obj: dict[str, Any], pod: Pod, pod_groups: dict[str, PodGroup], priorities: Priorities) -> str | None:
    """Why a pod of this scheduler without a node is not pending at all (None: it is pending).

    Upstream keeps gated pods out of the active queue, never schedules a pod being deleted, admission rejects
    a pod whose PriorityClass does not exist, and Coscheduling rejects a pod whose PodGroup is missing.
    """
    spec = obj.get("spec") or {}
    gates = _scheduling_gates(spec)
    if gates:
        return f"gated by scheduling gate(s): {', '.join(gates)}"
    if obj["metadata"].get("deletionTimestamp"):
        return "terminating (metadata.deletionTimestamp is set)"
    if priorities.of(spec) is None:
        return f"PriorityClass {spec.get('priorityClassName')!r} not found (admission would reject the pod)"
    group = pod.pod_group
    if group is not None and f"{pod.namespace}/{group}" not in pod_groups:
        return f"PodGroup {pod.namespace}/{group} not found"
    return None


def _has_capacity(obj: dict[str, Any]) -> bool:
    status = obj.get("status") or {}
    return status.get("allocatable") is not None or status.get("capacity") is not None


def _priority_class(obj: dict[str, Any]) -> tuple[int, bool]:
    """(value, globalDefault) of a scheduling.k8s.io PriorityClass."""
    if "value" not in obj:
        raise ValueError("value is required")
    value = _int(obj["value"], "value")
    default = obj.get("globalDefault")
    if default is not None and not isinstance(default, bool):
        raise ValueError(f"globalDefault must be true or false, got {_show(default)}")
    return value, bool(default)


def _priorities(classes: dict[str, tuple[int, bool]]) -> Priorities:
    defaults = [value for value, default in classes.values() if default]
    values = {**BUILTIN_PRIORITY_CLASSES, **{name: value for name, (value, _) in classes.items()}}
    return Priorities(values, max(defaults) if defaults else 0)


def _describe(kind: Any, meta: dict[str, Any]) -> str:
    ns = meta.get("namespace")
    return f"{kind} {ns}/{meta.get('name')}" if ns else f"{kind} {meta.get('name')}"


def _reason(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        return f"missing field {exc.args[0]}"
    return str(exc) or type(exc).__name__


def _show(value: Any) -> str:
    """A value in a message: short, and never the repr of a whole (possibly huge) structure."""
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "null"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _mapping(value: Any, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"{what} must be a mapping, got {_show(value)}")
    return value


def _list(value: Any, what: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"{what} must be a list, got {_show(value)}")
    return value


def _text(value: Any, what: str) -> str:
    """A string field; numbers are read as their text (as a hand-written YAML often has them), nothing else."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{what} must be a string, got {_show(value)}")
    return str(value)


def _required(mapping: dict[str, Any], key: str, what: str) -> Any:
    if mapping.get(key) is None:
        raise ValueError(f"{what}.{key}: missing field {key!r}")
    return mapping[key]


def _int(value: Any, what: str, low: int = -INT32, high: int = INT32 - 1) -> int:
    """An int32 field (priority, maxSkew, hostPort, minMember, weight): whole numbers only, as the API has them."""
    if isinstance(value, bool):
        number = None
    elif isinstance(value, int):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and re.fullmatch(r"[+-]?[0-9]{1,10}", value):
        number = int(value)
    else:
        number = None
    if number is None:
        raise ValueError(f"{what} must be an integer, got {_show(value)}")
    if not low <= number <= high:
        raise ValueError(f"{what} must be in {low}..{high}, got {number}")
    return number


def _scalar_text(value: Any, what: str) -> str:
    """A label-like value: strings, and scalars a hand-written YAML leaves unquoted (`true`, `3`)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return _text(value, what)


def _str_map(value: Any, what: str) -> dict[str, str]:
    return {_text(k, f"{what} key"): _scalar_text(v, f"{what}.{k}") for k, v in _mapping(value, what).items()}


def _resources(value: Any, what: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for name, qty in _mapping(value, what).items():
        name = _text(name, f"{what} key")
        try:
            amount = to_milli(qty) if name == "cpu" else to_int(qty)
        except QuantityError as exc:
            raise ValueError(f"{what}.{name}: {exc}") from None
        if amount < 0:
            raise ValueError(f"{what}.{name}: quantity {qty!r} must not be negative")
        if amount > MAX_QUANTITY:
            unit = "millicores" if name == "cpu" else "units"
            raise ValueError(f"{what}.{name}: quantity {_show(qty)} is too large (more than 2^53 {unit})")
        out[name] = amount
    return out


def _node(obj: dict[str, Any]) -> Node:
    meta, spec, status = obj["metadata"], _mapping(obj.get("spec"), "spec"), _mapping(obj.get("status"), "status")
    alloc = status.get("allocatable")
    what = "status.allocatable"
    if alloc is None:
        alloc, what = status.get("capacity"), "status.capacity"
    allocatable = _resources(alloc, what)
    allocatable.setdefault("pods", 110)
    taints = tuple(_taint(t, f"spec.taints[{i}]") for i, t in enumerate(_list(spec.get("taints"), "spec.taints")))
    return Node(
        name=_text(meta["name"], "metadata.name"),
        labels=_str_map(meta.get("labels"), "metadata.labels"),
        annotations=_str_map(meta.get("annotations"), "metadata.annotations"),
        allocatable=allocatable,
        taints=taints,
        unschedulable=_bool(spec.get("unschedulable"), "spec.unschedulable"),
    )


def _taint(value: Any, what: str) -> Taint:
    t = _mapping(value, what)
    return Taint(_text(_required(t, "key", what), f"{what}.key"), _scalar_text(t.get("value"), f"{what}.value"),
                 _effect(t.get("effect"), what))


def _bool(value: Any, what: str) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ValueError(f"{what} must be true or false, got {_show(value)}")
    return value


def _effect(value: Any, what: str, allow_empty: bool = False) -> str:
    effect = _scalar_text(value, f"{what}.effect")
    if effect in ("NoSchedule", "PreferNoSchedule", "NoExecute") or (allow_empty and not effect):
        return effect
    raise ValueError(f"{what}: unknown taint effect {effect!r} (NoSchedule, PreferNoSchedule or NoExecute)")


def _pod_group(obj: dict[str, Any]) -> PodGroup:
    meta, spec = obj["metadata"], _mapping(obj.get("spec"), "spec")
    if obj.get("apiVersion") not in POD_GROUP_APIS:
        raise ValueError(f"unsupported apiVersion {_show(obj.get('apiVersion'))} (want {POD_GROUP_APIS[0]})")
    min_member = _int(spec.get("minMember") or 0, "spec.minMember")
    if min_member < 0:
        raise ValueError("spec.minMember must not be negative")
    timeout = spec.get("scheduleTimeoutSeconds")
    room = _resources(spec["minResources"], "spec.minResources") if spec.get("minResources") is not None else {}
    return PodGroup(_text(meta.get("namespace") or "default", "metadata.namespace"), _text(meta["name"], "metadata.name"),
                    min_member, _int(timeout, "spec.scheduleTimeoutSeconds") if timeout is not None else None,
                    tuple(sorted(room.items())), _timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"))


def pod_requests(spec: dict[str, Any]) -> dict[str, int]:
    """Effective requests exactly as kube-scheduler computes them (resourcehelper.PodRequests).

    Regular containers are summed; init containers run one at a time so they take the max, except
    restartable (sidecar) init containers, which keep running and so add to everything after them.
    """

    def container_requests(c: dict[str, Any], where: str) -> dict[str, int]:
        res = _mapping(c.get("resources"), f"{where}.resources")
        limits = _resources(res.get("limits"), f"{where}.resources.limits")
        requests = _resources(res.get("requests"), f"{where}.resources.requests")
        return {**limits, **requests}  # API defaulting: a limit without a request is also the request

    def add(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
        out = dict(a)
        for k, v in b.items():
            out[k] = out.get(k, 0) + v
        return out

    containers = _list(spec.get("containers"), "spec.containers")
    if not containers:
        raise ValueError("pod has no containers (spec.containers is empty)")
    total: dict[str, int] = {}
    for i, c in enumerate(containers):
        total = add(total, container_requests(_mapping(c, f"spec.containers[{i}]"), f"spec.containers[{i}]"))
    init_max: dict[str, int] = {}
    sidecars: dict[str, int] = {}
    for i, c in enumerate(_list(spec.get("initContainers"), "spec.initContainers")):
        c = _mapping(c, f"spec.initContainers[{i}]")
        reqs = container_requests(c, f"spec.initContainers[{i}]")
        if c.get("restartPolicy") == "Always":
            total = add(total, reqs)
            sidecars = add(sidecars, reqs)
            reqs = sidecars
        else:
            reqs = add(reqs, sidecars)
        for k, v in reqs.items():
            init_max[k] = max(init_max.get(k, 0), v)
    for k, v in init_max.items():
        total[k] = max(total.get(k, 0), v)
    total = add(total, _resources(spec.get("overhead"), "spec.overhead"))
    total = {k: v for k, v in total.items() if v > 0}
    for k, v in total.items():
        if v > MAX_QUANTITY:
            raise ValueError(f"the pod's total {k} request is too large (more than 2^53)")
    total["pods"] = 1
    return total


def _requirements(items: Any, what: str, ops: tuple[str, ...]) -> tuple[Requirement, ...]:
    """Selector requirements, validated as the apiserver validates them."""
    out = []
    for i, item in enumerate(_list(items, what)):
        where = f"{what}[{i}]"
        e = _mapping(item, where)
        key = _text(_required(e, "key", where), f"{where}.key")
        op = e.get("operator")
        if op not in ops:
            raise ValueError(f"{where}: unknown operator {_show(op)} (one of {', '.join(ops)})")
        values = tuple(_scalar_text(v, f"{where}.values[{j}]") for j, v in enumerate(_list(e.get("values"), f"{where}.values")))
        if op in ("In", "NotIn") and not values:
            raise ValueError(f"{where}: operator {op} needs values")
        if op in ("Exists", "DoesNotExist") and values:
            raise ValueError(f"{where}.values: must be empty for operator {op}")
        if op in ("Gt", "Lt"):
            if len(values) != 1:
                raise ValueError(f"{where}: operator {op} needs exactly one value")
            if not re.fullmatch(r"[+-]?[0-9]{1,18}", values[0]):
                raise ValueError(f"{where}.values: operator {op} needs an integer value, got {values[0]!r}")
        out.append(Requirement(key, op, values))
    return tuple(out)


def label_selector(value: Any, what: str) -> LabelSelector:
    """metav1.LabelSelector; null matches nothing, {} matches everything."""
    if value is None:
        return LabelSelector(nothing=True)
    sel = _mapping(value, what)
    reqs = tuple(Requirement(k, "In", (v,)) for k, v in _str_map(sel.get("matchLabels"), f"{what}.matchLabels").items())
    reqs += _requirements(sel.get("matchExpressions"), f"{what}.matchExpressions", ("In", "NotIn", "Exists", "DoesNotExist"))
    return LabelSelector(reqs)


def _node_term(term: Any, what: str) -> NodeSelectorTerm:
    term = _mapping(term, what)
    ops = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
    fields = _requirements(term.get("matchFields"), f"{what}.matchFields", ("In", "NotIn"))
    for f in fields:
        if f.key != "metadata.name":
            raise ValueError(f"{what}.matchFields: unsupported field {f.key!r} (only metadata.name)")
    return NodeSelectorTerm(_requirements(term.get("matchExpressions"), f"{what}.matchExpressions", ops), fields)


def _label_keys(value: Any, what: str) -> list[str]:
    return [_text(k, f"{what}[{i}]") for i, k in enumerate(_list(value, what))]


def _with_label_keys(selector: LabelSelector, labels: dict[str, str], match: Any, mismatch: Any, what: str) -> LabelSelector:
    """matchLabelKeys / mismatchLabelKeys: the incoming pod's own values join the selector (In / NotIn).

    Upstream ignores keys the pod does not carry, and a null selector stays null.
    """
    extra = tuple(Requirement(k, "In", (labels[k],)) for k in _label_keys(match, f"{what}.matchLabelKeys") if k in labels)
    extra += tuple(Requirement(k, "NotIn", (labels[k],)) for k in _label_keys(mismatch, f"{what}.mismatchLabelKeys")
                   if k in labels)
    if not extra or selector.nothing:
        return selector
    return LabelSelector(selector.requirements + extra)


def _pod_term(term: Any, pod_ns: str, ns_labels: dict[str, dict[str, str]], what: str,
              labels: dict[str, str] | None = None) -> PodAffinityTerm:
    term = _mapping(term, what)
    key = term.get("topologyKey")
    if not key:
        raise ValueError(f"{what}: topologyKey is required")
    key = _text(key, f"{what}.topologyKey")
    names = {_text(n, f"{what}.namespaces[{i}]") for i, n in enumerate(_list(term.get("namespaces"), f"{what}.namespaces"))}
    ns_sel = term.get("namespaceSelector")
    sel = label_selector(ns_sel, f"{what}.namespaceSelector") if ns_sel is not None else None
    namespaces: frozenset[str] | None
    if sel is not None and not sel.requirements:
        namespaces = None  # an empty namespaceSelector selects every namespace
    else:
        if sel is not None:
            names |= {ns for ns, ns_label in ns_labels.items() if sel.matches(ns_label)}
        elif not names:
            names = {pod_ns}
        namespaces = frozenset(names)
    return PodAffinityTerm(_term_selector(term, labels, what), namespaces, key)


def _term_selector(term: dict[str, Any], labels: dict[str, str] | None, what: str) -> LabelSelector:
    return _with_label_keys(label_selector(term.get("labelSelector"), f"{what}.labelSelector"), labels or {},
                            term.get("matchLabelKeys"), term.get("mismatchLabelKeys"), what)


def _pod(obj: dict[str, Any], ns_labels: dict[str, dict[str, str]], priorities: Priorities) -> Pod:
    meta = obj["metadata"]
    spec = _mapping(obj.get("spec"), "spec")
    status = _mapping(obj.get("status"), "status")
    ns = _text(meta.get("namespace") or "default", "metadata.namespace")
    labels = _str_map(meta.get("labels"), "metadata.labels")
    affinity = _mapping(spec.get("affinity"), "spec.affinity")
    node_aff = _mapping(affinity.get("nodeAffinity"), "spec.affinity.nodeAffinity")
    pod_aff = _mapping(affinity.get("podAffinity"), "spec.affinity.podAffinity")
    anti_aff = _mapping(affinity.get("podAntiAffinity"), "spec.affinity.podAntiAffinity")
    _scheduling_gates(spec)

    required_terms = None
    req = node_aff.get("requiredDuringSchedulingIgnoredDuringExecution")
    if req is not None:
        base = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        terms = _list(_mapping(req, base).get("nodeSelectorTerms"), f"{base}.nodeSelectorTerms")
        required_terms = tuple(_node_term(t, f"{base}.nodeSelectorTerms[{i}]") for i, t in enumerate(terms))
    pref = "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"
    preferred_terms = tuple(
        (_weight(p, f"{pref}[{i}]"), _node_term(_required(p, "preference", f"{pref}[{i}]"), f"{pref}[{i}].preference"))
        for i, p in enumerate(_list(node_aff.get("preferredDuringSchedulingIgnoredDuringExecution"), pref))
    )

    def required(section: dict[str, Any], name: str) -> tuple[PodAffinityTerm, ...]:
        what = f"spec.affinity.{name}.requiredDuringSchedulingIgnoredDuringExecution"
        return tuple(
            _pod_term(t, ns, ns_labels, f"{what}[{i}]", labels)
            for i, t in enumerate(_list(section.get("requiredDuringSchedulingIgnoredDuringExecution"), what))
        )

    def preferred(section: dict[str, Any], name: str) -> tuple[tuple[int, PodAffinityTerm], ...]:
        what = f"spec.affinity.{name}.preferredDuringSchedulingIgnoredDuringExecution"
        return tuple(
            (_weight(p, f"{what}[{i}]"),
             _pod_term(_required(p, "podAffinityTerm", f"{what}[{i}]"), ns, ns_labels, f"{what}[{i}].podAffinityTerm", labels))
            for i, p in enumerate(_list(section.get("preferredDuringSchedulingIgnoredDuringExecution"), what))
        )

    priority = priorities.of(spec)  # None (an unknown class) makes the pod skipped; see _skip_reason
    return Pod(
        namespace=ns,
        name=_text(meta["name"], "metadata.name"),
        labels=labels,
        annotations=_str_map(meta.get("annotations"), "metadata.annotations"),
        requests=pod_requests(spec),
        node_name=_text(spec["nodeName"], "spec.nodeName") if spec.get("nodeName") else None,
        scheduler_name=_text(spec.get("schedulerName") or "default-scheduler", "spec.schedulerName"),
        phase=_text(status.get("phase") or "Pending", "status.phase"),
        priority=priority or 0,
        node_selector=tuple(sorted(_str_map(spec.get("nodeSelector"), "spec.nodeSelector").items())),
        required_node_terms=required_terms,
        preferred_node_terms=preferred_terms,
        tolerations=_tolerations(spec),
        affinity_required=required(pod_aff, "podAffinity"),
        affinity_preferred=preferred(pod_aff, "podAffinity"),
        anti_affinity_required=required(anti_aff, "podAntiAffinity"),
        anti_affinity_preferred=preferred(anti_aff, "podAntiAffinity"),
        spread=_spread(spec, labels),
        host_ports=_host_ports(spec),
        owner=_owner(meta),
        created=_timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
    )


def _timestamp(value: Any, what: str) -> str:
    """An RFC 3339 time as text; an unquoted one in hand-written YAML arrives as a datetime."""
    if isinstance(value, datetime.datetime):
        value = value.astimezone(datetime.timezone.utc) if value.tzinfo else value
        return value.strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(value, datetime.date):
        return value.strftime("%Y-%m-%dT00:00:00Z")
    return _scalar_text(value, what)


def _scheduling_gates(spec: dict[str, Any]) -> tuple[str, ...]:
    what = "spec.schedulingGates"
    return tuple(_text(_required(_mapping(g, f"{what}[{i}]"), "name", f"{what}[{i}]"), f"{what}[{i}].name")
                 for i, g in enumerate(_list(spec.get("schedulingGates"), what)))


def _tolerations(spec: dict[str, Any]) -> tuple[Toleration, ...]:
    out = []
    for i, item in enumerate(_list(spec.get("tolerations"), "spec.tolerations")):
        what = f"spec.tolerations[{i}]"
        t = _mapping(item, what)
        op = _scalar_text(t.get("operator"), f"{what}.operator") or "Equal"
        if op not in ("Equal", "Exists"):
            raise ValueError(f"{what}: unknown operator {op!r} (Equal or Exists)")
        out.append(Toleration(_scalar_text(t.get("key"), f"{what}.key"), op, _scalar_text(t.get("value"), f"{what}.value"),
                              _effect(t.get("effect"), what, True)))
    return tuple(out)


def _spread(spec: dict[str, Any], labels: dict[str, str]) -> tuple[SpreadConstraint, ...]:
    out = []
    for i, item in enumerate(_list(spec.get("topologySpreadConstraints"), "spec.topologySpreadConstraints")):
        what = f"spec.topologySpreadConstraints[{i}]"
        c = _mapping(item, what)
        when = c.get("whenUnsatisfiable", "DoNotSchedule")
        if when not in ("DoNotSchedule", "ScheduleAnyway"):
            raise ValueError(f"{what}: unknown whenUnsatisfiable {_show(when)}")
        skew = _int(c.get("maxSkew", 0), f"{what}.maxSkew")
        if skew < 1 or not c.get("topologyKey"):
            raise ValueError(f"{what}: maxSkew must be ≥ 1 and topologyKey set")
        min_domains = _int(c.get("minDomains") or 1, f"{what}.minDomains", 1)
        out.append(
            SpreadConstraint(
                max_skew=skew,
                topology_key=_text(c["topologyKey"], f"{what}.topologyKey"),
                hard=when == "DoNotSchedule",
                selector=_with_label_keys(label_selector(c.get("labelSelector"), f"{what}.labelSelector"), labels,
                                          c.get("matchLabelKeys"), None, what),
                min_domains=min_domains,
                honor_affinity=c.get("nodeAffinityPolicy", "Honor") != "Ignore",
                honor_taints=c.get("nodeTaintsPolicy", "Ignore") == "Honor",
            )
        )
    return tuple(out)


def _host_ports(spec: dict[str, Any]) -> tuple[HostPort, ...]:
    ports = []
    for i, c in enumerate(_list(spec.get("containers"), "spec.containers")):
        where = f"spec.containers[{i}].ports"
        for j, item in enumerate(_list(_mapping(c, f"spec.containers[{i}]").get("ports"), where)):
            p = _mapping(item, f"{where}[{j}]")
            port = _int(p.get("hostPort") or 0, f"{where}[{j}].hostPort", 0, 65535)
            if port > 0:
                ports.append(HostPort(_scalar_text(p.get("protocol"), f"{where}[{j}].protocol") or "TCP", port,
                                      _scalar_text(p.get("hostIP"), f"{where}[{j}].hostIP")))
    return tuple(ports)


def _owner(meta: dict[str, Any]) -> tuple[str, str] | None:
    for i, item in enumerate(_list(meta.get("ownerReferences"), "metadata.ownerReferences")):
        o = _mapping(item, f"metadata.ownerReferences[{i}]")
        if o.get("controller"):
            return (_scalar_text(o.get("kind"), f"metadata.ownerReferences[{i}].kind"),
                    _scalar_text(o.get("name"), f"metadata.ownerReferences[{i}].name"))
    return None


def _weight(item: Any, what: str) -> int:
    return _int(_mapping(item, what).get("weight", 0), f"{what}.weight", 1, 100)
