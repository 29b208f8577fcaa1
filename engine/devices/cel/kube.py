"""Kubernetes' CEL libraries as the apiserver gives them to DRA selectors (k8s.io/apiserver/pkg/cel/library):
quantity, semver, IP and CIDR, the lists library, regex `find`/`findAll`, each written from the Go code with
its overload ids. cel-cpp takes no Python object as a value, so the opaque types are protobuf messages built here
at runtime (`kubernetes.Quantity`, `kubernetes.Semver`, `net.IP`, `net.CIDR`) whose fields hold a canonical form:
equal values are equal messages, as upstream's `==` compares them."""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from ...model.quantity import QuantityError, parse_quantity


class KubeError(ValueError):
    """A runtime error of a Kubernetes function, in upstream's words (cel-cpp shows it as the call's error)."""


_FIELD = descriptor_pb2.FieldDescriptorProto
_MESSAGES = {  # full name -> ((field, type), ...)
    "kubernetes.Quantity": (("num", _FIELD.TYPE_STRING), ("den", _FIELD.TYPE_STRING)),
    "kubernetes.Semver": (("major", _FIELD.TYPE_UINT64), ("minor", _FIELD.TYPE_UINT64), ("patch", _FIELD.TYPE_UINT64),
                          ("pre", _FIELD.TYPE_STRING)),
    "net.IP": (("addr", _FIELD.TYPE_BYTES),),
    "net.CIDR": (("addr", _FIELD.TYPE_BYTES), ("bits", _FIELD.TYPE_INT32)),
}


def _pool() -> tuple[descriptor_pool.DescriptorPool, dict[str, Any]]:
    pool = descriptor_pool.DescriptorPool()
    for package in sorted({name.rpartition(".")[0] for name in _MESSAGES}):
        proto = descriptor_pb2.FileDescriptorProto(name=f"policy_scheduler/{package}.proto", package=package,
                                                   syntax="proto3")
        for name, fields in _MESSAGES.items():
            if name.rpartition(".")[0] == package:
                msg = proto.message_type.add(name=name.rpartition(".")[2])
                for number, (field_name, kind) in enumerate(fields, 1):
                    msg.field.add(name=field_name, number=number, type=kind, label=_FIELD.LABEL_OPTIONAL)
        pool.Add(proto)
    return pool, {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(name)) for name in _MESSAGES}


POOL, CLASSES = _pool()
Quantity, Semver, IP, CIDR = (CLASSES[n] for n in _MESSAGES)


# -- quantity (library/quantity.go) -------------------------------------------------------------------------------

def quantity_message(value: Fraction) -> Any:
    return Quantity(num=str(value.numerator), den=str(value.denominator))


def _fraction(q: Any) -> Fraction:
    return _frac(q.num or "0", q.den or "1")


@lru_cache(maxsize=1 << 12)
def _frac(num: str, den: str) -> Fraction:
    return Fraction(int(num), int(den))


def quantity(text: str) -> Any:
    try:
        return quantity_message(parse_quantity(text))
    except QuantityError as exc:
        raise KubeError(_QUANTITY_ERRORS.get(exc.kind, str(exc))) from None


_QUANTITY_ERRORS = {  # resource.ErrFormatWrong, ErrSuffix, ErrNumeric
    "format": "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
    "suffix": "unable to parse quantity's suffix", "numeric": "unable to parse numeric part of quantity"}


def _parses(parse: Callable[..., Any], *args: Any) -> bool:
    """isQuantity, isSemver, isIP, isCIDR: whether the parse succeeds."""
    try:
        parse(*args)
    except (KubeError, QuantityError):
        return False
    return True


def is_quantity(text: str) -> bool:
    return _parses(parse_quantity, text)


def _as_int(q: Any) -> int | None:
    v = _fraction(q)
    return int(v) if v.denominator == 1 and -(1 << 63) <= v < 1 << 63 else None


def quantity_as_integer(q: Any) -> int:
    v = _as_int(q)
    if v is None:
        raise KubeError("cannot convert value to integer")
    return v


def quantity_approximate_float(q: Any) -> float:
    """Go's AsApproximateFloat64: the unscaled digits as a float times a power of ten."""
    v = _fraction(q)
    exponent = 0
    while v.denominator != 1:
        v, exponent = v * 10, exponent - 1
    base = v.numerator
    while base and base % 10 == 0 and exponent < 0:
        base, exponent = base // 10, exponent + 1
    return float(base) if exponent == 0 else float(base) * math.pow(10, exponent)


def quantity_sign(q: Any) -> int:
    v = _fraction(q)
    return (v > 0) - (v < 0)


def quantity_add(q: Any, other: Any) -> Any:
    return quantity_message(_fraction(q) + (other if isinstance(other, int) else _fraction(other)))


def quantity_sub(q: Any, other: Any) -> Any:
    return quantity_message(_fraction(q) - (other if isinstance(other, int) else _fraction(other)))


# -- semver (library/semverlib.go, blang/semver/v4) ---------------------------------------------------------------

_NUMERIC = re.compile(r"0|[1-9][0-9]*")
_IDENT = re.compile(r"[0-9A-Za-z-]+")


def _semver_parts(text: str) -> tuple[int, int, int, str]:
    """blang/semver's Parse, its error texts."""
    main, plus, build = text.partition("+")
    if plus and (not build or not all(_IDENT.fullmatch(p) for p in build.split("."))):
        raise KubeError(f"Invalid character(s) found in build meta data {build!r}" if build else "Build meta data is empty")
    core, dash, pre = main.partition("-")
    parts = core.split(".")
    if len(parts) != 3:
        raise KubeError("No Major.Minor.Patch elements found")
    numbers = []
    for label, part in zip(("major", "minor", "patch"), parts):
        if not part.isdigit() or not part.isascii():
            raise KubeError(f"Invalid character(s) found in {label} number {part!r}")
        if len(part) > 1 and part[0] == "0":
            raise KubeError(f"{label.capitalize()} number must not contain leading zeroes {part!r}")
        numbers.append(int(part))
    if dash:
        for p in pre.split("."):
            if not p:
                raise KubeError("Prerelease is empty")
            if not _IDENT.fullmatch(p):
                raise KubeError(f"Invalid character(s) found in prerelease {p!r}")
            if p.isdigit() and len(p) > 1 and p[0] == "0":
                raise KubeError(f"Numeric PreRelease version must not contain leading zeroes {p!r}")
    return numbers[0], numbers[1], numbers[2], pre if dash else ""


def _normalize(text: str) -> str:
    """semverlib.go normalizeAndParse: no leading v, leading zeros dropped, missing minor/patch are 0."""
    parts = text.removeprefix("v").split(".", 2)
    for i, p in enumerate(parts):
        if len(p) > 1:
            p = p.lstrip("0")
            parts[i] = p if p and p[0].isdigit() else "0" + p
    if len(parts) < 3:
        if "+" in parts[-1] or "-" in parts[-1]:
            raise KubeError("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return ".".join(parts)


def semver(text: str, normalize: bool = False) -> Any:
    major, minor, patch, pre = _semver_parts(_normalize(text) if normalize else text)
    return Semver(major=major, minor=minor, patch=patch, pre=pre)


def is_semver(text: str, normalize: bool = False) -> bool:
    return _parses(semver, text, normalize)


def _pre_key(pre: str) -> tuple:
    if not pre:
        return (1,)  # a release sorts after its pre-releases
    return (0, tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split(".")))


def semver_key(v: Any) -> tuple:
    return v.major, v.minor, v.patch, _pre_key(v.pre)


# -- IP and CIDR (library/ip.go, cidr.go, Go's net/netip) -------------------------------------------------------------

def _address(raw: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    if "%" in raw:
        try:
            ipaddress.ip_address(raw)
        except ValueError:
            raise KubeError(f"IP Address {_q(raw)} parse error during conversion from string: ParseAddr({_q(raw)}): "
                            "unexpected character") from None
        raise KubeError(f"IP address {_q(raw)} with zone value is not allowed")
    try:
        addr = ipaddress.ip_address(raw)
    except ValueError:
        raise KubeError(f"IP Address {_q(raw)} parse error during conversion from string: "
                        f"ParseAddr({_q(raw)}): unable to parse IP") from None
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        raise KubeError(f"IPv4-mapped IPv6 address {_q(raw)} is not allowed")
    return addr


def _q(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def ip(text: str) -> Any:
    return IP(addr=_address(text).packed)


def is_ip(text: str) -> bool:
    return _parses(_address, text)


def ip_is_canonical(text: str) -> bool:
    return str(_address(text)) == text


def _ip_value(msg: Any) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    return ipaddress.ip_address(bytes(msg.addr))


def ip_family(msg: Any) -> int:
    return 4 if len(msg.addr) == 4 else 6


def ip_is_link_local_multicast(msg: Any) -> bool:
    b = bytes(msg.addr)
    return (b[:3] == b"\xe0\x00\x00") if len(b) == 4 else (b[0] == 0xFF and b[1] & 0x0F == 0x02)


def ip_is_global_unicast(msg: Any) -> bool:
    a = _ip_value(msg)
    if len(msg.addr) == 4 and bytes(msg.addr) in (b"\x00\x00\x00\x00", b"\xff\xff\xff\xff"):
        return False
    return not (a.is_unspecified or a.is_loopback or a.is_multicast or a.is_link_local)


def _prefix(raw: str) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]:
    head, slash, bits = raw.rpartition("/")
    error = f"network address parse error during conversion from string: network address parse error during " \
            f"conversion from string: netip.ParsePrefix({_q(raw)})"
    if not slash:
        raise KubeError(f"{error}: no '/'")
    if "%" in head:
        raise KubeError(f"{error}: IPv6 zones cannot be present in a prefix")
    try:
        addr = ipaddress.ip_address(head)
    except ValueError:
        raise KubeError(f"{error}: ParseAddr({_q(head)}): unable to parse IP") from None
    if not bits.isdigit() or not bits.isascii() or (len(bits) > 1 and bits[0] == "0") or int(bits) > addr.max_prefixlen:
        raise KubeError(f"{error}: bad bits after slash: {_q(bits)}")
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        raise KubeError(f"network address parse error during conversion from string: IPv4-mapped IPv6 address "
                        f"{_q(raw)} is not allowed")
    return addr, int(bits)


def cidr(text: str) -> Any:
    addr, bits = _prefix(text)
    return CIDR(addr=addr.packed, bits=bits)


def is_cidr(text: str) -> bool:
    return _parses(_prefix, text)


def _network(msg: Any) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    return ipaddress.ip_network((bytes(msg.addr), msg.bits), strict=False)


def cidr_masked(msg: Any) -> Any:
    return CIDR(addr=_network(msg).network_address.packed, bits=msg.bits)


def cidr_contains_ip(msg: Any, other: Any) -> bool:
    address = IP(addr=_address(other).packed) if isinstance(other, str) else other
    return len(address.addr) == len(msg.addr) and _ip_value(address) in _network(msg)


def cidr_contains_cidr(msg: Any, other: Any) -> bool:
    inner = cidr(other) if isinstance(other, str) else other
    if len(inner.addr) != len(msg.addr):
        return False
    return _network(msg).overlaps(_network(inner)) and msg.bits <= inner.bits


def to_string(value: Any) -> str:
    """string(ip) and string(cidr), as Go's netip prints them."""
    if value.DESCRIPTOR.full_name == "net.CIDR":
        return f"{_ip_value(value)}/{value.bits}"
    return str(_ip_value(value))


# -- comparisons shared by quantity and semver ------------------------------------------------------------------------

def compare(a: Any, b: Any) -> int:
    if a.DESCRIPTOR.full_name == "kubernetes.Semver":
        left, right = semver_key(a), semver_key(b)
    else:
        left, right = _fraction(a), _fraction(b)  # type: ignore[assignment]
    return (left > right) - (left < right)


# -- lists (library/lists.go) ---------------------------------------------------------------------------------------

def _same(a: object, b: object) -> bool:
    """CEL's equality for the values a list hands Python: a bool is never a number."""
    return isinstance(a, bool) == isinstance(b, bool) and a == b


def list_is_sorted(items: list) -> bool:
    return all(not items[i] > items[i + 1] for i in range(len(items) - 1))


def list_sum(items: list) -> Any:
    return sum(items, 0.0 if items and isinstance(items[0], float) else 0)


def list_min(items: list) -> Any:
    if not items:
        raise KubeError("min called on empty list")
    return min(items)


def list_max(items: list) -> Any:
    if not items:
        raise KubeError("max called on empty list")
    return max(items)


def list_index_of(items: list, item: object) -> int:
    return next((i for i, x in enumerate(items) if _same(x, item)), -1)


def list_last_index_of(items: list, item: object) -> int:
    return next((i for i in range(len(items) - 1, -1, -1) if _same(items[i], item)), -1)


# -- regex (library/regex.go): Go's regexp on RE2 syntax; see `pattern` -----------------------------------------------

_POSIX = {"alnum": "0-9A-Za-z", "alpha": "A-Za-z", "ascii": "\\x00-\\x7f", "blank": "\\t ", "cntrl": "\\x00-\\x1f\\x7f",
          "digit": "0-9", "graph": "!-~", "lower": "a-z", "print": " -~", "punct": "!-/:-@[-`{-~",
          "space": "\\t\\n\\v\\f\\r ", "upper": "A-Z", "word": "0-9A-Za-z_", "xdigit": "0-9A-Fa-f"}


@lru_cache(maxsize=256)
def pattern(regex: str) -> re.Pattern[str]:
    """An RE2 pattern (already validated by cel-cpp's RE2) in Python's syntax: ASCII classes as RE2's, `\\z`, POSIX
    classes; a construct Python's `re` has no equivalent for is an error naming it."""
    text = re.sub(r"\[:(\^?)([a-z]+):\]", lambda m: _posix(m.group(1), m.group(2)), regex)
    text = re.sub(r"(?<!\\)((?:\\\\)*)\\z", r"\1\\Z", text)
    try:
        return re.compile(text, re.ASCII)
    except re.error as exc:
        raise KubeError(f"policy-scheduler does not support the regular expression {regex!r} ({exc})") from None


def _posix(negate: str, name: str) -> str:
    if name not in _POSIX:
        raise KubeError(f"Illegal regex: error parsing regexp: invalid character class range: `[:{name}:]`")
    if negate:
        raise KubeError(f"policy-scheduler does not support the negated class [:^{name}:]")
    return _POSIX[name]


def find(text: str, regex: str) -> str:
    found = pattern(regex).search(text)
    return found.group(0) if found else ""


def find_all(text: str, regex: str, limit: int = -1) -> list[str]:
    """Go's FindAllString: successive non-overlapping matches, an empty match right after a match skipped."""
    compiled, at, previous_end = pattern(regex), 0, -1
    out: list[str] = []
    while at <= len(text) and (limit < 0 or len(out) < limit):
        found = compiled.search(text, at)
        if found is None:
            break
        start, end = found.span()
        if end == start == previous_end:
            at = start + 1
            continue
        out.append(found.group(0))
        previous_end = end
        at = end if end > start else end + 1
    return out


@dataclass(frozen=True)
class Overload:
    """One overload as upstream declares it: function, id, parameter and result type names (`int`, `string`,
    `list(int)`, `Quantity` ...), member or global, and the Python that implements it."""

    function: str
    id: str
    params: tuple[str, ...]
    result: str
    member: bool
    impl: Callable[..., Any]


def _overloads() -> list[Overload]:
    o = Overload
    out = [
        o("quantity", "string_to_quantity", ("string",), "Quantity", False, quantity),
        o("isQuantity", "is_quantity_string", ("string",), "bool", False, is_quantity),
        o("sign", "quantity_sign", ("Quantity",), "int", True, quantity_sign),
        o("isGreaterThan", "quantity_is_greater_than", ("Quantity", "Quantity"), "bool", True, lambda a, b: compare(a, b) > 0),
        o("isGreaterThan", "semver_is_greater_than", ("Semver", "Semver"), "bool", True, lambda a, b: compare(a, b) > 0),
        o("isLessThan", "quantity_is_less_than", ("Quantity", "Quantity"), "bool", True, lambda a, b: compare(a, b) < 0),
        o("isLessThan", "semver_is_less_than", ("Semver", "Semver"), "bool", True, lambda a, b: compare(a, b) < 0),
        o("compareTo", "quantity_compare_to", ("Quantity", "Quantity"), "int", True, compare),
        o("compareTo", "semver_compare_to", ("Semver", "Semver"), "int", True, compare),
        o("asApproximateFloat", "quantity_get_float", ("Quantity",), "double", True, quantity_approximate_float),
        o("asInteger", "quantity_get_int", ("Quantity",), "int", True, quantity_as_integer),
        o("isInteger", "quantity_is_integer", ("Quantity",), "bool", True, lambda q: _as_int(q) is not None),
        o("add", "quantity_add", ("Quantity", "Quantity"), "Quantity", True, quantity_add),
        o("add", "quantity_add_int", ("Quantity", "int"), "Quantity", True, quantity_add),
        o("sub", "quantity_sub", ("Quantity", "Quantity"), "Quantity", True, quantity_sub),
        o("sub", "quantity_sub_int", ("Quantity", "int"), "Quantity", True, quantity_sub),
        o("semver", "string_to_semver", ("string",), "Semver", False, semver),
        o("semver", "string_bool_to_semver", ("string", "bool"), "Semver", False, semver),
        o("isSemver", "is_semver_string", ("string",), "bool", False, is_semver),
        o("isSemver", "is_semver_string_bool", ("string", "bool"), "bool", False, is_semver),
        o("major", "semver_major", ("Semver",), "int", True, lambda v: _int64(v.major)),
        o("minor", "semver_minor", ("Semver",), "int", True, lambda v: _int64(v.minor)),
        o("patch", "semver_patch", ("Semver",), "int", True, lambda v: _int64(v.patch)),
        o("ip", "string_to_ip", ("string",), "IP", False, ip),
        o("family", "ip_family", ("IP",), "int", True, ip_family),
        o("ip.isCanonical", "ip_is_canonical", ("string",), "bool", False, ip_is_canonical),
        o("isUnspecified", "ip_is_unspecified", ("IP",), "bool", True, lambda a: _ip_value(a).is_unspecified),
        o("isLoopback", "ip_is_loopback", ("IP",), "bool", True, lambda a: _ip_value(a).is_loopback),
        o("isLinkLocalMulticast", "ip_is_link_local_multicast", ("IP",), "bool", True, ip_is_link_local_multicast),
        o("isLinkLocalUnicast", "ip_is_link_local_unicast", ("IP",), "bool", True, lambda a: _ip_value(a).is_link_local),
        o("isGlobalUnicast", "ip_is_global_unicast", ("IP",), "bool", True, ip_is_global_unicast),
        o("isIP", "is_ip", ("string",), "bool", False, is_ip),
        o("string", "ip_to_string", ("IP",), "string", False, to_string),
        o("string", "cidr_to_string", ("CIDR",), "string", False, to_string),
        o("cidr", "string_to_cidr", ("string",), "CIDR", False, cidr),
        o("containsIP", "cidr_contains_ip_string", ("CIDR", "string"), "bool", True, cidr_contains_ip),
        o("containsIP", "cidr_contains_ip_ip", ("CIDR", "IP"), "bool", True, cidr_contains_ip),
        o("containsCIDR", "cidr_contains_cidr_string", ("CIDR", "string"), "bool", True, cidr_contains_cidr),
        o("containsCIDR", "cidr_contains_cidr", ("CIDR", "CIDR"), "bool", True, cidr_contains_cidr),
        o("ip", "cidr_ip", ("CIDR",), "IP", True, lambda c: IP(addr=c.addr)),
        o("prefixLength", "cidr_prefix_length", ("CIDR",), "int", True, lambda c: c.bits),
        o("masked", "cidr_masked", ("CIDR",), "CIDR", True, cidr_masked),
        o("isCIDR", "is_cidr", ("string",), "bool", False, is_cidr),
        o("find", "string_find_string", ("string", "string"), "string", True, find),
        o("findAll", "string_find_all_string", ("string", "string"), "list(string)", True, find_all),
        o("findAll", "string_find_all_string_int", ("string", "string", "int"), "list(string)", True, find_all),
    ]
    for t in ELEMENTS:  # upstream's list_a_index_of_int, one overload per element type: no `dyn` parameter, so
        # cel-cpp never hands Python a value it cannot take (an optional crashes it)
        out.append(o("indexOf", f"list_{t}_index_of_int", (f"list({t})", t), "int", True, list_index_of))
        out.append(o("lastIndexOf", f"list_{t}_last_index_of_int", (f"list({t})", t), "int", True, list_last_index_of))
    for t in COMPARABLE:
        out.append(o("isSorted", f"list_{t}_is_sorted_bool", (f"list({t})",), "bool", True, list_is_sorted))
        out.append(o("max", f"list_{t}_max_{t}", (f"list({t})",), t, True, list_max))
        out.append(o("min", f"list_{t}_min_{t}", (f"list({t})",), t, True, list_min))
    out += [o("sum", f"list_{t}_sum_{t}", (f"list({t})",), t, True, list_sum) for t in SUMMABLE]
    return out


def _int64(value: int) -> int:
    return ((value + (1 << 63)) & ((1 << 64) - 1)) - (1 << 63)


COMPARABLE = ("int", "uint", "double", "bool", "duration", "timestamp", "string", "bytes")
ELEMENTS = ("int", "uint", "double", "bool", "string", "bytes")
SUMMABLE = ("int", "uint", "double", "duration")
OVERLOADS = _overloads()
UNSUPPORTED_OVERLOADS = {  # Python never sees these values: cel-cpp hands no duration, timestamp or uint result back
    ov.id: f"{ov.function}() of a {ov.params[0]}" for ov in OVERLOADS
    if (ov.params and any(t in ov.params[0] for t in ("duration", "timestamp"))) or ov.result == "uint"}
