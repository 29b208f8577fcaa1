#!/usr/bin/env bash
# Builds helm (helm.sh/helm/v3) and kustomize (sigs.k8s.io/kustomize/kustomize/v5) from the Go modules that
# ./go.mod pins: the chart tests run `helm lint` / `helm template` and the deploy/ tests `kustomize build`.
#
# Cached outside the repository, keyed by both versions, so only a machine's first build pays (about 3 minutes
# on 2 cores, module downloads aside):
#   ${XDG_CACHE_HOME:-~/.cache}/policy-scheduler/helm/<helm version>-kustomize-<kustomize version>/{helm,kustomize}
#
# Usage:  build.sh               build whatever is missing (idempotent)
#         build.sh --print-dir   print the cache directory and exit
#
# As tests/e2e/controlplane/build.sh: built under a temporary name, checked with `version`, then renamed; a lock
# serialises concurrent runs; -mod=readonly (after changing a version: `go mod tidy` here, commit go.mod and go.sum).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

required_version() {
    awk -v m="$1" '!/=>/ && !/^[[:space:]]*\/\// { for (i = 1; i < NF; i++) if ($i == m) { print $(i + 1); exit } }' "$here/go.mod"
}
helm_version="$(required_version helm.sh/helm/v3)"
kustomize_version="$(required_version sigs.k8s.io/kustomize/kustomize/v5)"
for v in "$helm_version" "$kustomize_version"; do
    if [[ ! "$v" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
        echo "build.sh: cannot read the helm and kustomize versions from $here/go.mod (got '$helm_version', '$kustomize_version')" >&2
        exit 1
    fi
done

cache_dir="${XDG_CACHE_HOME:-$HOME/.cache}/policy-scheduler/helm/$helm_version-kustomize-$kustomize_version"
if [[ "${1:-}" == "--print-dir" ]]; then
    echo "$cache_dir"
    exit 0
elif [[ $# -gt 0 ]]; then
    echo "usage: $0 [--print-dir]" >&2
    exit 2
fi

command -v go >/dev/null || { echo "build.sh: 'go' is not on PATH; Go >= 1.26 is needed" >&2; exit 1; }
mkdir -p "$cache_dir"
exec 9>"$cache_dir/.build.lock"
flock 9

export CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=readonly"

tmp=""
cleanup() { if [[ -n "$tmp" ]]; then rm -f "$tmp"; fi; }
trap cleanup EXIT

# build NAME PACKAGE VERSION LDFLAGS
build() {
    local name="$1" package="$2" version="$3" ldflags="$4"
    local dest="$cache_dir/$name"
    if [[ -x "$dest" ]]; then
        echo "build.sh: $name: already built ($dest)"
        return
    fi
    tmp="$dest.tmp.$$"
    echo "build.sh: $name: building $package into $dest (minutes the first time)"
    local start=$SECONDS
    (cd "$here" && nice -n 10 go build -trimpath -ldflags "$ldflags" -o "$tmp" "$package")
    local got
    got="$("$tmp" version 2>&1 | head -n 1)"
    if [[ "$got" != *"$version"* ]]; then
        echo "build.sh: $name: '$tmp version' printed '$got', expected it to contain '$version'" >&2
        exit 1
    fi
    mv -f "$tmp" "$dest"
    tmp=""
    echo "build.sh: $name: built in $((SECONDS - start)) s ($got)"
}

build helm helm.sh/helm/v3/cmd/helm "$helm_version" \
    "-s -w -X helm.sh/helm/v3/internal/version.version=$helm_version -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
build kustomize sigs.k8s.io/kustomize/kustomize/v5 "$kustomize_version" \
    "-s -w -X sigs.k8s.io/kustomize/api/provenance.version=kustomize/$kustomize_version"
echo "build.sh: helm $helm_version and kustomize $kustomize_version ready in $cache_dir"
