"""Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`), as kube-scheduler reads and writes it.

Protobuf is what the apiserver's other clients (kubelets, controllers) speak, so a watch event it has encoded for
them is not encoded again for us, and writes are cheaper for it to decode (BENCHMARKS.md, issue 53: 6% less of its
CPU on a 5,000-node stream; to us, decoding a pod costs 71 µs against json.loads' 46). The messages are upstream's:
`engine/data/kube-api.binpb` is the FileDescriptorSet protoc makes of the k8s.io/api release's `generated.proto`
files (scripts/kube_proto.py), and the classes come from it at run time. An object read in protobuf becomes the
same dict its JSON would (`to_dict`), so one conversion (engine.reading.convert) serves both encodings; CRDs and
kinds without a message here stay JSON.

On the wire (k8s.io/apimachinery/pkg/runtime/serializer/protobuf): an object is `k8s\\x00` + a runtime.Unknown
holding its apiVersion, kind and the message's bytes; a watch streams frames of a 4-byte big-endian length and a
meta/v1 WatchEvent whose object's raw bytes are such an object.
"""

from __future__ import annotations

import base64
import datetime
import json
import struct
import time
from collections.abc import Callable, Iterable, Iterator
from importlib import resources
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError, Message

MEDIA = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"
MACHINERY = "k8s.io.apimachinery.pkg"
UNKNOWN = f"{MACHINERY}.runtime.Unknown"
WATCH_EVENT = f"{MACHINERY}.apis.meta.v1.WatchEvent"
STATUS = f"{MACHINERY}.apis.meta.v1.Status"
UNREAD = frozenset({"managedFields"})  # metadata no scheduling decision reads, and the bulk of an object's bytes


class WireError(ValueError):
    """Bytes that are not what the protobuf encoding says they are (or name a kind we have no message for)."""


def _package(api_version: str) -> str:
    """The proto package of a group/version: `v1` → k8s.io.api.core.v1, `resource.k8s.io/v1` → ….resource.v1."""
    group, _, version = api_version.rpartition("/")
    return f"k8s.io.api.{group.split('.')[0] if group else 'core'}.{version}"


def message_name(api_version: str, kind: str) -> str:
    """The message of objects of `kind` at `api_version` (a Status is meta/v1's whatever the version says)."""
    return STATUS if kind == "Status" else f"{_package(api_version)}.{kind}"


def _rfc3339(seconds: int, nanos: int = 0, micro: bool = False) -> str:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
    return f"{stamp}.{nanos // 1000:06d}Z" if micro else f"{stamp}Z"


def _seconds(text: str) -> tuple[int, int]:
    """An RFC 3339 time's (seconds, nanos); a fraction is optional, the zone Z or ±hh:mm."""
    parsed = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return int(parsed.timestamp() // 1), parsed.microsecond * 1000


def go_duration(nanos: int) -> str:
    """Go's time.Duration.String (metav1.Duration's JSON): 1h2m3.5s, 1.5ms, 0s."""
    if nanos == 0:
        return "0s"
    sign, nanos = ("-", -nanos) if nanos < 0 else ("", nanos)
    if nanos < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if nanos >= size:
                return f"{sign}{_fraction(nanos, size)}{unit}"
    hours, rest = divmod(nanos, 3_600_000_000_000)
    minutes, rest = divmod(rest, 60_000_000_000)
    text = f"{hours}h{minutes}m" if hours else (f"{minutes}m" if minutes else "")
    return f"{sign}{text}{_fraction(rest, 1_000_000_000)}s"


def _fraction(value: int, size: int) -> str:
    whole, part = divmod(value, size)
    digits = len(str(size)) - 1
    return f"{whole}.{part:0{digits}d}".rstrip("0") if part else str(whole)


def _raw(data: bytes) -> Any:
    """A RawExtension's or FieldsV1's bytes as their JSON says them (they hold JSON; else base64, as bytes read)."""
    try:
        return json.loads(data)
    except ValueError:
        return base64.b64encode(data).decode()


# messages whose JSON is not their fields (Go types with their own MarshalJSON)
_READ_SPECIAL: dict[str, Callable[[Any], Any]] = {
    f"{MACHINERY}.api.resource.Quantity": lambda m: m.string,
    f"{MACHINERY}.apis.meta.v1.Time": lambda m: _rfc3339(m.seconds),
    f"{MACHINERY}.apis.meta.v1.MicroTime": lambda m: _rfc3339(m.seconds, m.nanos, micro=True),
    f"{MACHINERY}.apis.meta.v1.Duration": lambda m: go_duration(m.duration),
    f"{MACHINERY}.util.intstr.IntOrString": lambda m: m.strVal if m.type == 1 else m.intVal,
    f"{MACHINERY}.runtime.RawExtension": lambda m: _raw(m.raw),
    f"{MACHINERY}.apis.meta.v1.FieldsV1": lambda m: _raw(m.Raw),
}


def _write_time(message: Message, value: Any, micro: bool) -> None:
    seconds, nanos = _seconds(str(value))
    message.seconds, message.nanos = seconds, nanos if micro else 0  # a Time's JSON has whole seconds


def _write_int_or_string(message: Message, value: Any) -> None:
    if isinstance(value, str):
        message.type, message.strVal = 1, value
    else:
        message.type, message.intVal = 0, int(value)


# the same types, filled from their JSON
_WRITE_SPECIAL: dict[str, Callable[[Message, Any], None]] = {
    f"{MACHINERY}.api.resource.Quantity": lambda m, v: setattr(m, "string", str(v)),
    f"{MACHINERY}.apis.meta.v1.Time": lambda m, v: _write_time(m, v, micro=False),
    f"{MACHINERY}.apis.meta.v1.MicroTime": lambda m, v: _write_time(m, v, micro=True),
    f"{MACHINERY}.util.intstr.IntOrString": _write_int_or_string,
    f"{MACHINERY}.runtime.RawExtension": lambda m, v: setattr(m, "raw", json.dumps(v).encode()),
    f"{MACHINERY}.apis.meta.v1.FieldsV1": lambda m, v: setattr(m, "Raw", json.dumps(v).encode()),
}


def frames(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """The length-delimited frames (a 4-byte big-endian length, then that many bytes) of a byte stream."""
    buffer = bytearray()
    start = 0
    for chunk in chunks:
        buffer += chunk
        while len(buffer) - start >= 4:
            (size,) = struct.unpack_from(">I", buffer, start)
            end = start + 4 + size
            if len(buffer) < end:
                break
            yield bytes(buffer[start + 4:end])
            start = end
        if start:
            del buffer[:start]
            start = 0
    if buffer:
        raise WireError(f"a watch stream ended inside a frame ({len(buffer)} bytes left)")


class Codec:
    """Upstream's messages (from the descriptor set) and the conversions between their bytes and JSON's dicts."""

    def __init__(self) -> None:
        data = resources.files("engine.data")
        files = descriptor_pb2.FileDescriptorSet.FromString(data.joinpath("kube-api.binpb").read_bytes())
        # of each message, the fields JSON inlines (Go's embedded structs: a Volume's VolumeSource)
        self._inline: dict[str, frozenset[str]] = {
            name: frozenset(fields)
            for name, fields in json.loads(data.joinpath("kube-api-inline.json").read_text())["inline"].items()}
        self._pool = descriptor_pool.DescriptorPool()
        for file in files.file:
            self._pool.Add(file)
        self._classes: dict[str, type[Message] | None] = {}
        self._readers: dict[str, Callable[[Message], Any]] = {}

    def message(self, full_name: str) -> type[Message] | None:
        """The class of the message `full_name`; None when the set has none."""
        if full_name not in self._classes:
            try:
                found: type[Message] | None = message_factory.GetMessageClass(self._pool.FindMessageTypeByName(full_name))
            except KeyError:
                found = None
            self._classes[full_name] = found
        return self._classes[full_name]

    def serves(self, api_version: str, kind: str) -> bool:
        """Whether objects of `kind` at `api_version` can be read and written here (a list's kind: `PodList`)."""
        return self.message(message_name(api_version, kind)) is not None

    # -- reading

    def decode(self, data: bytes) -> dict[str, Any]:
        """An object (or list) as the apiserver sent it, as its JSON dict, apiVersion and kind included."""
        if not data.startswith(MAGIC):
            raise WireError("not a Kubernetes protobuf object (no k8s\\x00 prefix)")
        envelope = self._parse(UNKNOWN, data[len(MAGIC):])
        api_version, kind = envelope.typeMeta.apiVersion, envelope.typeMeta.kind
        out = self.to_dict(self._parse(message_name(api_version, kind), envelope.raw))
        return {"kind": kind, "apiVersion": api_version, **out}

    def watch_events(self, chunks: Iterable[bytes]) -> Iterator[tuple[str, dict[str, Any]]]:
        """(type, object) of each frame in a watch stream, given as the byte chunks it arrives in (a frame may span
        chunks, a chunk hold several: the apiserver flushes one event per HTTP chunk, which is read as it comes,
        without waiting for more)."""
        for body in frames(chunks):
            event = self._parse(WATCH_EVENT, body)
            yield event.type, self.decode(event.object.raw)

    def _parse(self, full_name: str, data: bytes) -> Message:
        cls = self.message(full_name)
        if cls is None:
            raise WireError(f"no protobuf message {full_name}")
        try:
            return cls.FromString(data)
        except DecodeError as exc:
            raise WireError(f"{full_name}: {exc}") from None

    def to_dict(self, message: Message) -> dict[str, Any]:
        """A message as the dict its object's JSON decodes to."""
        return self._reader(message.DESCRIPTOR)(message)

    def _reader(self, descriptor: Descriptor) -> Callable[[Message], Any]:
        """One function per message type that reads its set fields (made once: the descriptor decides each field's
        conversion, not each value)."""
        name = descriptor.full_name
        found = self._readers.get(name)
        if found is not None:
            return found
        special = _READ_SPECIAL.get(name)
        if special is not None:
            self._readers[name] = special
            return special
        table: dict[FieldDescriptor, tuple[str, Callable[[Any], Any] | None]] = {}  # field: its JSON name, reader
        inline = self._inline.get(name, frozenset())
        unread = {f for f in descriptor.fields if f.name in UNREAD}

        def read(message: Message) -> dict[str, Any]:
            out = {}
            for field, value in message.ListFields():
                key, reader = table[field]
                out[key] = value if reader is None else reader(value)
            return out

        def read_some(message: Message) -> dict[str, Any]:
            out = {}
            for field, value in message.ListFields():
                if field not in unread:
                    key, reader = table[field]
                    out[key] = value if reader is None else reader(value)
            return out
        plain = read_some if unread else read

        def read_inline(message: Message) -> dict[str, Any]:
            out = plain(message)
            for field in inline & out.keys():
                out.update(out.pop(field))
            return out
        chosen = self._readers[name] = read_inline if inline else plain  # before the fields: it may hold itself
        for field in descriptor.fields:
            table[field] = (field.name, self._field_reader(field))
        return chosen

    def _field_reader(self, field: FieldDescriptor) -> Callable[[Any], Any] | None:
        """How a set field's value becomes JSON's (None: as it is, a plain scalar)."""
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            value = self._value_reader(field.message_type.fields_by_name["value"])
            return dict if value is None else (lambda mapping: {k: value(v) for k, v in mapping.items()})
        one = self._value_reader(field)
        if field.is_repeated:
            return list if one is None else (lambda values: [one(v) for v in values])
        return one

    def _value_reader(self, field: FieldDescriptor) -> Callable[[Any], Any] | None:
        if field.message_type is not None:
            return self._reader(field.message_type)  # registered before its fields: recursion ends
        if field.type == FieldDescriptor.TYPE_BYTES:
            return lambda value: base64.b64encode(value).decode()
        return None

    # -- writing

    def encode(self, obj: dict[str, Any]) -> bytes:
        """An object (its apiVersion and kind say which) as the apiserver reads it in protobuf."""
        api_version, kind = str(obj.get("apiVersion") or ""), str(obj.get("kind") or "")
        message = self.from_dict(message_name(api_version, kind),
                                 {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")})
        envelope = self._new(UNKNOWN)
        envelope.typeMeta.apiVersion, envelope.typeMeta.kind = api_version, kind
        envelope.raw = message.SerializeToString()
        return MAGIC + envelope.SerializeToString()

    def _new(self, full_name: str) -> Message:
        cls = self.message(full_name)
        if cls is None:
            raise WireError(f"no protobuf message {full_name}")
        return cls()

    def from_dict(self, full_name: str, value: dict[str, Any]) -> Message:
        """The message `full_name` holding what JSON's `value` says (WireError: a field it has not, a wrong type)."""
        message = self._new(full_name)
        self._fill(message, value)
        return message

    def _fill(self, message: Message, value: Any) -> None:
        descriptor = message.DESCRIPTOR
        special = _WRITE_SPECIAL.get(descriptor.full_name)
        if special is not None:
            special(message, value)
            return
        if not isinstance(value, dict):
            raise WireError(f"{descriptor.full_name}: {value!r} is not an object")
        inline = self._inline.get(descriptor.full_name, frozenset())
        for key, item in value.items():
            field = descriptor.fields_by_name.get(key)
            if field is None:
                holder = next((f for f in inline if key in descriptor.fields_by_name[f].message_type.fields_by_name),
                              None)
                if holder is None:
                    raise WireError(f"{descriptor.full_name} has no field {key}")
                self._fill(getattr(message, holder), {key: item})
                getattr(message, holder).SetInParent()
                continue
            if item is None:
                continue
            self._fill_field(message, field, item)

    def _fill_field(self, message: Message, field: FieldDescriptor, item: Any) -> None:
        target = getattr(message, field.name)
        try:
            if field.message_type is not None and field.message_type.GetOptions().map_entry:
                value_field = field.message_type.fields_by_name["value"]
                for k, v in item.items():
                    if value_field.message_type is not None:
                        self._fill(target[k], v)
                    else:
                        target[k] = _scalar(value_field, v)
            elif field.is_repeated:
                for v in item:
                    if field.message_type is not None:
                        self._fill(target.add(), v)
                    else:
                        target.append(_scalar(field, v))
            elif field.message_type is not None:
                self._fill(target, item)
                target.SetInParent()  # an empty object ({}) is set, as JSON says
            else:
                setattr(message, field.name, _scalar(field, item))
        except (TypeError, ValueError, AttributeError) as exc:
            if isinstance(exc, WireError):
                raise
            raise WireError(f"{message.DESCRIPTOR.full_name}.{field.name}: {exc}") from None


def _scalar(field: FieldDescriptor, value: Any) -> Any:
    """A JSON scalar as the field holds it (bytes are base64 in JSON)."""
    return base64.b64decode(value) if field.type == FieldDescriptor.TYPE_BYTES else value
