"""Write engine/data/schemas.json: the field names of every object kind a snapshot may hold, from real schemas.

The engine checks snapshot objects for unknown fields against this file (engine.reading.field_validation), as the
apiserver's strict field validation checks them. Each kind's schema comes from where the apiserver's does:

- built-in kinds: the Kubernetes Python client's models (`attribute_map`, `openapi_types`: Kubernetes 1.37's API,
  the client this project pins), e.g. `kubernetes.client.V1Pod`;
- scheduler-plugins' PodGroup and ElasticQuota: their CRD manifests' `openAPIV3Schema` (deploy/);
- the workloads `gang by workload` reads (JobSet, LeaderWorkerSet, RayCluster, PyTorchJob, MPIJob): their released CRD
  manifests, from the pinned Go modules in the module cache (testkit/workloads.py; not downloaded: kept as the file
  has them);
- kinds the client lacks (`scheduling.k8s.io/v1alpha2` PodGroups, 1.36's; `v1beta1` CompositePodGroups, 1.38's):
  that release's OpenAPI document, from the Go module cache (`k8s.io/kubernetes@v1.36.3/api/openapi-spec/v3/`,
  which the e2e control plane's build fetches; `@v1.38.0-beta.0`'s, fetched by hand until 1.38 builds here).

The engine reads the file, not the client: importing the client and building the ~300 model classes a snapshot
reaches costs ~0.5 s per command, and only the scheduler loop's API module imports the client (.importlinter).
tests/test_field_validation.py holds the file equal to what this writes. Regenerate with `make schemas`.

A field is encoded as null (a value of any shape: a scalar, or a field typed `object`), a type's name (an object
whose keys are that type's fields), `[x]` (a list of x) or `{"*": x}` (a map whose values are x).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "engine" / "data" / "schemas.json"
CRDS = (ROOT / "deploy" / "components" / "podgroup-crd" / "podgroup-crd.yaml",
        ROOT / "deploy" / "components" / "elasticquota-crd" / "elasticquota-crd.yaml")
# scheduler-plugins' former group for the same CRDs, whose fields they kept
CRD_ALIASES = {"scheduling.sigs.k8s.io/": "scheduling.x-k8s.io/"}
# group/version -> (the Kubernetes release whose OpenAPI describes it, that document's file name)
OPENAPI = {"scheduling.k8s.io/v1alpha2": ("v1.36.3", "apis__scheduling.k8s.io__v1alpha2_openapi.json"),
           # 1.38's CompositePodGroup (the client, 1.37's, has v1beta1 PodGroups but not it)
           "scheduling.k8s.io/v1beta1": ("v1.38.0-beta.0", "apis__scheduling.k8s.io__v1beta1_openapi.json")}
_META = "io.k8s.apimachinery.pkg.apis.meta.v1."
_LEAVES = frozenset({"str", "int", "bool", "float", "datetime", "date", "bytes", "object"})

Shape = Any  # None | str | list | dict, as the module docstring says


def module_cache() -> Path:
    """Go's module cache (`go env GOMODCACHE`), or its default place when Go is not installed."""
    try:
        out = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True, timeout=30, check=True)
        if out.stdout.strip():
            return Path(out.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        pass
    return Path(os.environ.get("GOPATH") or Path.home() / "go") / "pkg" / "mod"


def openapi_document(group_version: str) -> dict[str, Any] | None:
    """The OpenAPI v3 document of a group/version from the module cache (None: not downloaded)."""
    release, name = OPENAPI[group_version]
    path = module_cache() / f"k8s.io/kubernetes@{release}" / "api" / "openapi-spec" / "v3" / name
    return json.loads(path.read_text()) if path.is_file() else None


class _Writer:
    """Collects the types reached from each kind, once each."""

    def __init__(self) -> None:
        import kubernetes.client  # the generator's dependency, never the engine's

        self.client = kubernetes.client
        self.types: dict[str, dict[str, Shape]] = {}

    # --- the client's models --------------------------------------------------------------------------------

    def client_class(self, api_version: str, kind: str) -> str | None:
        """The model class of a built-in kind: `V1Pod`, or group-prefixed where two groups share a kind's name
        (`ResourceV1ResourceClaim`: resource.k8s.io's, beside core's `CoreV1ResourceClaim`)."""
        group, _, version = api_version.rpartition("/")
        prefix = (group.split(".")[0] if group else "core").capitalize()
        for name in (f"{prefix}{version.capitalize()}{kind}", f"{version.capitalize()}{kind}"):
            if isinstance(getattr(self.client, name, None), type):
                return self.model(name)
        return None

    def model(self, name: str) -> str:
        if name not in self.types:
            cls = getattr(self.client, name)
            self.types[name] = {}
            self.types[name] = {cls.attribute_map[attr]: self.client_shape(kind)
                                for attr, kind in cls.openapi_types.items()}
        return name

    def client_shape(self, kind: str) -> Shape:
        if kind in _LEAVES:
            return None
        if m := re.fullmatch(r"List\[(.+)\]", kind):
            return [self.client_shape(m.group(1))]
        if m := re.fullmatch(r"Dict\[str, (.+)\]", kind):
            return {"*": self.client_shape(m.group(1))}
        return self.model(kind)

    # --- OpenAPI schemas: CRDs' openAPIV3Schema, and OpenAPI documents' components -------------------------------

    def schema_shape(self, schema: dict[str, Any], name: str, components: Mapping[str, Any]) -> Shape:
        """A schema's shape; an object with properties becomes a type named `name` (a component's own name)."""
        ref = schema.get("$ref") or next((s["$ref"] for s in schema.get("allOf") or () if "$ref" in s), None)
        if ref is not None:
            target = ref.rsplit("/", 1)[1]
            if target.startswith(_META):  # the apimachinery types the client has: ObjectMeta, Condition, Time
                client = "V1" + target.removeprefix(_META)
                return self.model(client) if isinstance(getattr(self.client, client, None), type) else None
            if target not in self.types:
                self.types[target] = {}
                shape = self.schema_shape(components[target], target, components)
                if shape != target:
                    del self.types[target]
                    return shape
            return target
        if schema.get("x-kubernetes-preserve-unknown-fields") or schema.get("x-kubernetes-int-or-string"):
            return None
        if schema.get("type") == "array":
            return [self.schema_shape(schema.get("items") or {}, f"{name}[]", components)]
        if isinstance(schema.get("additionalProperties"), dict):
            return {"*": self.schema_shape(schema["additionalProperties"], f"{name}.*", components)}
        if "properties" not in schema:
            return None
        self.types[name] = {key: self.schema_shape(sub, f"{name}.{key}", components)
                            for key, sub in schema["properties"].items()}
        return name

    def root(self, schema: dict[str, Any], name: str, components: Mapping[str, Any]) -> str:
        """A kind's own type: its metadata is always ObjectMeta (the apiserver reads a CRD's metadata as such)."""
        shape = self.schema_shape(schema, name, components)
        self.types[shape]["metadata"] = self.model("V1ObjectMeta")
        return shape


def _crd_versions(paths: Iterable[Path]) -> dict[str, tuple[str, dict[str, Any]]]:
    """`group/version/Kind` -> (the CRD file, that version's openAPIV3Schema), for every CRD in the files."""
    import yaml

    out = {}
    for path in paths:
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc or doc.get("kind") != "CustomResourceDefinition":
                continue
            spec = doc["spec"]
            for version in spec["versions"]:
                out[f"{spec['group']}/{version['name']}/{spec['names']['kind']}"] = (
                    str(path.relative_to(ROOT)), version["schema"]["openAPIV3Schema"])
    return out


def _module_crds() -> dict[str, tuple[str, dict[str, Any]]]:
    """`group/version/Kind` -> (the module and file, that version's schema) of the workload CRDs whose pinned module
    is in the module cache."""
    import yaml

    from .workloads import WORKLOAD_CRDS

    out = {}
    for module, version, path in WORKLOAD_CRDS.values():
        file = module_cache() / f"{module}@{version}" / path
        if not file.is_file():
            continue
        spec = yaml.safe_load(file.read_text())["spec"]
        for v in spec["versions"]:
            out[f"{spec['group']}/{v['name']}/{spec['names']['kind']}"] = (f"{module}@{version} {path}",
                                                                          v["schema"]["openAPIV3Schema"])
    return out


def _module_kinds() -> frozenset[str]:
    from .workloads import API, WORKLOAD_CRDS

    return frozenset(f"{API[kind]}/{kind}" for kind in WORKLOAD_CRDS)


_MODULE_KINDS = _module_kinds()


def build(kinds: Mapping[str, Iterable[str]], documents: Mapping[str, dict[str, Any] | None]) -> dict[str, Any]:
    """The file's content for `kinds` (manifest kind -> the apiVersions read, engine.reading.objects.API_VERSIONS) and the
    OpenAPI `documents` of the group/versions the client lacks (None: not in the module cache; then kept from
    the file as it is). A kind found in none of the sources maps to null: not checked."""
    writer = _Writer()
    crds = _crd_versions(CRDS)
    crds.update(_module_crds())
    old = json.loads(OUT.read_text()) if OUT.is_file() else {"kinds": {}, "types": {}}
    found: dict[str, Any] = {}
    for kind, versions in sorted(kinds.items()):
        for api_version in versions:
            key = f"{api_version}/{kind}"
            crd = next((key.replace(old, new, 1) for old, new in CRD_ALIASES.items() if key.startswith(old)), key)
            if crd in crds:
                source, schema = crds[crd]
                found[key] = {"type": writer.root(schema, crd, {}), "source": source + ("" if crd == key else
                              f" (read as {crd.split('/')[0]}'s: the former group of the same CRD)")}
            elif key in _MODULE_KINDS:  # its module is not in the cache: kept as the file has it
                found[key] = old["kinds"].get(key) or {"type": None, "source": "no schema: not checked"}
                _keep(writer, found[key]["type"], old["types"])
            elif name := writer.client_class(api_version, kind):
                found[key] = {"type": name, "source": f"kubernetes {writer.client.__version__}"}
            elif api_version in OPENAPI:
                found[key] = _from_document(writer, key, api_version, kind, documents.get(api_version), old)
            else:
                found[key] = {"type": None, "source": "no schema: not checked"}
    return {"kinds": found, "types": dict(sorted(writer.types.items()))}


def _from_document(writer: _Writer, key: str, api_version: str, kind: str, document: dict[str, Any] | None,
                   old: dict[str, Any]) -> dict[str, Any]:
    """A kind from its release's OpenAPI document; without the document, what the file holds already."""
    release, name = OPENAPI[api_version]
    if document is None:
        entry = old["kinds"].get(key) or {"type": None, "source": "no schema: not checked"}
        _keep(writer, entry["type"], old["types"])
        return entry
    components = document["components"]["schemas"]
    group, _, version = api_version.rpartition("/")
    [component] = [n for n, s in components.items()
                   if {"group": group, "version": version, "kind": kind} in s.get("x-kubernetes-group-version-kind", [])]
    return {"type": writer.root(components[component], component, components),
            "source": f"k8s.io/kubernetes {release} api/openapi-spec/v3/{name}"}


def _keep(writer: _Writer, shape: Shape, types: dict[str, Any]) -> None:
    """Copy a type and the types it reaches from an earlier file."""
    if isinstance(shape, list):
        _keep(writer, shape[0], types)
    elif isinstance(shape, dict):
        _keep(writer, shape["*"], types)
    elif isinstance(shape, str) and shape not in writer.types:
        writer.types[shape] = types[shape]
        for sub in types[shape].values():
            _keep(writer, sub, types)


def render(content: dict[str, Any]) -> str:
    """One kind or type a line, keys sorted: a change to the client shows as a readable diff."""
    def block(name: str, items: dict[str, Any]) -> str:
        lines = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v, sort_keys=True)}" for k, v in sorted(items.items()))
        return f'"{name}": {{\n{lines}\n}}'
    return "{\n" + ",\n".join(block(name, content[name]) for name in ("kinds", "types")) + "\n}\n"


def write(kinds: Mapping[str, Iterable[str]]) -> None:
    documents = {gv: openapi_document(gv) for gv in OPENAPI}
    for gv, doc in documents.items():
        if doc is None:
            print(f"{gv}: {OPENAPI[gv][0]}'s OpenAPI is not in the Go module cache; kept as the file has it",
                  file=sys.stderr)
    OUT.write_text(render(build(kinds, documents)))
