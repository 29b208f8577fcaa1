# Sourced by the Go build scripts of tests/e2e (controlplane/, coscheduling/, helm/): what they share.

# required_version MODULE GO_MOD: the version GO_MOD requires MODULE at (block or one-line form)
required_version() {
    awk -v m="$1" '!/=>/ && !/^[[:space:]]*\/\// { for (i = 1; i < NF; i++) if ($i == m) { print $(i + 1); exit } }' "$2"
}

# start_build CACHE_DIR ARGS...: `--print-dir` prints CACHE_DIR and exits; otherwise checks for Go, takes the
# cache directory's lock (one build at a time; a second caller waits, then finds the binaries) and sets the Go
# flags: static binaries, and -mod=readonly (go.mod and go.sum are committed complete: a build never rewrites
# them; after changing a version, `go mod tidy` and commit both).
start_build() {
    local cache_dir="$1"
    shift
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
}

# build_binary CACHE_DIR NAME MODULE_DIR PACKAGE EXPECTED_VERSION_TEXT LDFLAGS [VERSION_ARG]: build PACKAGE into
# CACHE_DIR/NAME unless it is there, under a temporary name, checked with `NAME VERSION_ARG` (default --version)
# printing EXPECTED_VERSION_TEXT, then renamed: an interrupted build never leaves a half-written binary behind.
build_binary() {
    local cache_dir="$1" name="$2" module_dir="$3" package="$4" expect="$5" ldflags="$6" version_arg="${7:---version}"
    local dest="$cache_dir/$name"
    if [[ -x "$dest" ]]; then
        echo "build.sh: $name: already built ($dest)"
        return
    fi
    local tmp="$dest.tmp.$$"
    trap 'rm -f "'"$tmp"'"' EXIT
    echo "build.sh: $name: building $package into $dest (this takes minutes the first time)"
    local start=$SECONDS
    (cd "$module_dir" && nice -n 10 go build -trimpath -ldflags "$ldflags" -o "$tmp" "$package")
    local got
    got="$("$tmp" "$version_arg" 2>&1 | head -n 3)"
    if [[ "$got" != *"$expect"* ]]; then
        echo "build.sh: $name: '$tmp $version_arg' printed '$got', expected it to contain '$expect'" >&2
        exit 1
    fi
    mv -f "$tmp" "$dest"
    trap - EXIT
    echo "build.sh: $name: built in $((SECONDS - start)) s ($(head -n 1 <<<"$got"))"
}
