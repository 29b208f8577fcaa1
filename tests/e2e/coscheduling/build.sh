#!/usr/bin/env bash
# Builds kube-scheduler with the scheduler-plugins (sigs.k8s.io/scheduler-plugins cmd/scheduler, which
# registers Coscheduling) for the side-by-side benchmark (bench/compare.py), and copies the PodGroup CRD
# that this release serves from the module's config/crd/bases/.
#
# Cached outside the repository, keyed by the scheduler-plugins version, so only a machine's first build
# pays (about 4 minutes on 2 cores, module downloads aside):
#   ${XDG_CACHE_HOME:-~/.cache}/policy-scheduler/scheduler-plugins/<version>/{kube-scheduler,podgroups-crd.yaml}
#
# Usage:  build.sh               build whatever is missing (idempotent)
#         build.sh --print-dir   print the cache directory and exit
#
# Built under a temporary name, checked with --version, then renamed: an interrupted build never leaves a
# half-written binary. A lock serialises concurrent runs.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
module="sigs.k8s.io/scheduler-plugins"

# The versions live in go.mod only: scheduler-plugins' (the cache key) and the k8s.io/kubernetes release
# it is built with (what --version reports: component-base derives the emulation version from it, and a
# v0.x version there makes the scheduler refuse to start).
version="$(awk -v m="$module" '!/=>/ && !/^[[:space:]]*\/\// { for (i = 1; i < NF; i++) if ($i == m) { print $(i + 1); exit } }' "$here/go.mod")"
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

dest="$cache_dir/kube-scheduler"
crd="$cache_dir/podgroups-crd.yaml"
tmp=""
cleanup() { if [[ -n "$tmp" ]]; then rm -f "$tmp"; fi; }
trap cleanup EXIT

if [[ -x "$dest" ]]; then
    echo "build.sh: kube-scheduler (scheduler-plugins $version, Kubernetes $kube_version): already built ($dest)"
else
    tmp="$dest.tmp.$$"
    echo "build.sh: building $module/cmd/scheduler $version into $dest (minutes the first time)"
    start=$SECONDS
    version_pkg="k8s.io/component-base/version"
    ldflags="-s -w -X $version_pkg.gitVersion=$kube_version -X $version_pkg.gitMajor=$kube_major"
    ldflags+=" -X $version_pkg.gitMinor=$kube_minor -X $version_pkg.gitTreeState=clean"
    (cd "$here" && nice -n 10 go build -trimpath -ldflags "$ldflags" -o "$tmp" "$module/cmd/scheduler")
    got="$("$tmp" --version 2>&1 | head -n 1)"
    if [[ "$got" != *"$kube_version"* ]]; then
        echo "build.sh: '$tmp --version' printed '$got', expected it to contain '$kube_version'" >&2
        exit 1
    fi
    mv -f "$tmp" "$dest"
    tmp=""
    echo "build.sh: built in $((SECONDS - start)) s ($got)"
fi

if [[ ! -s "$crd" ]]; then
    src="$(cd "$here" && go list -m -f '{{.Dir}}' "$module")/config/crd/bases/scheduling.x-k8s.io_podgroups.yaml"
    cp "$src" "$crd.tmp.$$"
    chmod 644 "$crd.tmp.$$"
    mv -f "$crd.tmp.$$" "$crd"
fi
echo "build.sh: scheduler-plugins $version ready in $cache_dir"
