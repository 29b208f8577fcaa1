"""LabelColumn.where answers as Requirement.matches does, node by node, for every operator (In and NotIn go by their
values' codes, the rest value by value)."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.model.cluster import Requirement
from engine.model.tables import LabelColumn

VALUES = st.sampled_from(["a", "b", "c", "1", "7", ""])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), VALUES), min_size=1, max_size=12),
       st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]), st.lists(VALUES, min_size=1, max_size=3))
def test_where_is_matches_node_by_node(per_node, operator, values) -> None:
    column = LabelColumn.from_values(per_node)
    requirement = Requirement("k", operator, tuple(values))
    want = [requirement.matches({} if v is None else {"k": v}) for v in per_node]
    assert column.where(requirement).tolist() == want
