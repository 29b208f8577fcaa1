"""The CEL environment Kubernetes gives DRA selectors (k8s.io/dynamic-resource-allocation/cel/compile.go on
k8s.io/apiserver/pkg/cel/environment/base.go), assembled on cel-cpp: the standard library with cross-type numeric
comparisons, optional types, strings v2, sets, two-variable comprehensions, lists v3, bindings, and the
Kubernetes libraries of `kube` declared with upstream's overload ids. One environment per process."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings

from . import kube

# cel-cpp's checker declares no int/uint/double mixes for < <= > >=; the runtime has them. The standard declarations
# of the four are left out and declared again with all of upstream's overloads (CrossTypeNumericComparisons).
_ORDERING = {"_<_": "less", "_<=_": "less_equals", "_>_": "greater", "_>=_": "greater_equals"}
_EXCLUDED = "\n".join(f"    - name: {name}" for name in (*_ORDERING, "string"))
_CONFIG = f"""
name: dra
stdlib:
  exclude_functions:
{_EXCLUDED}
extensions:
  - name: lists
  - name: sets
  - name: two-var-comprehensions
"""

_NUMBERS = (("int", "int64"), ("uint", "uint64"), ("double", "double"))
_ORDERED = (("string", "string"), ("bool", "bool"), ("bytes", "bytes"), ("timestamp", "timestamp"),
            ("duration", "duration"))


def cel_type(name: str) -> Any:
    """A cel.Type from a type name of kube.Overload (`list(int)`, `Quantity`, ...)."""
    if name.startswith("list("):
        return cel.Type.List(cel_type(name[5:-1]))
    simple = {"int": cel.Type.INT, "uint": cel.Type.UINT, "double": cel.Type.DOUBLE, "bool": cel.Type.BOOL,
              "string": cel.Type.STRING, "bytes": cel.Type.BYTES, "dyn": cel.Type.DYN,
              "duration": cel.Type.DURATION, "timestamp": cel.Type.TIMESTAMP}
    if name in simple:
        return simple[name]
    return cel.Type({"Quantity": "kubernetes.Quantity", "Semver": "kubernetes.Semver", "IP": "net.IP",
                     "CIDR": "net.CIDR"}[name])


def _kind(name: str) -> str:
    """What cel-cpp's runtime dispatches on: two overloads of one kind signature share one implementation."""
    if name.startswith("list("):
        return "list"
    return "message" if name[0].isupper() else name


def _ordering() -> list[Any]:
    out = []
    for function, word in _ORDERING.items():
        overloads = [cel.Overload(f"{word}_{a}" if a == b else f"{word}_{a}_{b}", cel.Type.BOOL,
                                  [cel_type(x), cel_type(y)])
                     for x, a in _NUMBERS for y, b in _NUMBERS]
        overloads += [cel.Overload(f"{word}_{a}", cel.Type.BOOL, [cel_type(x), cel_type(x)]) for x, a in _ORDERED]
        out.append(cel.FunctionDecl(function, overloads))
    return out


def _dispatch(group: list[kube.Overload]) -> Callable[..., Any]:
    """One implementation for overloads cel-cpp cannot tell apart (Quantity and Semver are both messages):
    the Python types of the arguments pick the overload."""
    if len(group) == 1:
        return _guarded(group[0].impl)

    def impl(*args: Any) -> Any:
        for overload in group:
            if all(_fits(name, arg) for name, arg in zip(overload.params, args)):
                return overload.impl(*args)
        raise kube.KubeError(f"no such overload: {group[0].function}")
    return _guarded(impl)


def _fits(name: str, arg: Any) -> bool:
    full = {"Quantity": "kubernetes.Quantity", "Semver": "kubernetes.Semver", "IP": "net.IP", "CIDR": "net.CIDR"}
    if name in full:
        return getattr(getattr(arg, "DESCRIPTOR", None), "full_name", None) == full[name]
    return True


def _guarded(impl: Callable[..., Any]) -> Callable[..., Any]:
    """cel-cpp turns an exception into the call's error value; keep upstream's words (no Python repr)."""
    def call(*args: Any) -> Any:
        try:
            return impl(*args)
        except kube.KubeError:
            raise
        except (ValueError, TypeError, OverflowError) as exc:
            raise kube.KubeError(str(exc)) from None
    return call


_STRING = (("bool", "bool"), ("int", "int64"), ("uint", "uint64"), ("double", "double"), ("bytes", "bytes"),
           ("string", "string"), ("timestamp", "timestamp"), ("duration", "duration"))


def _kubernetes() -> tuple[Any, list[Any]]:
    """The Kubernetes libraries: overloads cel-cpp dispatches apart go into one extension (which may add overloads
    to a function another library has, such as `indexOf`); a group sharing one implementation is declared apart,
    the implementation on its first overload only (an extension would register the others too, and clash)."""
    groups: dict[tuple[str, bool, tuple[str, ...]], list[kube.Overload]] = {}
    for overload in kube.OVERLOADS:
        groups.setdefault((overload.function, overload.member, tuple(map(_kind, overload.params))), []).append(overload)
    alone: dict[str, list[Any]] = {}
    shared: dict[str, list[Any]] = {"string": [cel.Overload(f"{word}_to_string", cel.Type.STRING, [cel_type(name)])
                                               for name, word in _STRING]}
    for group in groups.values():
        results = {o.result for o in group}
        for i, overload in enumerate(group):
            declared = overload.result if len(results) == 1 or i else "dyn"
            extra = {"impl": _dispatch(group)} if i == 0 else {}
            (shared if len(group) > 1 or overload.function in shared else alone).setdefault(overload.function, []).append(
                cel.Overload(overload.id, cel_type(declared), [cel_type(p) for p in overload.params],
                             is_member=overload.member, **extra))
    return (cel.CelExtension("kubernetes", [cel.FunctionDecl(name, ovs) for name, ovs in alone.items()]),
            [cel.FunctionDecl(name, ovs) for name, ovs in shared.items()])


@cache
def environment() -> Any:
    """Built on the first selector (2 ms, after 60 ms importing cel-expr-python); `device` is declared a map of
    string to dyn (engine.devices.cel.device builds it; vet.py checks its fields)."""
    extension, declarations = _kubernetes()
    return cel.NewEnv(
        descriptor_pool=kube.POOL,
        config=cel.NewEnvConfigFromYaml(_CONFIG),
        variables={"device": cel.Type.Map(cel.Type.STRING, cel.Type.DYN)},
        extensions=[ext_strings.ExtStrings(2), ext_optional.ExtOptional(), ext_bindings.ExtBindings(), extension],
        functions=_ordering() + declarations,
    )
