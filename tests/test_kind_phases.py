"""The kind protocol as small phases (engine.kinds.base): each kind implements exactly the phases its class declares,
the registry's tuple per phase is what `isinstance` says, and no phase carries a no-op a kind would have to know not
to override."""
from __future__ import annotations

import inspect

import pytest

from engine import kinds
from engine.kinds import base
from engine.kinds.base import PHASES, ClassFields, ClassReason, Filter, Kind, PreFilter, ReadsPods, Requeue

# each registry tuple and the phase it holds
TUPLES = {"CLASS_LABELS": base.ClassLabels, "FIELD_READERS": base.ClassFields, "PRE_FILTERS": base.PreFilter,
          "FILTERS": base.Filter, "READ_PODS": base.ReadsPods, "SCORES": base.Score, "EMITTERS": base.Emit,
          "CLASS_REASONS": base.ClassReason, "GUARDS": base.EvictionGuard, "RESERVES": base.ReserveAfterSolve}
# the only methods a phase defines for its kinds, each upstream's default (no hint function: always queue), or ours (a
# class reason's code: the kind's own)
DEFAULTS = {(ClassFields, "class_fields_in"), (Requeue, "hint"), (ClassReason, "class_code")}


def _own(cls: type) -> set[str]:
    """What a class itself defines, beyond Python's own attributes."""
    return {name for name in vars(cls) if not (name.startswith("__") and name.endswith("__")) and name != "_abc_impl"}


# attribute -> the phase that declares it (a kind's `events`, `checks`, and every phase method)
OWNER = {name: phase for phase in PHASES for name in _own(phase)}


def undeclared(cls: type) -> list[str]:
    """What a kind class (and its own bases) defines that belongs to a phase it does not declare, or to no phase at
    all when public: a hook its callers would have to find by identity."""
    mine = [c for c in cls.__mro__ if c not in (*PHASES, Kind, object)]
    out = []
    for c in mine:
        for name in sorted(_own(c)):
            phase = OWNER.get(name)
            if phase is not None and not issubclass(cls, phase):
                out.append(f"{c.__name__}.{name} without {phase.__name__}")
            elif phase is None and not name.startswith("_") and name not in _own(Kind):  # name, code: every kind's
                out.append(f"{c.__name__}.{name} in no phase")
    return out


def unimplemented(cls: type) -> list[str]:
    """The phases a kind class declares but does nothing in: an abstract method left undefined, or (a phase whose
    methods have defaults) nothing of the phase defined by the kind itself."""
    mine = [c for c in cls.__mro__ if c not in (*PHASES, Kind, object)]
    defined = set().union(*(_own(c) for c in mine))
    out = sorted(cls.__abstractmethods__) if inspect.isabstract(cls) else []
    for phase in PHASES:
        if issubclass(cls, phase) and _own(phase) and not _own(phase) & defined:
            out.append(phase.__name__)
    if issubclass(cls, ReadsPods) and "filter" not in defined:
        out.append("ReadsPods")
    return out


@pytest.mark.parametrize("kind", kinds.KINDS, ids=lambda k: k.name)
def test_each_kind_implements_exactly_the_phases_it_declares(kind: Kind) -> None:
    assert undeclared(type(kind)) == []
    assert unimplemented(type(kind)) == []


def test_each_phase_tuple_is_what_isinstance_says() -> None:
    for name, phase in TUPLES.items():
        assert getattr(kinds, name) == tuple(k for k in kinds.KINDS if isinstance(k, phase)), name
    assert set(kinds.REQUEUES.values()) == {k for k in kinds.KINDS if isinstance(k, Requeue)}
    assert set(kinds.BY_CHECK.values()) == {k for k in kinds.KINDS if isinstance(k, base.Explain)}
    assert all(getattr(kinds, name) for name in TUPLES)  # every phase has a kind (none is dead)


def test_the_base_is_a_name_and_a_code_and_a_phase_defines_only_what_a_kind_must_define() -> None:
    assert _own(Kind) == {"name", "code"}  # the plugin it follows, the reason code of what it says
    for phase in PHASES:
        defaults = {name for name in _own(phase) if callable(getattr(phase, name))
                    and name not in getattr(phase, "__abstractmethods__", ())}
        assert defaults == {name for p, name in DEFAULTS if p is phase}, phase.__name__


def test_the_checks_catch_a_method_without_its_phase_and_a_phase_without_its_method() -> None:
    class Stray(Filter):
        name = "Stray"

        def filter(self, spec, batch, out) -> None: ...

        def prefilter(self, spec, batch) -> None:  # a PreFilter's method, the phase not declared
            return None

        def pre_filter(self, compiled, c) -> None:  # a hook of no phase
            return None

    class Idle(PreFilter, Requeue):
        name = "Idle"

        def prefilter(self, spec, batch) -> None:
            return None

    class Lazy(ReadsPods):  # declares a phase, defines none of its methods
        name = "Lazy"

    assert undeclared(Stray) == ["Stray.pre_filter in no phase", "Stray.prefilter without PreFilter"]
    assert unimplemented(Idle) == ["Requeue"]  # no events: it says nothing of what may help
    assert unimplemented(Lazy) == ["filter", "Filter", "ReadsPods"]
    with pytest.raises(TypeError):
        Lazy()  # type: ignore[abstract]
