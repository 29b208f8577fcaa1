"""Compile upstream's `generated.proto` files of the k8s.io/api release we support into one FileDescriptorSet,
`engine/data/kube-api.binpb`, from which engine.loop.wire makes the protobuf message classes at run time, and list
the fields JSON inlines (`engine/data/kube-api-inline.json`): a Go struct embedded with `json:""` (a Volume's
VolumeSource, a claim's DeviceConfiguration) is one field in protobuf and its fields in JSON; only the Go types say
which (their tags), so they are read from the same release's types.go.

A release step, not a run-time one: it needs the Go module cache (`go mod download k8s.io/api@VERSION
k8s.io/apimachinery@VERSION`) and `grpcio-tools` (protoc as a Python package; `pip install "grpcio-tools<1.77"`,
the line whose protobuf OR-tools accepts). Nothing is written by hand: the messages are upstream's, the set is what
protoc makes of them; tests/test_wire.py regenerates both files and compares them byte for byte.

    python scripts/kube_proto.py            # k8s.io/api v0.37.2 (Kubernetes 1.37)
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the test kit (testkit/), which is not installed with the package

from testkit.schemas import module_cache  # noqa: E402

VERSION = "v0.37.2"
# the groups/versions whose kinds the scheduler lists and watches (engine.reading.objects) and writes (Binding,
# Event); apimachinery's files come with their imports
API_PACKAGES = ("core/v1", "apps/v1", "batch/v1", "policy/v1", "scheduling/v1", "scheduling/v1alpha3",
                "scheduling/v1beta1", "storage/v1", "resource/v1", "resource/v1beta2", "resource/v1alpha3")
MACHINERY_PACKAGES = ("pkg/api/resource", "pkg/apis/meta/v1", "pkg/runtime", "pkg/runtime/schema", "pkg/util/intstr")
OUT = ROOT / "engine" / "data" / "kube-api.binpb"
STRUCT = re.compile(r"^type (\w+) struct \{")
EMBEDDED = re.compile(r'^\s+\*?[A-Z]\w*\s+`json:"(,inline)?".*protobuf:"[^"]*\bname=(\w+)')


def inlined(types_go: str, package: str) -> dict[str, list[str]]:
    """Of each struct in a types.go, the protobuf names of the fields JSON inlines (embedded, no JSON name)."""
    found: dict[str, list[str]] = {}
    struct = None
    for line in types_go.splitlines():
        if (start := STRUCT.match(line)) is not None:
            struct = start.group(1)
        elif line.startswith("}"):
            struct = None
        elif struct is not None and (field := EMBEDDED.match(line)) is not None:
            found.setdefault(f"{package}.{struct}", []).append(field.group(2))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", default=VERSION, help="the k8s.io/api and k8s.io/apimachinery version")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    from grpc_tools import protoc  # a release-time tool, not a dependency

    cache = module_cache()
    inline: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory() as root:
        files = []
        for module, packages in (("api", API_PACKAGES), ("apimachinery", MACHINERY_PACKAGES)):
            source = cache / f"k8s.io/{module}@{args.version}"
            if not source.is_dir():
                print(f"error: {source} is missing: go mod download k8s.io/{module}@{args.version}", file=sys.stderr)
                return 2
            for package in packages:
                target = Path(root, "k8s.io", module, package, "generated.proto")
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source / package / "generated.proto", target)
                proto_package = re.search(r"^package ([\w.]+);", target.read_text(), re.MULTILINE)
                assert proto_package is not None, target
                for go in sorted((source / package).glob("types*.go")):
                    inline.update(inlined(go.read_text(), proto_package.group(1)))
                if module == "api":
                    files.append(str(target.relative_to(root)))
        code = protoc.main(["protoc", f"-I{root}", "--include_imports", f"--descriptor_set_out={args.out}", *files])
    if code:
        print(f"error: protoc failed ({code})", file=sys.stderr)
        return 1
    inline_out = args.out.with_name(args.out.name.replace(".binpb", "-inline.json"))
    inline_out.write_text(json.dumps({"version": args.version, "inline": dict(sorted(inline.items()))}, indent=1) + "\n")
    print(f"{args.out}: {args.out.stat().st_size} bytes, k8s.io/api {args.version}; {inline_out}: "
          f"{sum(map(len, inline.values()))} inlined fields")
    return 0


if __name__ == "__main__":
    sys.exit(main())
