#!/usr/bin/env bash
# Builds kube-scheduler with the scheduler-plugins (sigs.k8s.io/scheduler-plugins cmd/scheduler, which
# registers Coscheduling and CapacityScheduling) for the side-by-side benchmark (bench/compare.py), and copies
# the PodGroup and ElasticQuota CRDs that this release serves from the module's config/crd/bases/.
#
# Cached outside the repository, keyed by the scheduler-plugins version, so only a machine's first build
# pays (about 4 minutes on 2 cores, module downloads aside):
#   ${XDG_CACHE_HOME:-~/.cache}/policy-scheduler/scheduler-plugins/<version>/{kube-scheduler,podgroups-crd.yaml,
#   elasticquotas-crd.yaml}
#
# Usage:  build.sh               build whatever is missing (idempotent)
#         build.sh --print-dir   print the cache directory and exit
#
# Built under a temporary name, checked with --version, then renamed: an interrupted build never leaves a
# half-written binary. A lock serialises concurrent runs.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../build-common.sh
. "$here/../build-common.sh"
module="sigs.k8s.io/scheduler-plugins"

# The versions live in go.mod only: scheduler-plugins' (the cache key) and the k8s.io/kubernetes release
# it is built with (what --version reports: component-base derives the emulation version from it, and a
# v0.x version there makes the scheduler refuse to start).
version="$(required_version "$module" "$here/go.mod")"
if [[ ! "$version" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
    echo "build.sh: cannot read the $module version from $here/go.mod (got '$version')" >&2
    exit 1
fi
kube_version="$(awk '$1 == "replace" && $2 == "k8s.io/kubernetes" { print $5; exit }' "$here/go.mod")"
if [[ ! "$kube_version" =~ ^v([0-9]+)\.([0-9]+)\.[0-9]+$ ]]; then
    echo "build.sh: cannot read the k8s.io/kubernetes replace version from $here/go.mod (got '$kube_version')" >&2
    exit 1
fi
kube_major="${BASH_REMATCH[1]}"
kube_minor="${BASH_REMATCH[2]}"

cache_dir="${XDG_CACHE_HOME:-$HOME/.cache}/policy-scheduler/scheduler-plugins/$version"
start_build "$cache_dir" "$@"

version_pkg="k8s.io/component-base/version"
ldflags="-s -w -X $version_pkg.gitVersion=$kube_version -X $version_pkg.gitMajor=$kube_major"
ldflags+=" -X $version_pkg.gitMinor=$kube_minor -X $version_pkg.gitTreeState=clean"
build_binary "$cache_dir" kube-scheduler "$here" "$module/cmd/scheduler" "$kube_version" "$ldflags"

# copy_crd FILE NAME: the release's config/crd/bases/scheduling.x-k8s.io_NAME.yaml as CACHE_DIR/FILE, unless there
copy_crd() {
    local dest="$cache_dir/$1" src
    if [[ ! -s "$dest" ]]; then
        src="$(cd "$here" && go list -m -f '{{.Dir}}' "$module")/config/crd/bases/scheduling.x-k8s.io_$2.yaml"
        cp "$src" "$dest.tmp.$$"
        chmod 644 "$dest.tmp.$$"
        mv -f "$dest.tmp.$$" "$dest"
    fi
}
copy_crd podgroups-crd.yaml podgroups
copy_crd elasticquotas-crd.yaml elasticquotas
echo "build.sh: scheduler-plugins $version ready in $cache_dir"
