"""DRA's CEL (resource.k8s.io/v1 DeviceClass and ResourceClaim `selectors[].cel.expression`), evaluated as
Kubernetes evaluates it, on cel-expr-python (Google's CEL runtime, cel-cpp). Imported only when a snapshot has a
selector to judge (engine.devices.dra.Selectors).

`compile(expression)` gives a `Program` or raises `CompileError`: a parse or type error, a function upstream's
environment does not have (or one this runtime cannot give, "policy-scheduler does not support ..."), an
expression over upstream's length limit, or one whose estimated worst-case cost exceeds upstream's cost limit
(cost.py follows cel-go's estimator). `Program.matches(device(d))` is the selector's verdict for a device, or
raises `EvaluationError` with cel-go's words ("no such key: model"); a result that is not a bool is an error too.

The environment (env.py) is upstream's: standard macros and functions with cross-type numeric comparisons,
optional types, strings v2, sets, two-variable comprehensions, lists v3, `cel.bind`, and Kubernetes' lists,
regex, quantity, semver, IP and CIDR libraries (kube.py). Not here: the URL and format libraries (a selector
naming them is refused at compile, saying so); vet.py has what else differs.
"""

from __future__ import annotations

from typing import Any

from cel_expr_python import cel

from ...model.cluster import Device, Version
from . import env, errors, kube, vet
from .cost import MAX_COST, estimate
from .errors import CelError, CompileError, EvaluationError

__all__ = ["MAX_COST", "MAX_LENGTH", "CelError", "CompileError", "DeviceValue", "EvaluationError", "Program", "compile",
           "device"]

MAX_LENGTH = 10 * 1024  # resourceapi.CELSelectorExpressionMaxLength


class Program:
    """One compiled selector: its checked expression and estimated worst-case cost."""

    def __init__(self, expression: str, compiled: Any, cost: int, domains: dict[str, frozenset[str] | None]) -> None:
        self.expression = expression
        self.compiled = compiled
        self.cost = cost
        self.domains: dict[str, frozenset[str]] = {name: found for name, found in domains.items() if found}

    def matches(self, found: Any) -> bool:
        """The verdict for one device (`found` from `device`): True or False, else EvaluationError."""
        value = found if isinstance(found, DeviceValue) else DeviceValue(found)
        try:
            result = self.compiled.eval(value.activation(self.domains))
        except RuntimeError as exc:  # cel-cpp raises for values Python cannot take (none reach our functions)
            raise EvaluationError(errors.runtime_text(str(exc))) from None
        kind = result.type()
        if kind == cel.Type.BOOL:
            return bool(result.value())
        if kind == cel.Type.ERROR:
            raise EvaluationError(errors.runtime_text(str(result.value())))
        raise EvaluationError(f"CEL result of type {errors.type_name(kind)} could not be converted to bool")


class DeviceValue:
    """The `device` variable for one device, converted for cel-cpp once (about 1.5 µs) and reused by every
    selector. An unknown domain of `device.attributes` or `.capacity` reads as an empty map, as upstream's
    newStringInterfaceMapWithDefault: a selector naming domains the device lacks gets them, empty."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self.activations: dict[tuple[tuple[str, str], ...], Any] = {}

    def activation(self, domains: dict[str, frozenset[str]]) -> Any:
        dev = self.data["device"]
        missing = tuple(sorted((name, d) for name, found in domains.items() for d in found if d not in dev[name]))
        if missing not in self.activations:
            data = self.data
            if missing:
                dev = dict(dev)
                for name, domain in missing:
                    dev[name] = {**dev[name], domain: {}}
                data = {"device": dev}
            self.activations[missing] = env.environment().Activation(data=data)
        return self.activations[missing]


def compile(expression: str) -> Program:
    """Raises CompileError in upstream's words; the caller caches per expression."""
    if len(expression) > MAX_LENGTH:
        raise CompileError(f"must be no more than {MAX_LENGTH} bytes, was {len(expression)}")
    environment = env.environment()
    try:
        compiled = environment.compile(expression)
    except RuntimeError as exc:
        raise CompileError(vet.unsupported(environment, expression) or errors.compile_text(str(exc))) from None
    vetted = vet.check(compiled)
    cost = estimate(vetted)
    if cost > MAX_COST:
        raise CompileError(f"cost limit exceeded: estimated worst-case cost {cost} exceeds the limit of {MAX_COST} "
                           "(resourceapi.CELSelectorExpressionMaxCost)")
    return Program(expression, compiled, cost, vetted.domains)


def _value(value: object) -> Any:
    if isinstance(value, Version):
        return kube.semver(value.text)
    return value


def device(found: Device) -> DeviceValue:
    """The activation for one device: `device` with driver, attributes and capacity by domain,
    allowMultipleAllocations (built once per device and snapshot by engine.devices.dra.Selectors)."""
    attributes: dict[str, dict[str, Any]] = {}
    for domain, name, value in found.attributes:
        attributes.setdefault(domain, {})[name] = _value(value)
    capacity: dict[str, dict[str, Any]] = {}
    for domain, name, milli in found.capacity:
        capacity.setdefault(domain, {})[name] = kube.quantity_message(kube.Fraction(milli, 1000))
    return DeviceValue({"device": {"driver": found.driver, "attributes": attributes, "capacity": capacity,
                                   "allowMultipleAllocations": found.multiple}})
