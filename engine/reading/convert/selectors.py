"""Label selectors, node selector terms, pod (anti-)affinity terms, taints and tolerations of manifests."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ...model.cluster import (
    LabelSelector,
    NodeSelectorTerm,
    PodAffinityTerm,
    Requirement,
    Taint,
    Toleration,
)
from .fields import as_list, as_mapping, as_text, required, scalar_text, show_value, str_map, weight


def taint(value: Any, what: str) -> Taint:
    t = as_mapping(value, what)
    return Taint(as_text(required(t, "key", what), f"{what}.key"), scalar_text(t.get("value"), f"{what}.value"),
                 _effect(t.get("effect"), what))


def _effect(value: Any, what: str, allow_empty: bool = False) -> str:
    effect = scalar_text(value, f"{what}.effect")
    if effect in ("NoSchedule", "PreferNoSchedule", "NoExecute") or (allow_empty and not effect):
        return effect
    raise ValueError(f"{what}: unknown taint effect {effect!r} (NoSchedule, PreferNoSchedule or NoExecute)")


def _requirements(items: Any, what: str, ops: tuple[str, ...]) -> tuple[Requirement, ...]:
    """Selector requirements, validated as the apiserver validates them."""
    out = []
    for i, item in enumerate(as_list(items, what)):
        where = f"{what}[{i}]"
        e = as_mapping(item, where)
        key = as_text(required(e, "key", where), f"{where}.key")
        op = e.get("operator")
        if op not in ops:
            raise ValueError(f"{where}: unknown operator {show_value(op)} (one of {', '.join(ops)})")
        values = tuple(scalar_text(v, f"{where}.values[{j}]") for j, v in enumerate(as_list(e.get("values"), f"{where}.values")))
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
    sel = as_mapping(value, what)
    labels, expressions = sel.get("matchLabels"), sel.get("matchExpressions")
    reqs = () if labels is None else \
        tuple(Requirement(k, "In", (v,)) for k, v in str_map(labels, f"{what}.matchLabels").items())
    if expressions is not None:
        reqs += _requirements(expressions, f"{what}.matchExpressions", ("In", "NotIn", "Exists", "DoesNotExist"))
    return LabelSelector(reqs)


def node_term(term: Any, what: str) -> NodeSelectorTerm:
    term = as_mapping(term, what)
    ops = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
    fields = _requirements(term.get("matchFields"), f"{what}.matchFields", ("In", "NotIn"))
    for f in fields:
        if f.key != "metadata.name":
            raise ValueError(f"{what}.matchFields: unsupported field {f.key!r} (only metadata.name)")
    return NodeSelectorTerm(_requirements(term.get("matchExpressions"), f"{what}.matchExpressions", ops), fields)


def _label_keys(value: Any, what: str) -> list[str]:
    return [as_text(k, f"{what}[{i}]") for i, k in enumerate(as_list(value, what))]


def with_label_keys(selector: LabelSelector, labels: dict[str, str], match: Any, mismatch: Any, what: str) -> LabelSelector:
    """matchLabelKeys / mismatchLabelKeys: the incoming pod's own values join the selector (In / NotIn).

    Upstream ignores keys the pod does not carry, and a null selector stays null.
    """
    if match is None and mismatch is None:
        return selector
    extra = tuple(Requirement(k, "In", (labels[k],)) for k in _label_keys(match, f"{what}.matchLabelKeys") if k in labels)
    extra += tuple(Requirement(k, "NotIn", (labels[k],)) for k in _label_keys(mismatch, f"{what}.mismatchLabelKeys")
                   if k in labels)
    if not extra or selector.nothing:
        return selector
    return LabelSelector(selector.requirements + extra)


def _pod_term(term: Any, pod_ns: str, ns_labels: dict[str, dict[str, str]], what: str,
              labels: dict[str, str] | None = None) -> PodAffinityTerm:
    term = as_mapping(term, what)
    key = term.get("topologyKey")
    if not key:
        raise ValueError(f"{what}: topologyKey is required")
    if type(key) is not str:
        key = as_text(key, f"{what}.topologyKey")
    listed = term.get("namespaces")
    names = set() if listed is None else \
        {as_text(n, f"{what}.namespaces[{i}]") for i, n in enumerate(as_list(listed, f"{what}.namespaces"))}
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
    return with_label_keys(label_selector(term.get("labelSelector"), f"{what}.labelSelector"), labels or {},
                            term.get("matchLabelKeys"), term.get("mismatchLabelKeys"), what)


def node_affinity(node_aff: dict[str, Any]) -> tuple[tuple[NodeSelectorTerm, ...] | None,
                                                      tuple[tuple[int, NodeSelectorTerm], ...]]:
    """Required node affinity (None: not set) and the weighted preferred terms."""
    if not node_aff:
        return None, ()
    required_terms = None
    req = node_aff.get("requiredDuringSchedulingIgnoredDuringExecution")
    if req is not None:
        base = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        terms = as_list(as_mapping(req, base).get("nodeSelectorTerms"), f"{base}.nodeSelectorTerms")
        required_terms = tuple(node_term(t, f"{base}.nodeSelectorTerms[{i}]") for i, t in enumerate(terms))
    pref = "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"
    preferred_terms = tuple(
        (weight(p, f"{pref}[{i}]"), node_term(required(p, "preference", f"{pref}[{i}]"), f"{pref}[{i}].preference"))
        for i, p in enumerate(as_list(node_aff.get("preferredDuringSchedulingIgnoredDuringExecution"), pref))
    )
    return required_terms, preferred_terms


@dataclass(frozen=True, slots=True)
class TermScope:
    """What a pod's (anti-)affinity terms are read against: its namespace, the namespaces' labels (for
    namespaceSelector) and its own labels (for matchLabelKeys)."""

    namespace: str
    ns_labels: dict[str, dict[str, str]]
    labels: dict[str, str]

    def required(self, section: dict[str, Any], name: str) -> tuple[PodAffinityTerm, ...]:
        if section.get("requiredDuringSchedulingIgnoredDuringExecution") is None:
            return ()
        what = f"spec.affinity.{name}.requiredDuringSchedulingIgnoredDuringExecution"
        return tuple(
            _pod_term(t, self.namespace, self.ns_labels, f"{what}[{i}]", self.labels)
            for i, t in enumerate(as_list(section.get("requiredDuringSchedulingIgnoredDuringExecution"), what))
        )

    def preferred(self, section: dict[str, Any], name: str) -> tuple[tuple[int, PodAffinityTerm], ...]:
        if section.get("preferredDuringSchedulingIgnoredDuringExecution") is None:
            return ()
        what = f"spec.affinity.{name}.preferredDuringSchedulingIgnoredDuringExecution"
        return tuple(
            (weight(p, f"{what}[{i}]"),
             _pod_term(required(p, "podAffinityTerm", f"{what}[{i}]"), self.namespace, self.ns_labels,
                       f"{what}[{i}].podAffinityTerm", self.labels))
            for i, p in enumerate(as_list(section.get("preferredDuringSchedulingIgnoredDuringExecution"), what))
        )


def topology_term(term: Any, what: str) -> NodeSelectorTerm:
    """A TopologySelectorTerm: each label expression's key must have one of its values (In)."""
    what = f"{what}.matchLabelExpressions"
    reqs = []
    for j, e in enumerate(as_list(as_mapping(term, what).get("matchLabelExpressions"), what)):
        e = as_mapping(e, f"{what}[{j}]")
        values = as_list(e.get("values"), f"{what}[{j}].values")
        reqs.append(Requirement(as_text(required(e, "key", f"{what}[{j}]"), f"{what}[{j}].key"), "In",
                                tuple(scalar_text(v, f"{what}[{j}].values[{k}]") for k, v in enumerate(values))))
    return NodeSelectorTerm(tuple(reqs))


def tolerations(spec: dict[str, Any]) -> tuple[Toleration, ...]:
    if spec.get("tolerations") is None:
        return ()
    out = []
    for i, item in enumerate(as_list(spec.get("tolerations"), "spec.tolerations")):
        what = f"spec.tolerations[{i}]"
        t = as_mapping(item, what)
        op = scalar_text(t.get("operator"), f"{what}.operator") or "Equal"
        if op not in ("Equal", "Exists"):
            raise ValueError(f"{what}: unknown operator {op!r} (Equal or Exists)")
        out.append(Toleration(scalar_text(t.get("key"), f"{what}.key"), op, scalar_text(t.get("value"), f"{what}.value"),
                              _effect(t.get("effect"), what, True)))
    return tuple(out)
