"""`ClassMatcher.matching` (engine/kinds/context.py) narrows a selector with an `In` requirement (matchLabels) to
the classes carrying one of its values before asking `matches` (issue 30: terms × classes was compile's largest
cost with many apps): the answer is the classes every term matches, in order, as asking each class would give."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.kinds.context import ClassMatcher
from engine.model.cluster import LabelSelector, Pod, PodAffinityTerm, Requirement

KEYS, VALUES, NAMESPACES = ("app", "tier"), ("a", "b", "c"), ("ns1", "ns2")

samples = st.lists(st.builds(lambda ns, labels: Pod(ns, "p", labels=labels), st.sampled_from(NAMESPACES),
                             st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=2)),
                   max_size=12)
requirements = st.builds(Requirement, st.sampled_from(KEYS), st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]),
                         st.lists(st.sampled_from(VALUES), min_size=1, max_size=2, unique=True).map(tuple))
terms = st.builds(PodAffinityTerm, st.builds(LabelSelector, st.lists(requirements, max_size=3).map(tuple), st.booleans()),
                  st.none() | st.frozensets(st.sampled_from(NAMESPACES), max_size=2), st.just("zone"))


@settings(max_examples=300, deadline=None)
@given(samples, st.lists(terms, min_size=1, max_size=4))
def test_matching_is_every_class_the_term_matches_in_order(pods: list[Pod], asked: list[PodAffinityTerm]) -> None:
    matcher = ClassMatcher(pods)
    for term in asked * 2:  # asked again: the remembered answer
        assert matcher.matching(term) == [j for j, p in enumerate(pods) if term.matches(p)]
    assert matcher.matching_all(tuple(asked)) == [j for j, p in enumerate(pods) if all(t.matches(p) for t in asked)]


def test_a_match_labels_selector_is_answered_from_the_classes_carrying_its_value() -> None:
    pods = [Pod("ns1", "p", labels={"app": v}) for v in ("a", "b", "a", "c")]
    term = PodAffinityTerm(LabelSelector((Requirement("app", "In", ("a", "c")),)), frozenset({"ns1"}), "zone")
    assert ClassMatcher(pods).matching(term) == [0, 2, 3]
    assert ClassMatcher(pods).matching(PodAffinityTerm(LabelSelector(()), None, "zone")) == [0, 1, 2, 3]
