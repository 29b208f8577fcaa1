"""Load Kubernetes manifests (a snapshot) into the typed cluster model.

Accepts multi-document YAML, a `kind: List`, JSON, or `-` for stdin. Every user mistake becomes an
`InputError` naming the file and the object, so the CLI can print one line and exit 2.
"""

from __future__ import annotations

import json
import sys
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

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
TERMINAL_PHASES = ("Succeeded", "Failed")
POD_GROUP_APIS = ("scheduling.x-k8s.io/v1alpha1", "scheduling.sigs.k8s.io/v1alpha1")
DEFAULT_SCHEDULER = "policy-scheduler"


class InputError(Exception):
    """A problem with user input; its message is the whole one-line explanation."""


def read_documents(path: str) -> list[dict[str, Any]]:
    """Parse a file (or `-` for stdin) into the list of top-level objects, flattening `kind: List`."""
    name = "<stdin>" if path == "-" else path
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise InputError(f"{name}: cannot read file: {reason}") from None
    return parse_documents(text, name)


def parse_documents(text: str, name: str = "<input>") -> list[dict[str, Any]]:
    stripped = text.lstrip()
    try:
        if stripped[:1] in ("{", "["):
            docs: Iterable[Any] = [json.loads(text)]
        else:
            docs = load_yaml_documents(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{name}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{name}:{mark.line + 1}:{mark.column + 1}" if mark else name
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"{where}: invalid YAML: {problem}") from None
    return list(_flatten(docs, name))


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


def load_yaml_documents(text: str) -> list[Any]:
    """yaml.safe_load_all, but built straight from libyaml's parse events.

    PyYAML's constructor is pure Python and takes ~11 s on a 15,000-object snapshot; libyaml parses it
    in ~1 s, and building plain dicts and lists from its events costs little more. Scalars resolve as
    in safe_load (ints, bools, nulls, floats, timestamps); anchors and aliases are honoured.
    """
    docs: list[Any] = []
    stack: list[Any] = []  # containers under construction; a mapping carries its pending key
    keys: list[Any] = []
    anchors: dict[str, Any] = {}
    for ev in yaml.parse(text, Loader=_Loader):
        cls = type(ev)
        if cls is yaml.ScalarEvent:
            if not ev.implicit[0]:  # quoted or block scalars are strings unless explicitly tagged
                value: Any = ev.value if ev.tag in (None, "!", _STR) else _typed_scalar(ev.value, ev.tag)
            elif ev.tag is None and ev.value and ev.value[0] not in _MAYBE_TYPED:
                value = ev.value  # a plain scalar that cannot resolve to anything but a string
            else:
                value = _typed_scalar(ev.value, ev.tag)
        elif cls is yaml.MappingStartEvent or cls is yaml.SequenceStartEvent:
            value = {} if cls is yaml.MappingStartEvent else []
            if ev.anchor:
                anchors[ev.anchor] = value
            _attach(stack, keys, docs, value)
            stack.append(value)
            keys.append(_NO_KEY)
            continue
        elif cls is yaml.MappingEndEvent or cls is yaml.SequenceEndEvent:
            stack.pop()
            keys.pop()
            continue
        elif cls is yaml.AliasEvent:
            if ev.anchor not in anchors:
                raise yaml.composer.ComposerError(None, None, f"found undefined alias {ev.anchor!r}", ev.start_mark)
            value = anchors[ev.anchor]
        else:
            continue
        if cls is yaml.ScalarEvent and ev.anchor:
            anchors[ev.anchor] = value
        _attach(stack, keys, docs, value)
    return docs


_NO_KEY = object()


def _attach(stack: list[Any], keys: list[Any], docs: list[Any], value: Any) -> None:
    if not stack:
        docs.append(value)
        return
    top = stack[-1]
    if type(top) is list:
        top.append(value)
    elif keys[-1] is _NO_KEY:
        keys[-1] = value
    else:
        top[keys[-1]] = value
        keys[-1] = _NO_KEY


def _flatten(docs: Iterable[Any], name: str) -> Iterator[dict[str, Any]]:
    for i, doc in enumerate(docs):
        if doc is None:
            continue
        if isinstance(doc, list):
            yield from _flatten(doc, name)
            continue
        if not isinstance(doc, dict):
            raise InputError(f"{name}: document {i + 1} is not a Kubernetes object (got {type(doc).__name__})")
        if doc.get("kind") == "List" or (str(doc.get("kind", "")).endswith("List") and "items" in doc):
            items = doc.get("items") or []
            if not isinstance(items, list):
                raise InputError(f"{name}: {doc.get('kind')}.items is not a list")
            yield from _flatten(items, name)
        else:
            yield doc


def load_cluster(paths: Iterable[str], scheduler_name: str = DEFAULT_SCHEDULER) -> Cluster:
    """Read every file and build one cluster model (objects from all files are merged)."""
    docs: list[tuple[str, dict[str, Any]]] = []
    for path in paths:
        name = "<stdin>" if path == "-" else path
        docs.extend((name, d) for d in read_documents(path))
    return build_cluster(docs, scheduler_name)


def build_cluster(docs: Iterable[tuple[str, dict[str, Any]]], scheduler_name: str = DEFAULT_SCHEDULER) -> Cluster:
    """Turn (source name, raw object) pairs into the typed model."""
    docs = list(docs)
    cluster = Cluster()
    seen: set[tuple[str, str, str]] = set()
    ignored: dict[str, int] = {}
    other_scheduler = 0
    raw_pods: list[tuple[str, dict[str, Any]]] = []

    for src, obj in docs:
        kind = obj.get("kind")
        meta = obj.get("metadata")
        if not isinstance(meta, dict) or not meta.get("name"):
            raise InputError(f"{src}: {kind or 'object'} without metadata.name")
        ident = (str(kind), str(meta.get("namespace") or ""), str(meta["name"]))
        if kind not in ("Node", "Pod", "PodGroup", "Namespace"):
            ignored[str(kind)] = ignored.get(str(kind), 0) + 1
            continue
        if ident in seen:
            raise InputError(f"{src}: {_describe(kind, meta)}: duplicate object (it appears more than once)")
        seen.add(ident)
        try:
            if kind == "Node":
                cluster.nodes.append(_node(obj))
            elif kind == "Namespace":
                cluster.namespaces[meta["name"]] = dict(meta.get("labels") or {})
            elif kind == "PodGroup":
                group = _pod_group(obj)
                cluster.pod_groups[group.key] = group
            else:
                raw_pods.append((src, obj))
        except (QuantityError, ValueError, TypeError, KeyError, AttributeError) as exc:
            raise InputError(f"{src}: {_describe(kind, meta)}: {_reason(exc)}") from None

    namespaces = set(cluster.namespaces)
    namespaces.update(str((o.get("metadata") or {}).get("namespace") or "default") for _, o in raw_pods)
    ns_labels = {ns: {"kubernetes.io/metadata.name": ns, **cluster.namespaces.get(ns, {})} for ns in namespaces}
    for src, obj in raw_pods:
        meta = obj["metadata"]
        try:
            pod = _pod(obj, ns_labels)
        except (QuantityError, ValueError, TypeError, KeyError, AttributeError) as exc:
            raise InputError(f"{src}: {_describe('Pod', meta)}: {_reason(exc)}") from None
        if pod.phase in TERMINAL_PHASES:
            continue
        if pod.node_name:
            cluster.bound.append(pod)
        elif pod.scheduler_name == scheduler_name:
            cluster.pending.append(pod)
        else:
            other_scheduler += 1

    for kind, n in sorted(ignored.items()):
        cluster.notes.append(f"ignored {n} object(s) of kind {kind}")
    if other_scheduler:
        cluster.notes.append(f"ignored {other_scheduler} pending pod(s) for other schedulers (not {scheduler_name!r})")
    known = {n.name for n in cluster.nodes}
    unknown = sorted({p.node_name for p in cluster.bound if p.node_name not in known})
    if unknown:
        cluster.notes.append(f"{len(unknown)} node(s) named by bound pods are not in the snapshot: {', '.join(unknown[:5])}")
    return cluster


def _describe(kind: Any, meta: dict[str, Any]) -> str:
    ns = meta.get("namespace")
    return f"{kind} {ns}/{meta.get('name')}" if ns else f"{kind} {meta.get('name')}"


def _reason(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        return f"missing field {exc.args[0]}"
    return str(exc) or type(exc).__name__


def _mapping(value: Any, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"{what} must be a mapping")
    return value


def _list(value: Any, what: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"{what} must be a list")
    return value


def _str_map(value: Any, what: str) -> dict[str, str]:
    return {str(k): "" if v is None else str(v) for k, v in _mapping(value, what).items()}


def _resources(value: Any, what: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for name, qty in _mapping(value, what).items():
        try:
            out[str(name)] = to_milli(qty) if name == "cpu" else to_int(qty)
        except QuantityError as exc:
            raise ValueError(f"{what}.{name}: {exc}") from None
        if out[str(name)] < 0:
            raise ValueError(f"{what}.{name}: quantity {qty!r} must not be negative")
    return out


def _node(obj: dict[str, Any]) -> Node:
    meta, spec, status = obj["metadata"], _mapping(obj.get("spec"), "spec"), _mapping(obj.get("status"), "status")
    alloc = status.get("allocatable") or status.get("capacity")
    allocatable = _resources(alloc, "status.allocatable")
    allocatable.setdefault("pods", 110)
    taints = tuple(
        Taint(str(t["key"]), str(t.get("value") or ""), _effect(t.get("effect"), "spec.taints"))
        for t in _list(spec.get("taints"), "spec.taints")
    )
    return Node(
        name=str(meta["name"]),
        labels=_str_map(meta.get("labels"), "metadata.labels"),
        annotations=_str_map(meta.get("annotations"), "metadata.annotations"),
        allocatable=allocatable,
        taints=taints,
        unschedulable=bool(spec.get("unschedulable")),
    )


def _effect(value: Any, what: str, allow_empty: bool = False) -> str:
    effect = str(value or "")
    if effect in ("NoSchedule", "PreferNoSchedule", "NoExecute") or (allow_empty and not effect):
        return effect
    raise ValueError(f"{what}: unknown taint effect {effect!r} (NoSchedule, PreferNoSchedule or NoExecute)")


def _pod_group(obj: dict[str, Any]) -> PodGroup:
    meta, spec = obj["metadata"], _mapping(obj.get("spec"), "spec")
    if obj.get("apiVersion") not in POD_GROUP_APIS:
        raise ValueError(f"unsupported apiVersion {obj.get('apiVersion')!r} (want {POD_GROUP_APIS[0]})")
    min_member = int(spec.get("minMember") or 0)
    if min_member < 0:
        raise ValueError("spec.minMember must not be negative")
    timeout = spec.get("scheduleTimeoutSeconds")
    return PodGroup(str(meta.get("namespace") or "default"), str(meta["name"]), min_member,
                    int(timeout) if timeout is not None else None)


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
        total = add(total, container_requests(_mapping(c, "container"), f"spec.containers[{i}]"))
    init_max: dict[str, int] = {}
    sidecars: dict[str, int] = {}
    for i, c in enumerate(_list(spec.get("initContainers"), "spec.initContainers")):
        reqs = container_requests(_mapping(c, "initContainer"), f"spec.initContainers[{i}]")
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
    total["pods"] = 1
    return total


def _requirements(items: Any, what: str, ops: tuple[str, ...]) -> tuple[Requirement, ...]:
    out = []
    for i, e in enumerate(_list(items, what)):
        op = str(e.get("operator", ""))
        if op not in ops:
            raise ValueError(f"{what}[{i}]: unknown operator {op!r} (one of {', '.join(ops)})")
        values = tuple(str(v) for v in _list(e.get("values"), f"{what}[{i}].values"))
        if op in ("In", "NotIn") and not values:
            raise ValueError(f"{what}[{i}]: operator {op} needs values")
        if op in ("Gt", "Lt") and len(values) != 1:
            raise ValueError(f"{what}[{i}]: operator {op} needs exactly one value")
        out.append(Requirement(str(e["key"]), op, values))
    return tuple(out)


def label_selector(value: Any, what: str) -> LabelSelector:
    """metav1.LabelSelector; null matches nothing, {} matches everything."""
    if value is None:
        return LabelSelector(nothing=True)
    sel = _mapping(value, what)
    reqs = tuple(Requirement(str(k), "In", (str(v),)) for k, v in _mapping(sel.get("matchLabels"), what).items())
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


def _with_label_keys(selector: LabelSelector, labels: dict[str, str], match: Any, mismatch: Any, what: str) -> LabelSelector:
    """matchLabelKeys / mismatchLabelKeys: the incoming pod's own values join the selector (In / NotIn).

    Upstream ignores keys the pod does not carry, and a null selector stays null.
    """
    extra = tuple(Requirement(str(k), "In", (labels[str(k)],)) for k in _list(match, f"{what}.matchLabelKeys")
                  if str(k) in labels)
    extra += tuple(Requirement(str(k), "NotIn", (labels[str(k)],)) for k in _list(mismatch, f"{what}.mismatchLabelKeys")
                   if str(k) in labels)
    if not extra or selector.nothing:
        return selector
    return LabelSelector(selector.requirements + extra)


def _pod_term(term: Any, pod_ns: str, ns_labels: dict[str, dict[str, str]], what: str,
              labels: dict[str, str] | None = None) -> PodAffinityTerm:
    term = _mapping(term, what)
    key = term.get("topologyKey")
    if not key:
        raise ValueError(f"{what}: topologyKey is required")
    names = {str(n) for n in _list(term.get("namespaces"), f"{what}.namespaces")}
    ns_sel = term.get("namespaceSelector")
    namespaces: frozenset[str] | None
    if ns_sel is not None and not (ns_sel.get("matchLabels") or ns_sel.get("matchExpressions")):
        namespaces = None  # an empty namespaceSelector selects every namespace
    else:
        if ns_sel is not None:
            sel = label_selector(ns_sel, f"{what}.namespaceSelector")
            names |= {ns for ns, labels in ns_labels.items() if sel.matches(labels)}
        elif not names:
            names = {pod_ns}
        namespaces = frozenset(names)
    selector = _with_label_keys(label_selector(term.get("labelSelector"), f"{what}.labelSelector"), labels or {},
                                term.get("matchLabelKeys"), term.get("mismatchLabelKeys"), what)
    return PodAffinityTerm(selector, namespaces, str(key))


def _pod(obj: dict[str, Any], ns_labels: dict[str, dict[str, str]]) -> Pod:
    meta = obj["metadata"]
    spec = _mapping(obj.get("spec"), "spec")
    status = _mapping(obj.get("status"), "status")
    ns = str(meta.get("namespace") or "default")
    labels = _str_map(meta.get("labels"), "metadata.labels")
    affinity = _mapping(spec.get("affinity"), "spec.affinity")
    node_aff = _mapping(affinity.get("nodeAffinity"), "spec.affinity.nodeAffinity")
    pod_aff = _mapping(affinity.get("podAffinity"), "spec.affinity.podAffinity")
    anti_aff = _mapping(affinity.get("podAntiAffinity"), "spec.affinity.podAntiAffinity")

    required_terms = None
    req = node_aff.get("requiredDuringSchedulingIgnoredDuringExecution")
    if req is not None:
        base = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
        required_terms = tuple(
            _node_term(t, f"{base}[{i}]") for i, t in enumerate(_list(_mapping(req, base).get("nodeSelectorTerms"), base))
        )
    preferred_terms = tuple(
        (_weight(p, "nodeAffinity preferred"), _node_term(p.get("preference"), "nodeAffinity preference"))
        for p in _list(node_aff.get("preferredDuringSchedulingIgnoredDuringExecution"), "nodeAffinity preferred")
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
             _pod_term(p.get("podAffinityTerm"), ns, ns_labels, f"{what}[{i}].podAffinityTerm", labels))
            for i, p in enumerate(_list(section.get("preferredDuringSchedulingIgnoredDuringExecution"), what))
        )

    tolerations = []
    for i, t in enumerate(_list(spec.get("tolerations"), "spec.tolerations")):
        op = str(t.get("operator") or "Equal")
        if op not in ("Equal", "Exists"):
            raise ValueError(f"spec.tolerations[{i}]: unknown operator {op!r} (Equal or Exists)")
        tolerations.append(
            Toleration(str(t.get("key") or ""), op, str(t.get("value") or ""), _effect(t.get("effect"), f"spec.tolerations[{i}]", True))
        )

    spread = []
    for i, c in enumerate(_list(spec.get("topologySpreadConstraints"), "spec.topologySpreadConstraints")):
        what = f"spec.topologySpreadConstraints[{i}]"
        when = c.get("whenUnsatisfiable", "DoNotSchedule")
        if when not in ("DoNotSchedule", "ScheduleAnyway"):
            raise ValueError(f"{what}: unknown whenUnsatisfiable {when!r}")
        skew = int(c.get("maxSkew", 0))
        if skew < 1 or not c.get("topologyKey"):
            raise ValueError(f"{what}: maxSkew must be ≥ 1 and topologyKey set")
        spread.append(
            SpreadConstraint(
                max_skew=skew,
                topology_key=str(c["topologyKey"]),
                hard=when == "DoNotSchedule",
                selector=_with_label_keys(label_selector(c.get("labelSelector"), f"{what}.labelSelector"), labels,
                                          c.get("matchLabelKeys"), None, what),
                min_domains=int(c.get("minDomains") or 1),
                honor_affinity=c.get("nodeAffinityPolicy", "Honor") != "Ignore",
                honor_taints=c.get("nodeTaintsPolicy", "Ignore") == "Honor",
            )
        )

    ports = []
    for c in _list(spec.get("containers"), "spec.containers"):
        for p in _list(_mapping(c, "container").get("ports"), "ports"):
            if int(p.get("hostPort") or 0) > 0:
                ports.append(HostPort(str(p.get("protocol") or "TCP"), int(p["hostPort"]), str(p.get("hostIP") or "")))

    owner = next(
        ((str(o.get("kind")), str(o.get("name"))) for o in _list(meta.get("ownerReferences"), "ownerReferences") if o.get("controller")),
        None,
    )
    return Pod(
        namespace=ns,
        name=str(meta["name"]),
        labels=labels,
        annotations=_str_map(meta.get("annotations"), "metadata.annotations"),
        requests=pod_requests(spec),
        node_name=str(spec["nodeName"]) if spec.get("nodeName") else None,
        scheduler_name=str(spec.get("schedulerName") or "default-scheduler"),
        phase=str(status.get("phase") or "Pending"),
        priority=int(spec.get("priority") or 0),
        node_selector=tuple(sorted(_str_map(spec.get("nodeSelector"), "spec.nodeSelector").items())),
        required_node_terms=required_terms,
        preferred_node_terms=preferred_terms,
        tolerations=tuple(tolerations),
        affinity_required=required(pod_aff, "podAffinity"),
        affinity_preferred=preferred(pod_aff, "podAffinity"),
        anti_affinity_required=required(anti_aff, "podAntiAffinity"),
        anti_affinity_preferred=preferred(anti_aff, "podAntiAffinity"),
        spread=tuple(spread),
        host_ports=tuple(ports),
        owner=owner,
        created=str(meta.get("creationTimestamp") or ""),
    )


def _weight(item: Any, what: str) -> int:
    w = int(_mapping(item, what).get("weight", 0))
    if not 1 <= w <= 100:
        raise ValueError(f"{what}: weight must be in 1..100, got {w}")
    return w
