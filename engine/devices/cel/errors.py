"""The errors of DRA's CEL, in upstream's words: cel-cpp's texts turned into cel-go's where they differ
("no such key: model", "division by zero"), checker errors as k8s.io/dynamic-resource-allocation/cel prints them
("compilation failed: ERROR: <input>:1:3: ...")."""

from __future__ import annotations

import re
from typing import Any


class CelError(Exception):
    """A selector's error. Placed (`at`), it knows the selector's position in its list, its text and, for a
    DeviceClass's selector, the class; `words` says it as upstream's allocator does."""

    kind = "CEL error"

    def __init__(self, message: str, index: int | None = None, expression: str = "",
                 device_class: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.index = index
        self.expression = expression
        self.device_class = device_class

    def at(self, index: int, expression: str, device_class: str | None = None) -> CelError:
        """The same error, placed: the selector's position, its text, the DeviceClass it belongs to (None: the
        claim's request)."""
        return type(self)(self.message, index, expression, device_class)

    def words(self, claim: str) -> str:
        """`class gpu: selector #0: CEL runtime error: no such key: model` or `claim ns/name: selector #1: CEL
        compile error: ...`, as upstream's selectorsMatch (claim is `namespace/name`)."""
        owner = f"class {self.device_class}" if self.device_class is not None else f"claim {claim}"
        return f"{owner}: selector #{self.index if self.index is not None else 0}: {self.kind}: {self.message}"

    def __str__(self) -> str:
        return self.message


class CompileError(CelError):
    """Parse and type errors, unsupported functions, the length and cost limits: upstream's "CEL compile error"."""

    kind = "CEL compile error"


class EvaluationError(CelError):
    """An error judging one device: upstream's "CEL runtime error"."""

    kind = "CEL runtime error"


_STATUS = re.compile(r"^(?:[A-Z_]+: )+")
_TRAILER = re.compile(r"\s*\[[A-Z_]+\]$")
_RUNTIME = (  # cel-cpp's words -> cel-go's
    (re.compile(r'^Key not found in map : "?(.*?)"?$', re.S), r"no such key: \1"),
    (re.compile(r"^divide by zero$"), "division by zero"),
    (re.compile(r"^modulus by zero$"), "modulus by zero"),
    (re.compile(r"^(?:integer|int64|uint64|unsigned integer)? ?(?:overflow|.*out of range.*overflow.*)$", re.I),
     "integer overflow"),
    (re.compile(r"^No matching overloads found : (.*)$", re.S), r"no such overload: \1"),
    (re.compile(r"^Index error: index=(-?\d+) size=(\d+)$"), r"index '\1' out of range in list size '\2'"),
    (re.compile(r"^no_such_field : (.*)$"), r"no such key: \1"),
    (re.compile(r"^String to Timestamp conversion failed$"), "timestamp conversion failed"),
    (re.compile(r"^<string>\.(?:charAt|substring)\(.*(?:greater than|less than 0).*$"), "index out of range"),
    (re.compile(r"^<string>\.substring\(<start>, <end>\): <end> is less than <start>$"), "invalid substring range"),
)


def runtime_text(raw: str) -> str:
    text = _TRAILER.sub("", _STATUS.sub("", raw.strip()))
    for pattern, words in _RUNTIME:
        if pattern.match(text):
            return pattern.sub(words, text)
    return text


def compile_text(raw: str) -> str:
    """The checker's message (`ERROR: <input>:l:c: ...` with the caret lines), as upstream prefixes it."""
    text = _TRAILER.sub("", _STATUS.sub("", raw.strip()))
    return "compilation failed: " + (text if text.startswith("ERROR: ") else "ERROR: " + text)


_TYPE_NAMES = {"INT": "int", "UINT": "uint", "DOUBLE": "double", "STRING": "string", "BYTES": "bytes",
               "NULL": "null_type", "DURATION": "google.protobuf.Duration", "TIMESTAMP": "google.protobuf.Timestamp",
               "TYPE": "type"}


def type_name(kind: Any) -> str:
    """cel-go's name of a value's type (`string`, `list`, `map`, `kubernetes.Quantity`)."""
    name = kind.name()
    head = name.split("<", 1)[0].split("(", 1)[0]
    if head in ("LIST", "list"):
        return "list"
    if head in ("MAP", "map"):
        return "map"
    return _TYPE_NAMES.get(name, name)
