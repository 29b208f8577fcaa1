#!/usr/bin/env bash
# Builds the real control plane that tests/e2e runs: kube-apiserver, kube-scheduler and
# kube-controller-manager (its PV binder, for the volume tests)
# from k8s.io/kubernetes (./go.mod) and etcd from go.etcd.io/etcd/server (./etcd/go.mod).
#
# Binaries are cached outside the repository, keyed by the Kubernetes version, so only the
# first build on a machine pays (about 8 minutes on 2 cores):
#   ${XDG_CACHE_HOME:-~/.cache}/policy-scheduler/controlplane/<k8s version>/{kube-apiserver,kube-scheduler,kube-controller-manager,etcd}
#
# Usage:  build.sh               build whatever is missing (idempotent; existing binaries are kept)
#         build.sh --print-dir   print the cache directory and exit
#
# Each binary is built under a temporary name, checked with --version, then renamed into
# place, so an interrupted build never leaves a half-written binary behind. A lock file
# serialises concurrent runs (two test sessions starting at once build only once).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# The versions live in the go.mod files only; read them from there.
# required_version MODULE GO_MOD: the version GO_MOD requires MODULE at (block or one-line form)
required_version() {
    awk -v m="$1" '!/=>/ && !/^[[:space:]]*\/\// { for (i = 1; i < NF; i++) if ($i == m) { print $(i + 1); exit } }' "$2"
}
kube_version="$(required_version k8s.io/kubernetes "$here/go.mod")"
etcd_version="$(required_version go.etcd.io/etcd/server/v3 "$here/etcd/go.mod")"
if [[ ! "$kube_version" =~ ^v([0-9]+)\.([0-9]+)\.[0-9]+$ ]]; then
    echo "build.sh: cannot read the k8s.io/kubernetes version from $here/go.mod (got '$kube_version')" >&2
    exit 1
fi
kube_major="${BASH_REMATCH[1]}"
kube_minor="${BASH_REMATCH[2]}"
if [[ -z "$etcd_version" ]]; then
    echo "build.sh: cannot read the go.etcd.io/etcd/server/v3 version from $here/etcd/go.mod" >&2
    exit 1
fi

cache_dir="${XDG_CACHE_HOME:-$HOME/.cache}/policy-scheduler/controlplane/$kube_version"
if [[ "${1:-}" == "--print-dir" ]]; then
    echo "$cache_dir"
    exit 0
elif [[ $# -gt 0 ]]; then
    echo "usage: $0 [--print-dir]" >&2
    exit 2
fi

command -v go >/dev/null || { echo "build.sh: 'go' is not on PATH; Go >= 1.26 is needed" >&2; exit 1; }
mkdir -p "$cache_dir"

# One build at a time per cache directory; a second caller waits, then finds the binaries.
exec 9>"$cache_dir/.build.lock"
flock 9

# Static binaries (no C toolchain needed), as upstream releases them. go.mod and go.sum are
# committed complete: -mod=readonly fails loudly rather than let a build rewrite them
# (after changing a version: `go mod tidy` in this directory and in etcd/, then commit).
export CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=readonly"

# /version of the apiserver reports these (k8s.io/component-base/version's link-time vars).
version_pkg="k8s.io/component-base/version"
kube_ldflags="-s -w"
kube_ldflags+=" -X $version_pkg.gitVersion=$kube_version"
kube_ldflags+=" -X $version_pkg.gitMajor=$kube_major"
kube_ldflags+=" -X $version_pkg.gitMinor=$kube_minor"
kube_ldflags+=" -X $version_pkg.gitTreeState=clean"
kube_ldflags+=" -X $version_pkg.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"

tmp=""
cleanup() { if [[ -n "$tmp" ]]; then rm -f "$tmp"; fi; }
trap cleanup EXIT

# build NAME MODULE_DIR PACKAGE EXPECTED_VERSION_TEXT LDFLAGS
build() {
    local name="$1" module_dir="$2" package="$3" expect="$4" ldflags="$5"
    local dest="$cache_dir/$name"
    if [[ -x "$dest" ]]; then
        echo "build.sh: $name: already built ($dest)"
        return
    fi
    tmp="$dest.tmp.$$"
    echo "build.sh: $name: building $package into $dest (this takes minutes the first time)"
    local start=$SECONDS
    (cd "$module_dir" && nice -n 10 go build -trimpath -ldflags "$ldflags" -o "$tmp" "$package")
    local got
    got="$("$tmp" --version 2>&1 | head -n 3)"
    if [[ "$got" != *"$expect"* ]]; then
        echo "build.sh: $name: '$tmp --version' printed '$got', expected it to contain '$expect'" >&2
        exit 1
    fi
    mv -f "$tmp" "$dest"
    tmp=""
    echo "build.sh: $name: built in $((SECONDS - start)) s ($(head -n 1 <<<"$got"))"
}

build etcd "$here/etcd" . "etcd Version: ${etcd_version#v}" "-s -w"
build kube-apiserver "$here" k8s.io/kubernetes/cmd/kube-apiserver "Kubernetes $kube_version" "$kube_ldflags"
build kube-scheduler "$here" k8s.io/kubernetes/cmd/kube-scheduler "Kubernetes $kube_version" "$kube_ldflags"
build kube-controller-manager "$here" k8s.io/kubernetes/cmd/kube-controller-manager "Kubernetes $kube_version" "$kube_ldflags"
echo "build.sh: control plane $kube_version (etcd $etcd_version) ready in $cache_dir"
