#!/usr/bin/env bash
# Builds the e2e control plane from the pinned Go modules beside this script:
# kube-apiserver, kube-controller-manager, kube-scheduler and kubectl (k8s/), etcd (etcd/),
# kwok (kwok/) and the LeaderWorkerSet controller (lws/). Binaries go to a cache OUTSIDE
# the work tree, one directory per set of pinned versions; a warm call only checks the
# stamp and returns in well under a second.
#
#   hack/controlplane/build.sh          # build when missing, print the bin directory
#   hack/controlplane/build.sh --print  # print the bin directory, build nothing (exit 1 if absent)
#
# INFERFLEET_CONTROLPLANE_CACHE moves the cache (default ~/.cache/inferfleet/controlplane).
# A cold build on 2 cores takes ~30-40 minutes (measured figure in docs/contributing/testing.md).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

mod_version() { # module path, go.mod -> the version it requires
    awk -v m="$1" '$1 == m {print $2; exit} $1 == "require" && $2 == m {print $3; exit}' "$2"
}
k8s_version="$(mod_version k8s.io/kubernetes "$here/k8s/go.mod")"
etcd_version="$(mod_version go.etcd.io/etcd/server/v3 "$here/etcd/go.mod")"
kwok_version="$(mod_version sigs.k8s.io/kwok "$here/kwok/go.mod")"
lws_version="$(mod_version sigs.k8s.io/lws "$here/lws/go.mod")"
# The stamp covers the pins (go.mod + go.sum), this script and the Go release, so any
# change to what would be built invalidates the cache entry.
stamp="$(cat "$here"/{k8s,etcd,kwok,lws}/go.{mod,sum} "$here/build.sh" | sha256sum | cut -c1-16) $(go env GOVERSION 2>/dev/null || echo no-go)"
cache_root="${INFERFLEET_CONTROLPLANE_CACHE:-$HOME/.cache/inferfleet/controlplane}"
dest="$cache_root/k8s-$k8s_version-etcd-$etcd_version-kwok-$kwok_version-lws-$lws_version"
bins=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok lws)

is_built() {
    [[ -f "$dest/stamp" && "$(cat "$dest/stamp")" == "$stamp" ]] || return 1
    local b
    for b in "${bins[@]}"; do [[ -x "$dest/bin/$b" ]] || return 1; done
}

if [[ "${1:-}" == "--print" ]]; then
    is_built && { echo "$dest/bin"; exit 0; }
    exit 1
fi
if is_built; then echo "$dest/bin"; exit 0; fi

command -v go >/dev/null || { echo "build.sh: no Go toolchain on PATH (need Go >= 1.24)" >&2; exit 2; }
mkdir -p "$cache_root"
exec 9>"$cache_root/.build.lock"
flock 9 # one build at a time per machine; a second caller waits, then finds it built
if is_built; then echo "$dest/bin"; exit 0; fi

staging="$(mktemp -d "$cache_root/.staging.XXXXXX")"
trap 'rm -rf "$staging"' EXIT
mkdir -p "$staging/bin"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-trimpath -mod=readonly -buildvcs=false"
started_s=$SECONDS

minor="$(cut -d. -f2 <<<"$k8s_version")"
cb=k8s.io/component-base/version
cg=k8s.io/client-go/pkg/version
# /version must report the real release: kubectl's skew check and clients read it.
ldflags="-s -w -X $cb.gitVersion=$k8s_version -X $cb.gitMajor=1 -X $cb.gitMinor=$minor \
 -X $cb.gitTreeState=clean -X $cg.gitVersion=$k8s_version -X $cg.gitMajor=1 -X $cg.gitMinor=$minor"
echo "build.sh: kubernetes $k8s_version (kube-apiserver, kube-controller-manager, kube-scheduler, kubectl)" >&2
(cd "$here/k8s" && go build -tags=selinux,notest,grpcnotrace -ldflags "$ldflags" -o "$staging/bin/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl)
echo "build.sh: etcd $etcd_version" >&2
(cd "$here/etcd" && go build -ldflags "-s -w" -o "$staging/bin/etcd" go.etcd.io/etcd/server/v3)
echo "build.sh: kwok $kwok_version" >&2
(cd "$here/kwok" && go build -ldflags "-s -w" \
    -o "$staging/bin/kwok" sigs.k8s.io/kwok/cmd/kwok)
echo "build.sh: lws $lws_version" >&2
(cd "$here/lws" && go build -ldflags "-s -w" -o "$staging/bin/lws" sigs.k8s.io/lws/cmd)

"$staging/bin/kube-apiserver" --version >&2
echo "$stamp" >"$staging/stamp"
echo "$((SECONDS - started_s))" >"$staging/build_seconds"
rm -rf "$dest"
mv "$staging" "$dest"
trap - EXIT
echo "build.sh: built in $((SECONDS - started_s)) s -> $dest/bin" >&2
echo "$dest/bin"
