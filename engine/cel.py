"""DRA's CEL environment (resource.k8s.io device selectors) on cel-python: the `device` variable and the functions
DRA documents (`quantity`, `semver`, `compareTo`, `isGreaterThan`, `isLessThan`, `asInteger`, ...). Imported only
when a snapshot has a selector to judge (engine.dra.Selectors)."""

from __future__ import annotations

import re
from typing import Any

import celpy
from celpy import celtypes

from .model import Device, Version
from .quantity import QuantityError, to_milli


class Quantity(celtypes.IntType):
    """A resource.Quantity in CEL, held in milli-units (exact for every quantity a device publishes)."""


class Semver(celtypes.StringType):
    """A semantic version in CEL; ordered by `_semver_key`."""


_SEMVER = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$")


def _semver_key(text: str) -> tuple:
    m = _SEMVER.match(text)
    if m is None:
        raise ValueError(f"invalid semver {text!r}")
    pre = m.group(4)
    parts = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split(".")) if pre else ()
    return int(m.group(1)), int(m.group(2)), int(m.group(3)), not pre, parts


def _compare(a: Any, b: Any) -> celtypes.IntType:
    left: Any = _semver_key(str(a)) if isinstance(a, Semver) else int(a)
    right: Any = _semver_key(str(b)) if isinstance(a, Semver) else int(b)
    return celtypes.IntType((left > right) - (left < right))


def _quantity(text: Any) -> Quantity:
    try:
        return Quantity(to_milli(str(text)))
    except QuantityError as exc:
        raise ValueError(str(exc)) from None


def _semver(text: Any) -> Semver:
    _semver_key(str(text))  # raises for an invalid version
    return Semver(str(text))


FUNCTIONS: dict[str, Any] = {
    "quantity": _quantity,
    "semver": _semver,
    "isSemver": lambda text: celtypes.BoolType(_SEMVER.match(str(text)) is not None),
    "compareTo": _compare,
    "isGreaterThan": lambda a, b: celtypes.BoolType(_compare(a, b) > 0),
    "isLessThan": lambda a, b: celtypes.BoolType(_compare(a, b) < 0),
    "asInteger": lambda q: celtypes.IntType(int(q) // 1000),
    "asApproximateFloat": lambda q: celtypes.DoubleType(int(q) / 1000),
    "major": lambda v: celtypes.IntType(_semver_key(str(v))[0]),
    "minor": lambda v: celtypes.IntType(_semver_key(str(v))[1]),
    "patch": lambda v: celtypes.IntType(_semver_key(str(v))[2]),
}


def _cel_value(value: object) -> Any:
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int):
        return celtypes.IntType(value)
    if isinstance(value, Version):
        return Semver(value.text)
    return celtypes.StringType(str(value))


def device(found: Device) -> Any:
    """The `device` variable of a DRA selector: driver, attributes and capacity by domain."""
    attributes: dict[str, dict[str, Any]] = {}
    for domain, name, value in found.attributes:
        attributes.setdefault(domain, {})[name] = _cel_value(value)
    capacity: dict[str, dict[str, Any]] = {}
    for domain, name, milli in found.capacity:
        capacity.setdefault(domain, {})[name] = Quantity(milli)
    return celtypes.MapType({
        celtypes.StringType("driver"): celtypes.StringType(found.driver),
        celtypes.StringType("attributes"): _map_of_maps(attributes),
        celtypes.StringType("capacity"): _map_of_maps(capacity),
        celtypes.StringType("allowMultipleAllocations"): celtypes.BoolType(False),
    })


def _map_of_maps(found: dict[str, dict[str, Any]]) -> Any:
    return celtypes.MapType({celtypes.StringType(d): celtypes.MapType({celtypes.StringType(k): v for k, v in m.items()})
                             for d, m in found.items()})


def environment() -> Any:
    return celpy.Environment()


def program(env: Any, expression: str) -> Any:
    """Raises ValueError with the parser's words for an expression CEL rejects."""
    try:
        return env.program(env.compile(expression), functions=FUNCTIONS)
    except celpy.CELParseError as exc:
        raise ValueError(f"invalid CEL expression {expression!r}: {exc}") from None


def holds(prog: Any, activation: dict[str, Any]) -> bool:
    """True only for a boolean true: an error (a missing attribute) or any other value selects nothing."""
    try:
        result = prog.evaluate(activation)
    except (celpy.CELEvalError, ValueError, TypeError, KeyError):
        return False
    return isinstance(result, celtypes.BoolType) and bool(result)
