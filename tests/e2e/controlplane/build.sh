#!/usr/bin/env bash
# Builds the real control plane that tests/e2e runs, for one Kubernetes version: kube-apiserver,
# kube-scheduler and kube-controller-manager (its PV binder, for the volume tests) from
# k8s.io/kubernetes (./<version>/go.mod) and etcd from go.etcd.io/etcd/server (./etcd/go.mod, one
# etcd for every version: each supported release accepts it).
#
# The version is POLICY_SCHEDULER_KUBE_VERSION (default v1.36.3; the e2e suite reads the same
# variable); each supported version has its own module directory here, v1.36.3/ and v1.37.2/.
#
# Binaries are cached outside the repository, keyed by the Kubernetes version, so only the
# first build on a machine pays (about 8 minutes on 2 cores, per version):
#   ${XDG_CACHE_HOME:-~/.cache}/policy-scheduler/controlplane/<k8s version>/{kube-apiserver,kube-scheduler,kube-controller-manager,etcd}
#
# Usage:  [POLICY_SCHEDULER_KUBE_VERSION=v1.37.2] build.sh               build whatever is missing (idempotent)
#         [POLICY_SCHEDULER_KUBE_VERSION=v1.37.2] build.sh --print-dir   print the cache directory and exit
#
# Each binary is built under a temporary name, checked with --version, then renamed into
# place, so an interrupted build never leaves a half-written binary behind. A lock file
# serialises concurrent runs (two test sessions starting at once build only once).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../build-common.sh
. "$here/../build-common.sh"

requested="${POLICY_SCHEDULER_KUBE_VERSION:-v1.36.3}"
module_dir="$here/$requested"
if [[ ! -f "$module_dir/go.mod" ]]; then
    supported="$(cd "$here" && ls -d v*/ 2>/dev/null | tr -d / | tr '\n' ' ')"
    echo "build.sh: no module for Kubernetes '$requested' (POLICY_SCHEDULER_KUBE_VERSION); supported: $supported" >&2
    exit 1
fi
# The versions live in the go.mod files only; read them from there (the directory name must agree).
kube_version="$(required_version k8s.io/kubernetes "$module_dir/go.mod")"
etcd_version="$(required_version go.etcd.io/etcd/server/v3 "$here/etcd/go.mod")"
if [[ ! "$kube_version" =~ ^v([0-9]+)\.([0-9]+)\.[0-9]+$ || "$kube_version" != "$requested" ]]; then
    echo "build.sh: $module_dir/go.mod requires k8s.io/kubernetes '$kube_version', not '$requested'" >&2
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
# (after changing a version: `go mod tidy` in its directory and in etcd/, then commit go.mod and go.sum).
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
build_binary "$cache_dir" kube-apiserver "$module_dir" k8s.io/kubernetes/cmd/kube-apiserver "Kubernetes $kube_version" "$kube_ldflags"
build_binary "$cache_dir" kube-scheduler "$module_dir" k8s.io/kubernetes/cmd/kube-scheduler "Kubernetes $kube_version" "$kube_ldflags"
build_binary "$cache_dir" kube-controller-manager "$module_dir" k8s.io/kubernetes/cmd/kube-controller-manager "Kubernetes $kube_version" "$kube_ldflags"
echo "build.sh: control plane $kube_version (etcd $etcd_version) ready in $cache_dir"
