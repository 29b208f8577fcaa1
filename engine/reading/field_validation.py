"""Unknown fields in snapshot objects, found as the apiserver's strict field validation finds them.

`kubectl apply` (server-side field validation, `Strict` since 1.27) refuses `spec.nodeSelectr` or a container's
`resources.request` with `strict decoding error: unknown field "spec.nodeSelectr"`; a snapshot read from a file has
passed no apiserver, so such a typo would otherwise silently mean "no node selector", "no requests". Each object is
walked against its kind's schema: field names only (a value of the wrong type is the converters' to refuse), maps
(labels, nodeSelector, requests) take any key, fields typed `object` (int-or-string, raw extensions) and empty
structs (`basic: {}`) any content, and list items are named by index (`spec.containers[0].resources.request`), as
the apiserver names them.

The schemas are real ones, kept in engine/data/schemas.json (testkit/schemas.py writes it, a test holds it equal):
the built-in kinds' from the Kubernetes Python client's models (1.37's API), scheduler-plugins' PodGroup and
ElasticQuota from their CRDs' openAPIV3Schema, and `scheduling.k8s.io/v1alpha2` PodGroups from Kubernetes 1.36.3's
OpenAPI. A kind the file has no schema for is not checked. Pure: `engine.reading.manifests` reads the files and says where.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

Shape = Any  # None (any value) | str (a type's name) | [shape] (a list) | {"*": shape} (a map)
MAX_PER_OBJECT = 100  # as the apiserver's decoder, which stops collecting there


@dataclass(frozen=True, slots=True)
class Schemas:
    """Per `apiVersion/Kind`, its type's name (None: no schema, not checked); per type, its fields' shapes, and
    those of them that hold something to check (`nested`: shape not None)."""

    kinds: dict[str, str | None]
    types: dict[str, dict[str, Shape]]
    nested: dict[str, dict[str, Shape]]

    def unknown_fields(self, obj: dict[str, Any]) -> list[str]:
        """The paths of the fields of `obj` its kind's schema does not have, in the object's order (none for a kind
        without a schema, or not at a known apiVersion: that is refused elsewhere)."""
        name = self.kinds.get(f"{obj.get('apiVersion')}/{obj.get('kind')}")
        if name is None or self._clean(obj, name):
            return []
        out: list[str] = []
        _object(obj, self.types[name], self.types, "", out)
        return out[:MAX_PER_OBJECT]

    def _clean(self, value: dict[Any, Any], name: str) -> bool:
        """Whether an object of type `name` has only known fields: the fast look every object gets (key sets
        compared in C; only fields that hold objects are entered), before the paths are worked out for the few
        that do not."""
        if not value.keys() <= self.types[name].keys():
            return False
        nested = self.nested[name]
        for key in value.keys() & nested.keys() if len(value) > 2 * len(nested) else value:
            shape = nested.get(key)
            if shape is not None and not self._clean_value(value[key], shape):
                return False
        return True

    def _clean_value(self, value: Any, shape: Shape) -> bool:
        if type(shape) is str:
            return type(value) is not dict or self._clean(value, shape)
        if type(shape) is list:
            return type(value) is not list or all(self._clean_value(item, shape[0]) for item in value)
        return type(value) is not dict or all(self._clean_value(item, shape["*"]) for item in value.values())


@lru_cache(maxsize=1)
def schemas() -> Schemas:
    data = json.loads(resources.files("engine.data").joinpath("schemas.json").read_text(encoding="utf-8"))
    types: dict[str, dict[str, Shape]] = data["types"]
    nested = {name: {k: shape for k, shape in fields.items() if shape is not None and _holds_fields(shape)}
              for name, fields in types.items()}
    return Schemas({key: entry["type"] for key, entry in data["kinds"].items()}, types, nested)


def _holds_fields(shape: Shape) -> bool:
    """Whether values of this shape can hold a field to check (not: a list or map of scalars)."""
    while type(shape) is not str:
        shape = shape[0] if type(shape) is list else shape["*"]
        if shape is None:
            return False
    return True


def _object(value: dict[Any, Any], fields: dict[str, Shape], types: dict[str, dict[str, Shape]], path: str,
            out: list[str]) -> None:
    for key, item in value.items():
        shape = fields.get(key, _UNKNOWN) if type(key) is str else _UNKNOWN
        if shape is None:
            continue
        at = f"{path}.{key}" if path else str(key)
        if shape is _UNKNOWN:
            out.append(at)
        else:
            _value(item, shape, types, at, out)


def _value(value: Any, shape: Shape, types: dict[str, dict[str, Shape]], path: str, out: list[str]) -> None:
    if type(shape) is str:
        if type(value) is dict:
            _object(value, types[shape], types, path, out)
    elif type(shape) is list:
        if type(value) is list and shape[0] is not None:
            for i, item in enumerate(value):
                _value(item, shape[0], types, f"{path}[{i}]", out)
    elif type(value) is dict and shape["*"] is not None:
        for key, item in value.items():
            _value(item, shape["*"], types, f"{path}.{key}", out)


_UNKNOWN = object()


@dataclass(frozen=True, slots=True)
class UnknownFields:
    """One object's unknown fields: where it is (`file:line`, the first such field's line where known), what it
    is (`Pod default/p`), and the fields' paths."""

    source: str
    what: str
    paths: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.source}: {self.what}: " + ", ".join(f'unknown field "{p}"' for p in self.paths)
