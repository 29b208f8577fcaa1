"""Kubernetes resource quantities, parsed exactly as upstream parses them.

This is a port of ``ParseQuantity`` from k8s.io/apimachinery/pkg/api/resource (quantity.go and
suffix.go), checked value-for-value against the Go code. The grammar is::

    <quantity>        ::= <signedNumber><suffix>
    <signedNumber>    ::= <number> | <sign><number>
    <number>          ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
    <suffix>          ::= <binarySI> | <decimalExponent> | <decimalSI>
    <binarySI>        ::= Ki | Mi | Gi | Ti | Pi | Ei
    <decimalSI>       ::= n | u | m | "" | k | M | G | T | P | E
    <decimalExponent> ::= "e" <signedInteger> | "E" <signedInteger>

Upstream quirks reproduced on purpose (each one is in tests/test_quantity.py):

* ``"1E"`` is one exa (10**18): the decimal suffix ``E`` wins over the exponent reading, while
  ``"1e"`` is an error (a lone ``e`` is no suffix).
* The value is kept only down to nano (1e-9), rounding a finer non-zero value *away from zero*:
  ``"0.9n"`` and ``"1e-10"`` are 1n, ``"3.001n"`` is 4n, ``"-0.5e-9"`` is -1n.
* A binary-suffixed value is capped, silently, at 2**63-1 in magnitude (``"8Ei"``, ``"9Ei"``);
  decimal values are not capped (``"12E"`` and ``"1e30"`` keep their value).
* The exponent of ``e``/``E`` is read as an int64 and then truncated to int32, so
  ``"1e4294967296"`` is 1 and ``"1e4294967297"`` is 10; an exponent outside int64 is an error.
* A number with no digits at all is zero when upstream's fast int64 path takes it: ``"."``,
  ``"-"``, ``"+."``, ``"Mi"``, ``"Ti"``, ``"e3"`` all parse as 0, whereas ``"Pi"``, ``"Ei"`` and
  ``"e-10"`` take the slow path and fail ("unable to parse numeric part").
* Lower-case ``ki``, capital ``K``, ``mi``, whitespace anywhere, a second sign or a second
  point are errors; ``"1."``, ``".5"``, ``"1.G"``, ``"00012"`` and ``"+1e+3"`` are fine.

Two deliberate differences, both outside anything a real cluster can hold:

* ``to_milli``/``to_int`` return the exact ceiling as a Python int. Go's ``MilliValue``/``Value``
  overflow int64 silently above ~9.2e15 / ~9.2e18, and for *negative* values Go's rounding adds one
  to the truncated result (``Value("-1.5")`` is 0, ``MilliValue("-0.0005")`` is 1), which is not the
  ``ceil`` its documentation promises; here both are a true ``ceil``. Negative requests are rejected
  by API validation, so this never matters for real objects.
* Upstream hangs (computing 10**2147483647) on exponents near the int32 limits. Here a value whose
  decimal exponent exceeds ``MAX_DECIMAL_EXPONENT`` raises ``QuantityError``; tiny values such as
  ``"1e-1000000"`` are computed (1n) without building huge powers.

Numbers from YAML (``cpu: 2``, ``cpu: 0.5``) are accepted: an int is read as its decimal digits, a
float as its shortest round-trip form (``repr``), which is what the API server sees once the YAML
is turned into JSON. ``bool`` and ``None`` are rejected.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from functools import lru_cache

__all__ = ["MAX_DECIMAL_EXPONENT", "QuantityError", "parse_quantity", "to_int", "to_milli"]

#: Largest power of ten a parsed value may reach (see the module docstring).
MAX_DECIMAL_EXPONENT = 10_000

_NANO = 10**9
_MAX_INT64 = (1 << 63) - 1
_MAX_BINARY_NANOS = _MAX_INT64 * _NANO  # BinarySI cap (2**63-1), in nano units

# Upstream's regex, kept for error messages (quantity.go splitREString).
UPSTREAM_REGEX = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"

# Same language as upstream's hand-written scanner (parseQuantityString): optional sign, digits,
# optional "." and digits, then a run of suffix letters, an optional sign and digits.
_SPLIT = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?([eEinumkKMGTP]*[+-]?[0-9]*)").fullmatch
_EXPONENT = re.compile(r"[eE]([+-]?[0-9]+)").fullmatch
_NUMERIC_PREFIX = re.compile(r"[+-]?[0-9]*(?:\.[0-9]*)?").match

# suffix -> (base, exponent); upstream's decSuffixes and binSuffixes.
_SUFFIXES: dict[str, tuple[int, int]] = {
    "n": (10, -9), "u": (10, -6), "m": (10, -3), "": (10, 0),
    "k": (10, 3), "M": (10, 6), "G": (10, 9), "T": (10, 12), "P": (10, 15), "E": (10, 18),
    "Ki": (2, 10), "Mi": (2, 20), "Gi": (2, 30), "Ti": (2, 40), "Pi": (2, 50), "Ei": (2, 60),
}


class QuantityError(ValueError):
    """A string that Kubernetes would not accept as a resource quantity.

    ``quantity`` is the offending input, ``reason`` the human explanation, and ``kind`` which of
    upstream's errors it corresponds to: ``"format"`` (ErrFormatWrong), ``"suffix"`` (ErrSuffix),
    ``"numeric"`` (ErrNumeric), ``"type"`` (not a string or number) or ``"range"`` (beyond
    ``MAX_DECIMAL_EXPONENT``; upstream accepts or hangs on these).
    """

    def __init__(self, quantity: object, reason: str, kind: str = "format"):
        shown = "" if kind == "type" else f" {_shown(quantity)}"
        super().__init__(f"invalid quantity{shown}: {reason}")
        self.quantity = quantity
        self.reason = reason
        self.kind = kind


_TYPE_NAMES = {type(None): "null", bool: "a boolean", list: "a list", dict: "a mapping"}


def _shown(quantity: object) -> str:
    """The input in a message: quoted text or a number; never the repr of a (possibly huge) structure."""
    if isinstance(quantity, str):
        return f'"{quantity}"' if len(quantity) <= 60 else f'"{quantity[:57]}..."'
    if isinstance(quantity, bool):
        return "true" if quantity else "false"
    if isinstance(quantity, (int, float)):
        text = repr(quantity)
        return text if len(text) <= 60 else text[:57] + "..."
    return _TYPE_NAMES.get(type(quantity), "value")


def _wrap_int32(v: int) -> int:
    return ((v + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def _digits(s: str) -> int:
    # int() refuses more than 4300 digits by default (CVE-2020-10735); upstream has no such limit.
    if len(s) <= 4000:
        return int(s)
    n = 0
    for i in range(0, len(s), 4000):
        chunk = s[i : i + 4000]
        n = n * 10 ** len(chunk) + int(chunk)
    return n


def _format_error(s: str) -> QuantityError:
    if not s:
        return QuantityError(s, "empty string")
    if s != s.strip() or any(c.isspace() for c in s):
        return QuantityError(s, "whitespace is not allowed")
    prefix = _NUMERIC_PREFIX(s)  # matches every string (all of its parts are optional)
    tail = s[prefix.end() if prefix else 0 :]
    if tail and tail.isalpha() and tail.isascii():
        return QuantityError(s, f'unknown suffix "{tail}"')
    if tail[:1] == ".":
        return QuantityError(s, "more than one decimal point")
    return QuantityError(s, f"must match the regular expression '{UPSTREAM_REGEX}'")


def _suffix(s: str, suffix: str) -> tuple[int, int]:
    """(base, exponent) for a suffix, as upstream's quantitySuffixer.interpret."""
    found = _SUFFIXES.get(suffix)
    if found is not None:
        return found
    m = _EXPONENT(suffix) if len(suffix) > 1 else None
    if m is None:
        raise QuantityError(s, f'unknown suffix "{suffix}"', "suffix")
    exponent = int(m.group(1))  # strconv.ParseInt(suffix[1:], 10, 64) ...
    if not -(1 << 63) <= exponent <= _MAX_INT64:
        raise QuantityError(s, f'exponent out of range in "{suffix}"', "suffix")
    return 10, _wrap_int32(exponent)  # ... then int32(parsed)


@lru_cache(maxsize=1 << 15)
def _parse(s: str) -> Fraction:
    if s == "0":
        return Fraction(0)
    m = _SPLIT(s) if s else None
    if m is None:
        raise _format_error(s)
    sign, num, denom, suffix = m.groups()
    denom = denom or ""
    base, exponent = _suffix(s, suffix)

    if not num and not denom:
        # No digits: upstream's int64 fast path yields 0, its inf.Dec slow path fails to parse "".
        # The fast path is taken when the scale stays >= nano (decimal), or when the binary
        # precision estimate 15 - len("0") - int(exponent*3/10) - 1 is >= 0 (Ki..Ti, not Pi, Ei).
        fast = exponent >= -9 if base == 10 else 13 - exponent * 3 // 10 >= 0
        if fast:
            return Fraction(0)
        raise QuantityError(s, "no digits in the numeric part", "numeric")

    n = _digits(num + denom)  # the value is n * 10**-len(denom) * base**exponent
    if n == 0:
        return Fraction(0)
    if base == 10:
        # The power of ten, with upstream's int32 arithmetic: the int64 fast path (at most 18
        # significant digits, scale >= nano) uses exponent - len(denom); the inf.Dec slow path
        # negates the exponent into an inf.Scale first. They differ only near the int32 limits.
        scale = _wrap_int32(exponent - len(denom))
        if scale < -9 or len(num.lstrip("0") or "0") + len(denom) > 18:
            scale = -_wrap_int32(len(denom) + _wrap_int32(-exponent))
        if scale > MAX_DECIMAL_EXPONENT - len(num.lstrip("0")):
            raise QuantityError(s, f"value too large (beyond 1e{MAX_DECIMAL_EXPONENT})", "range")
        if scale >= 0:
            value = Fraction(n * 10**scale)
        elif scale >= -9:
            value = Fraction(n, 10**-scale)
        else:
            # Round away from zero to a whole number of nanos (inf.RoundUp at scale 9).
            drop = -scale - 9
            nanos = 1 if drop > len(num) + len(denom) else -(-n // 10**drop)
            value = Fraction(nanos, _NANO)
    else:
        nanos = -(-(n << exponent) * _NANO // 10 ** len(denom))  # ceil: round away from zero
        value = Fraction(min(nanos, _MAX_BINARY_NANOS), _NANO)  # cap at 2**63-1
    return -value if sign == "-" else value


def _key(s: object) -> str:
    """The string form of a str, int or float quantity."""
    t = type(s)
    if t is str:
        return s  # type: ignore[return-value]
    if t is int:
        return str(s)
    if t is float:
        if not math.isfinite(s):  # type: ignore[arg-type]
            raise QuantityError(s, "not a finite number", "format")
        return repr(s)
    if isinstance(s, str):
        return str(s)
    if isinstance(s, int) and not isinstance(s, bool):
        return str(int(s))
    if isinstance(s, float):
        return _key(float(s))
    raise QuantityError(s, f"expected a string or a number, got {_TYPE_NAMES.get(type(s), type(s).__name__)}", "type")


def parse_quantity(s: str | int | float) -> Fraction:
    """The exact value of a quantity, e.g. ``"100m"`` -> Fraction(1, 10), ``"1Ki"`` -> 1024.

    Raises QuantityError (a ValueError) for anything upstream's ParseQuantity rejects.
    """
    return _parse(_key(s))


@lru_cache(maxsize=1 << 15)
def _milli(s: str) -> int:
    v = _parse(s)
    return -((-v.numerator * 1000) // v.denominator)


@lru_cache(maxsize=1 << 15)
def _int(s: str) -> int:
    v = _parse(s)
    return -((-v.numerator) // v.denominator)


def to_milli(s: str | int | float) -> int:
    """ceil(value * 1000), like Quantity.MilliValue: ``"100m"`` -> 100, ``"0.1m"`` -> 1, ``2`` -> 2000."""
    return _milli(_key(s))


def to_int(s: str | int | float) -> int:
    """ceil(value), like Quantity.Value: ``"1Gi"`` -> 1073741824, ``"1500m"`` -> 2."""
    return _int(_key(s))
