"""Reading raw manifest fields into typed values, and the errors that name what was wrong."""

from __future__ import annotations

import datetime
import re
from typing import Any

from ...model.cluster import (
    ObjectRef,
    Refusal,
)
from ...model.quantity import QuantityError, to_int, to_milli


class InputError(Exception):
    """A problem with user input; its message is the whole one-line explanation. `source` is where the object
    came from (a file, or the loop's 'Pod ns/name'), `ref` which object it is (None: it has no name, or the
    problem is not one object's); `more` counts further objects refused in the same pass, `more_what` says what
    they are."""

    def __init__(self, message: str, source: str = "", ref: ObjectRef | None = None, more: int = 0,
                 more_what: str = "object(s) that cannot be read"):
        super().__init__(message)
        self.source, self.ref, self.more, self.more_what = source, ref, more, more_what

    def refusal(self) -> Refusal:
        return Refusal(self.source, str(self), self.ref)


MAX_QUANTITY = 2**53  # per resource, in its unit (millicores, bytes); no real node has more

INT32 = 2**31

PROBLEMS = (QuantityError, ValueError, TypeError, KeyError, AttributeError)


def refusal(src: str, kind: str, obj: dict[str, Any], exc: Exception) -> InputError:
    """The error for an object the model cannot read: `source: Kind ns/name: reason`."""
    meta = obj.get("metadata") or {}
    ref = ObjectRef(kind, str(meta.get("namespace") or ""), str(meta.get("name") or ""))
    return InputError(f"{src}: {describe(kind, meta)}: {reason_of(exc)}", src, ref)


def choice(value: Any, what: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ValueError(f"{what} must be one of {', '.join(allowed)}, got {show_value(value)}")
    return value


def int_or_percent(value: Any, total: int, what: str) -> int:
    if isinstance(value, str) and value.endswith("%"):
        percent = as_int(value[:-1], what, 0, 100)
        return -(-percent * total // 100)
    return as_int(value, what, 0)


def describe(kind: Any, meta: dict[str, Any]) -> str:
    ns = meta.get("namespace")
    return f"{kind} {ns}/{meta.get('name')}" if ns else f"{kind} {meta.get('name')}"


def reason_of(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        return f"missing field {exc.args[0]}"
    return str(exc) or type(exc).__name__


def show_value(value: Any) -> str:
    """A value in a message: short, and never the repr of a whole (possibly huge) structure."""
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "null"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def as_mapping(value: Any, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"{what} must be a mapping, got {show_value(value)}")
    return value


def as_list(value: Any, what: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"{what} must be a list, got {show_value(value)}")
    return value


def as_text(value: Any, what: str) -> str:
    """A string field; numbers are read as their text (as a hand-written YAML often has them), nothing else."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{what} must be a string, got {show_value(value)}")
    return str(value)


def required(mapping: dict[str, Any], key: str, what: str) -> Any:
    if mapping.get(key) is None:
        raise ValueError(f"{what}.{key}: missing field {key!r}")
    return mapping[key]


def as_int(value: Any, what: str, low: int = -INT32, high: int = INT32 - 1) -> int:
    """An int32 field (priority, maxSkew, hostPort, minMember, weight): whole numbers only, as the API has them."""
    if isinstance(value, bool):
        number = None
    elif isinstance(value, int):
        number = value
    elif ((isinstance(value, float) and value.is_integer())
          or (isinstance(value, str) and re.fullmatch(r"[+-]?[0-9]{1,10}", value))):
        number = int(value)
    else:
        number = None
    if number is None:
        raise ValueError(f"{what} must be an integer, got {show_value(value)}")
    if not low <= number <= high:
        raise ValueError(f"{what} must be in {low}..{high}, got {number}")
    return number


def scalar_text(value: Any, what: str) -> str:
    """A label-like value: strings, and scalars a hand-written YAML leaves unquoted (`true`, `3`)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return as_text(value, what)


def str_map(value: Any, what: str) -> dict[str, str]:
    if value is None:
        return {}
    if type(value) is dict and _all_text(value):
        return value.copy()  # the common shape (labels, annotations): strings to strings, read as they are
    return {as_text(k, f"{what} key"): scalar_text(v, f"{what}.{k}") for k, v in as_mapping(value, what).items()}


def _all_text(mapping: dict[Any, Any]) -> bool:
    for k, v in mapping.items():  # noqa: SIM110 — a loop: all() of a generator takes twice as long on a few labels
        if type(k) is not str or type(v) is not str:
            return False
    return True


def resource_amounts(value: Any, what: str, clamp: bool = False) -> dict[str, int]:
    """Quantities by resource name, in the model's units. Above 2^53 a quantity is refused, or with `clamp` (a
    limit, where "more than any cluster has" means no limit) taken as 2^53."""
    out: dict[str, int] = {}
    for name, qty in as_mapping(value, what).items():
        if type(qty) is str and (amount := _AMOUNTS.get((name, qty))) is not None:
            out[name] = amount  # a quantity met before (only the few a cluster uses recur)
            continue
        if type(name) is not str:
            name = as_text(name, f"{what} key")
        try:
            amount = to_milli(qty) if name == "cpu" else to_int(qty)
        except QuantityError as exc:
            raise ValueError(f"{what}.{name}: {exc}") from None
        if amount < 0:
            raise ValueError(f"{what}.{name}: quantity {qty!r} must not be negative")
        if amount > MAX_QUANTITY and clamp:
            amount = MAX_QUANTITY
        elif amount > MAX_QUANTITY:
            unit = "millicores" if name == "cpu" else "units"
            raise ValueError(f"{what}.{name}: quantity {show_value(qty)} is too large (more than 2^53 {unit})")
        elif type(qty) is str and type(name) is str:
            _remember(name, qty, amount)
        out[name] = amount
    return out


_AMOUNTS: dict[tuple[str, str], int] = {}  # (resource, quantity text) -> amount, for amounts in 0..MAX_QUANTITY


def _remember(name: str, qty: str, amount: int) -> None:
    if len(_AMOUNTS) >= 1 << 14:  # bounded: a long-running scheduler meets ever new quantities
        _AMOUNTS.clear()
    _AMOUNTS[name, qty] = amount


def as_bool(value: Any, what: str) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ValueError(f"{what} must be true or false, got {show_value(value)}")
    return value


def timestamp(value: Any, what: str) -> str:
    """An RFC 3339 time as text; an unquoted one in hand-written YAML arrives as a datetime."""
    if type(value) is str:
        return value
    if isinstance(value, datetime.datetime):
        value = value.astimezone(datetime.UTC) if value.tzinfo else value
        return value.strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(value, datetime.date):
        return value.strftime("%Y-%m-%dT00:00:00Z")
    return scalar_text(value, what)


def weight(item: Any, what: str) -> int:
    return as_int(as_mapping(item, what).get("weight", 0), f"{what}.weight", 1, 100)


_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS_LABEL = re.compile(rf"^{_LABEL}$")
DNS_SUBDOMAIN = re.compile(rf"^{_LABEL}(\.{_LABEL})*$")


def name_problem(value: str, label: bool = False) -> str | None:
    """Why `value` is not a valid Kubernetes object name (a DNS-1123 label with `label`), or None."""
    limit, pattern = (63, DNS_LABEL) if label else (253, DNS_SUBDOMAIN)
    if not value:
        return "must not be empty"
    if len(value) > limit:
        return f"must be at most {limit} characters"
    if not pattern.match(value):
        return "must be lowercase letters, digits and '-'" + ("" if label else " or '.'") + \
            ", starting and ending with a letter or digit"
    return None


def optional_text(value: Any, what: str) -> str | None:
    return None if value is None else as_text(value, what)
