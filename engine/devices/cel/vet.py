"""What cel-cpp's checker lets through but upstream's environment refuses, and what this runtime cannot give:
the checks run on each checked selector before its cost is estimated.

- the result must be a bool or unknown (dyn); a map or list literal must be homogeneous; duration, timestamp
  and regex literals must be valid (upstream's AST validators); `device` has only its four fields;
- functions and overloads upstream has that this runtime cannot give are refused saying "policy-scheduler does
  not support ..." (the URL and format libraries, `optional.unwrap`, lists functions over durations and
  timestamps); upstream refuses an optional value where a plain one is expected, and so do we (cel-cpp would
  crash handing one to a Python function);
- `Vetted.domains`: the domains a selector reads from `device.attributes` / `device.capacity` by a literal key,
  so an unknown domain can read as an empty map (upstream's newStringInterfaceMapWithDefault); None when the
  selector looks at the map otherwise (iterates it, tests a key), where no made-up domain may appear.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from . import kube
from .checked import Checked, Expr, Type, decode
from .errors import CompileError

DEVICE_FIELDS = ("driver", "attributes", "capacity", "allowMultipleAllocations")
_OURS = ("kubernetes.", "net.")
_URL = ("url", "isURL", "getScheme", "getHost", "getHostname", "getPort", "getEscapedPath", "getQuery")
_FORMATS = ("dns1123Label", "dns1123Subdomain", "dns1035Label", "qualifiedName", "dns1123LabelPrefix",
            "dns1123SubdomainPrefix", "dns1035LabelPrefix", "labelValue", "uri", "uuid", "byte", "date", "datetime")
UNSUPPORTED = {
    **dict.fromkeys(_URL, "the URL library"),
    **dict.fromkeys(("validate", "format.named", *(f"format.{name}" for name in _FORMATS)), "the format library"),
    **dict.fromkeys(("optional.unwrap", "unwrapOpt"), "optional lists"),
    "cel.@mapInsert": "transformMap and transformMapEntry",  # cel-cpp's runtime lacks what their expansion calls
}
_PYTHON = {o.id for o in kube.OVERLOADS}


@dataclass
class Vetted:
    checked: Checked
    domains: dict[str, frozenset[str] | None] = field(default_factory=dict)  # attributes/capacity -> literal keys


def unsupported(environment: Any, expression: str) -> str | None:
    """For an expression the checker refused: the reason, when it names something this runtime lacks."""
    try:
        parsed = decode(environment.compile(expression, disable_check=True).serialize())
    except RuntimeError:
        return None
    names = sorted({name for node in _walk(parsed.expr) if node.kind == "call"
                    for name in (node.name, _qualified(node)) if name in UNSUPPORTED})
    if not names:
        return None
    return f"policy-scheduler does not support {', '.join(names)} ({', '.join(sorted({UNSUPPORTED[n] for n in names}))})"


def _qualified(call: Expr) -> str:
    """`format.named` for a call parsed as member `named` of the identifier `format` (before checking)."""
    parts, target = [call.name], call.target
    while target is not None and target.kind == "select" and target.operand is not None:
        parts.append(target.name)
        target = target.operand
    if target is None or target.kind != "ident":
        return ""
    return ".".join([target.name, *reversed(parts)])


def _walk(node: Expr) -> Iterator[Expr]:
    yield node
    for child in node.children():
        yield from _walk(child)


def _pairs(node: Expr, parent: Expr | None = None) -> Iterator[tuple[Expr, Expr | None]]:
    yield node, parent
    for child in node.children():
        yield from _pairs(child, node)


def check(compiled: Any) -> Vetted:
    """Raises CompileError for what upstream refuses or this runtime cannot do; else the vetted AST."""
    checked = decode(compiled.serialize())
    _result(checked)
    for node, parent in _pairs(checked.expr):
        _node(checked, node, parent)
    return Vetted(checked, {name: _domains(checked, name) for name in ("attributes", "capacity")})


def _result(checked: Checked) -> None:
    t = upstream_type(checked, checked.expr)
    if t.kind not in ("bool", "dyn", "any", "error"):
        raise CompileError(f"must evaluate to bool or the unknown type, not {t}")


def upstream_type(checked: Checked, node: Expr) -> Type:
    """The checked type, or upstream's result type where our declaration says dyn (one Python function serves
    overloads of several result types)."""
    t = checked.type(node)
    ids = checked.overloads.get(node.id, ())
    results = {o.result for o in kube.OVERLOADS if o.id in ids}
    if t.kind == "dyn" and len(results) == 1 and ids and all(i in _PYTHON for i in ids):
        name = results.pop()
        return Type(name) if name.islower() and "(" not in name else Type("message", name=name)
    return t


def _node(checked: Checked, node: Expr, parent: Expr | None) -> None:
    if node.kind == "call":
        _call(checked, node)
    elif node.kind in ("list", "map"):
        _homogeneous(checked, node)
    elif node.kind == "struct":
        raise CompileError(f"compilation failed: ERROR: undeclared reference to '{node.name}' (creating messages is "
                           "not part of the DRA environment)")
    elif node.kind == "select" and node.operand is not None:
        _select(checked, node)
    if checked.type(node).name == "optional_type" and parent is not None:
        _optional(checked, node, parent)


def _call(checked: Checked, node: Expr) -> None:
    if node.name in UNSUPPORTED:
        raise CompileError(f"policy-scheduler does not support {node.name} ({UNSUPPORTED[node.name]})")
    ids = checked.overloads.get(node.id, ())
    refused = [kube.UNSUPPORTED_OVERLOADS[i] for i in ids if i in kube.UNSUPPORTED_OVERLOADS]
    if refused and len(refused) == len(ids):
        raise CompileError(f"policy-scheduler does not support {refused[0]}")
    if node.name in ("duration", "timestamp") and node.args and node.args[0].kind == "const" \
            and isinstance(node.args[0].value, str):
        _literal(node.name, node.args[0].value)
    if node.name in ("matches", "find", "findAll"):
        args = node.args if node.target is not None else node.args[1:]
        if args and args[0].kind == "const" and isinstance(args[0].value, str):
            _regex(node.name, args[0].value)


def _literal(function: str, text: str) -> None:
    from . import env
    try:
        value = env.environment().compile(f"{function}({_quote(text)})").eval()
    except RuntimeError:
        value = None
    if value is None or value.type().name() == "ERROR":
        raise CompileError(f"compilation failed: ERROR: invalid {function} argument")


def _regex(function: str, pattern: str) -> None:
    from . import env
    try:
        value = env.environment().compile(f"''.matches({_quote(pattern)})").eval()
        ok = value.type().name() != "ERROR"
    except RuntimeError:
        ok = False
    if not ok:
        raise CompileError(f"compilation failed: ERROR: invalid {function} argument" if function == "matches" else
                           f"program instantiation failed: error parsing regexp: invalid regex {pattern!r}")
    if function != "matches":
        try:
            kube.pattern(pattern)
        except kube.KubeError as exc:
            raise CompileError(str(exc)) from None


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r") + '"'


def _homogeneous(checked: Checked, node: Expr) -> None:
    """cel-go's ValidateHomogeneousAggregateLiterals: every element (key, value) of one type."""
    if node.kind == "list":
        found = [_unwrap(checked.type(e)) if i in node.optional else checked.type(e) for i, e in enumerate(node.args)]
        columns = [found]
    else:
        columns = [[checked.type(k) for k, _, _ in node.entries],
                   [_unwrap(checked.type(v)) if opt else checked.type(v) for _, v, opt in node.entries]]
    for column in columns:
        for t in column[1:]:
            if t != column[0]:
                raise CompileError(f"compilation failed: ERROR: expected type '{column[0]}' but found '{t}'")


def _unwrap(t: Type) -> Type:
    return t.params[0] if t.name == "optional_type" and t.params else t


def _select(checked: Checked, node: Expr) -> None:
    operand = node.operand
    assert operand is not None
    if operand.kind == "ident" and operand.name == "device" and node.name not in DEVICE_FIELDS:
        raise CompileError(f"compilation failed: ERROR: undefined field '{node.name}'")
    t = checked.type(operand)
    if t.kind == "message" and t.name.startswith(_OURS):
        raise CompileError(f"compilation failed: ERROR: undefined field '{node.name}'")


def _optional(checked: Checked, node: Expr, parent: Expr) -> None:
    """An optional value may only go where upstream takes one (optional functions, `[?`, `?:` entries,
    equality, comprehensions and bindings keep its type): never into a Python function or `dyn()`, where cel-cpp
    would crash handing it over."""
    if parent.kind != "call":
        return
    if parent.name == "dyn":
        raise CompileError("policy-scheduler does not support an optional value as dyn")
    if set(checked.overloads.get(parent.id, ())) & _PYTHON:
        raise CompileError(f"compilation failed: ERROR: found no matching overload for '{parent.name}' applied to "
                           f"an argument of type '{checked.type(node)}'")
    if parent.name == "_?_:_" and node is not parent.args[0] and checked.type(parent).name != "optional_type":
        raise CompileError("policy-scheduler does not support a conditional mixing optional and plain values")


def _domains(checked: Checked, name: str) -> frozenset[str] | None:
    """The literal keys `device.<name>` is indexed with, or None when it is used any other way."""
    keys: set[str] = set()
    for node, parent in _pairs(checked.expr):
        if not (node.kind == "select" and node.name == name and not node.test_only and node.operand is not None
                and node.operand.kind == "ident" and node.operand.name == "device"):
            continue
        if parent is not None and parent.kind == "call" and parent.name in ("_[_]", "_[?_]", "_?._") \
                and parent.args[0] is node and parent.args[1].kind == "const" and isinstance(parent.args[1].value, str):
            keys.add(parent.args[1].value)
        elif parent is not None and parent.kind == "select" and not parent.test_only:
            keys.add(parent.name)
        else:
            return None
    return frozenset(keys)
