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
# shellcheck source=../build-common.sh
. "$here/../build-common.sh"

# The versions live in the go.mod files only; read them from there.
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
# One build at a time; static binaries (no C toolchain needed), as upstream releases them; -mod=readonly
# (after changing a version: `go mod tidy` in this directory and in etcd/, then commit go.mod and go.sum).
start_build "$cache_dir" "$@"

# /version of the apiserver reports these (k8s.io/component-base/version's link-time vars).
version_pkg="k8s.io/component-base/version"
kube_ldflags="-s -w"
kube_ldflags+=" -X $version_pkg.gitVersion=$kube_version"
kube_ldflags+=" -X $version_pkg.gitMajor=$kube_major"
kube_ldflags+=" -X $version_pkg.gitMinor=$kube_minor"
kube_ldflags+=" -X $version_pkg.gitTreeState=clean"
kube_ldflags+=" -X $version_pkg.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"

build_binary "$cache_dir" etcd "$here/etcd" . "etcd Version: ${etcd_version#v}" "-s -w"
build_binary "$cache_dir" kube-apiserver "$here" k8s.io/kubernetes/cmd/kube-apiserver "Kubernetes $kube_version" "$kube_ldflags"
build_binary "$cache_dir" kube-scheduler "$here" k8s.io/kubernetes/cmd/kube-scheduler "Kubernetes $kube_version" "$kube_ldflags"
build_binary "$cache_dir" kube-controller-manager "$here" k8s.io/kubernetes/cmd/kube-controller-manager "Kubernetes $kube_version" "$kube_ldflags"
echo "build.sh: control plane $kube_version (etcd $etcd_version) ready in $cache_dir"
