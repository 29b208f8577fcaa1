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
# shellcheck source=../build-common.sh
. "$here/../build-common.sh"
helm_version="$(required_version helm.sh/helm/v3 "$here/go.mod")"
kustomize_version="$(required_version sigs.k8s.io/kustomize/kustomize/v5 "$here/go.mod")"
for v in "$helm_version" "$kustomize_version"; do
    if [[ ! "$v" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
        echo "build.sh: cannot read the helm and kustomize versions from $here/go.mod (got '$helm_version', '$kustomize_version')" >&2
        exit 1
    fi
done

cache_dir="${XDG_CACHE_HOME:-$HOME/.cache}/policy-scheduler/helm/$helm_version-kustomize-$kustomize_version"
start_build "$cache_dir" "$@"

build_binary "$cache_dir" helm "$here" helm.sh/helm/v3/cmd/helm "$helm_version" \
    "-s -w -X helm.sh/helm/v3/internal/version.version=$helm_version -X helm.sh/helm/v3/internal/version.gitTreeState=clean" version
build_binary "$cache_dir" kustomize "$here" sigs.k8s.io/kustomize/kustomize/v5 "$kustomize_version" \
    "-s -w -X sigs.k8s.io/kustomize/api/provenance.version=kustomize/$kustomize_version" version
echo "build.sh: helm $helm_version and kustomize $kustomize_version ready in $cache_dir"
