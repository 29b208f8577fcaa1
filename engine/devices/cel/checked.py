"""The checked AST cel-cpp hands back (`Expression.serialize()`: a google.protobuf.Any holding a
cel.expr.CheckedExpr, or a ParsedExpr before checking), decoded from the protobuf wire format into small
Python objects: the expression tree, each node's type and, for calls, the overloads the checker chose. Only the
fields the checks and the cost estimate read are kept (cel/expr/syntax.proto and checked.proto give the numbers)."""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_WIRE = tuple[int, int, Any]  # field number, wire type, value (int or bytes)


def _varint(buf: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7


def _fields(buf: bytes) -> list[_WIRE]:
    out: list[_WIRE] = []
    at = 0
    while at < len(buf):
        key, at = _varint(buf, at)
        number, wire = key >> 3, key & 7
        value: Any
        if wire == 0:
            value, at = _varint(buf, at)
        elif wire == 1:
            value, at = buf[at:at + 8], at + 8
        elif wire == 2:
            size, at = _varint(buf, at)
            value, at = buf[at:at + size], at + size
        elif wire == 5:
            value, at = buf[at:at + 4], at + 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        out.append((number, wire, value))
    return out


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


@dataclass(frozen=True, slots=True)
class Type:
    """A checked type: `kind` is dyn, null, bool, int, uint, double, string, bytes, any, timestamp, duration,
    list, map, message (name), type_param (name), type, error, function, abstract (name: optional_type ...);
    `wrapper` marks a protobuf wrapper of a primitive; `params` are element, key/value, or abstract parameters."""

    kind: str
    name: str = ""
    params: tuple[Type, ...] = ()
    wrapper: bool = False

    def __str__(self) -> str:
        inner = ", ".join(str(p) for p in self.params)
        label = self.name or self.kind
        return f"{label}({inner})" if self.params else label


DYN = Type("dyn")
_PRIMITIVES = {1: "bool", 2: "int", 3: "uint", 4: "double", 5: "string", 6: "bytes"}
_WELL_KNOWN = {1: "any", 2: "timestamp", 3: "duration"}


def _type(buf: bytes) -> Type:
    for number, _, value in _fields(buf):
        if number == 1:
            return DYN
        if number == 2:
            return Type("null")
        if number in (3, 4):
            return Type(_PRIMITIVES[value], wrapper=number == 4)
        if number == 5:
            return Type(_WELL_KNOWN[value])
        if number == 6:
            return Type("list", params=tuple(_type(v) for n, _, v in _fields(value) if n == 1))
        if number == 7:
            sub = {n: _type(v) for n, _, v in _fields(value)}
            return Type("map", params=(sub.get(1, DYN), sub.get(2, DYN)))
        if number == 8:
            return Type("function")
        if number == 9:
            return Type("message", name=value.decode())
        if number == 10:
            return Type("type_param", name=value.decode())
        if number == 11:
            return Type("type", params=(_type(value),))
        if number == 12:
            return Type("error")
        if number == 14:
            parts = _fields(value)
            name = next((v.decode() for n, _, v in parts if n == 1), "")
            return Type("abstract", name=name, params=tuple(_type(v) for n, _, v in parts if n == 2))
    return DYN


@dataclass(slots=True)
class Expr:
    """One node. kind: const, ident, select, call, list, map, struct, comprehension. For const `value` is the
    Python value (str, bytes, int, float, bool, None; `uint` set for an unsigned literal); ident and select carry
    `name`; select has `operand` and `test_only`; call has `name` (the function), `target` and `args`; list has
    `args` (elements) and `optional` (indices of `[?x]` elements); map has `entries` (key, value, optional);
    comprehension has `iter_var`, `iter_var2`, `accu_var` and `parts` (range, init, condition, step, result)."""

    id: int
    kind: str
    name: str = ""
    value: object = None
    uint: bool = False
    operand: Expr | None = None
    test_only: bool = False
    target: Expr | None = None
    args: list[Expr] = field(default_factory=list)
    optional: tuple[int, ...] = ()
    entries: list[tuple[Expr, Expr, bool]] = field(default_factory=list)
    iter_var: str = ""
    iter_var2: str = ""
    accu_var: str = ""
    parts: tuple[Expr, ...] = ()

    def children(self) -> list[Expr]:
        out = [self.operand] if self.operand else []
        out += [self.target] if self.target else []
        out += self.args + [e for k, v, _ in self.entries for e in (k, v)] + list(self.parts)
        return out


def _constant(node: Expr, buf: bytes) -> None:
    for number, _, value in _fields(buf):
        if number == 1:
            node.value = None
        elif number == 2:
            node.value = bool(value)
        elif number == 3:
            node.value = _signed(value)
        elif number == 4:
            node.value, node.uint = value, True
        elif number == 5:
            node.value = struct.unpack("<d", value)[0]
        elif number == 6:
            node.value = value.decode()
        elif number == 7:
            node.value = bytes(value)


def _expr(buf: bytes) -> Expr:
    parts = _fields(buf)
    node = Expr(id=next((v for n, _, v in parts if n == 2), 0), kind="const")
    for number, _, value in parts:
        if number in _KINDS:
            _KINDS[number](node, value)
    return node


def _ident(node: Expr, buf: bytes) -> None:
    node.kind = "ident"
    node.name = next((v.decode() for n, _, v in _fields(buf) if n == 1), "")


def _decoder(kind: str, fields: dict[int, tuple[str, str]]) -> Callable[[Expr, bytes], None]:
    """A node kind whose fields are each a sub-expression (`expr`), a list of them (`exprs`), text or a flag."""
    def decode(node: Expr, buf: bytes) -> None:
        node.kind = kind
        for number, _, value in _fields(buf):
            if number in fields:
                name, how = fields[number]
                if how == "exprs":
                    getattr(node, name).append(_expr(value))
                else:
                    setattr(node, name, _expr(value) if how == "expr" else value.decode() if how == "text" else bool(value))
    return decode


_select = _decoder("select", {1: ("operand", "expr"), 2: ("name", "text"), 3: ("test_only", "flag")})
_call = _decoder("call", {1: ("target", "expr"), 2: ("name", "text"), 3: ("args", "exprs")})


def _list(node: Expr, buf: bytes) -> None:
    node.kind = "list"
    optional: list[int] = []
    for number, wire, value in _fields(buf):
        if number == 1:
            node.args.append(_expr(value))
        elif number == 2 and wire == 2:  # packed
            at = 0
            while at < len(value):
                index, at = _varint(value, at)
                optional.append(index)
        elif number == 2:
            optional.append(value)
    node.optional = tuple(optional)


def _struct(node: Expr, buf: bytes) -> None:
    node.kind = "map"
    for number, _, value in _fields(buf):
        if number == 1:
            node.kind, node.name = "struct", value.decode()
        elif number == 2:
            entry = {n: v for n, _, v in _fields(value)}
            key = _expr(entry[3]) if 3 in entry else Expr(id=0, kind="const", value=entry.get(2, b"").decode())
            node.entries.append((key, _expr(entry.get(4, b"")), bool(entry.get(5, 0))))


def _comprehension(node: Expr, buf: bytes) -> None:
    node.kind = "comprehension"
    found = {n: v for n, _, v in _fields(buf)}
    node.iter_var = found.get(1, b"").decode()
    node.iter_var2 = found.get(8, b"").decode()
    node.accu_var = found.get(3, b"").decode()
    node.parts = tuple(_expr(found.get(n, b"")) for n in (2, 4, 5, 6, 7))


_KINDS = {3: _constant, 4: _ident, 5: _select, 6: _call, 7: _list, 8: _struct, 9: _comprehension}


@dataclass
class Checked:
    """A checked (or only parsed) expression: the tree, each node's type, each call's overload ids."""

    expr: Expr
    types: dict[int, Type] = field(default_factory=dict)
    overloads: dict[int, tuple[str, ...]] = field(default_factory=dict)

    def type(self, node: Expr) -> Type:
        return self.types.get(node.id, DYN)


def decode(serialized: bytes) -> Checked:
    """A CheckedExpr or ParsedExpr, from the Any that `Expression.serialize()` returns."""
    wrapper = {n: v for n, _, v in _fields(serialized)}
    body, checked = wrapper[2], wrapper[1].endswith(b"CheckedExpr")
    out = Checked(expr=Expr(id=0, kind="const"))
    for number, _, value in _fields(body):
        if number == (4 if checked else 2):
            out.expr = _expr(value)
        elif checked and number in (2, 3):  # map entries: key 1, value 2
            entry = {n: v for n, _, v in _fields(value)}
            key = _signed(entry.get(1, 0))
            if number == 3:
                out.types[key] = _type(entry.get(2, b""))
            else:
                out.overloads[key] = tuple(v.decode() for n, _, v in _fields(entry.get(2, b"")) if n == 3)
    return out
