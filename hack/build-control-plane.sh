#!/usr/bin/env bash
# Builds the test control plane from Go modules: kube-apiserver and
# kube-controller-manager from one pinned k8s.io/kubernetes release, etcd from
# go.etcd.io/etcd/server/v3. No Docker, no download site: only the Go module
# proxy. The binaries land in $MCP_OPERATOR_CACHE/bin (default
# ~/.cache/mcp-operator/bin); the build is skipped when they are already there.
#
# Why wrapper modules: k8s.io/kubernetes replaces every k8s.io/<staging> module
# by a path inside its own repository (./staging/src/...), which a consumer of
# the module cannot see. A wrapper go.mod requires k8s.io/kubernetes and
# replaces each staging module by its published v0.<minor>.<patch>; the list of
# staging modules is read from that release's own go.mod, so a version bump
# needs no edit here beyond the pins below.
set -euo pipefail

KUBERNETES_VERSION="${KUBERNETES_VERSION:-v1.36.3}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
CACHE="${MCP_OPERATOR_CACHE:-$HOME/.cache/mcp-operator}"
BIN="$CACHE/bin"
WORK="$CACHE/build"
STAMP="$BIN/.control-plane-$KUBERNETES_VERSION-etcd-$ETCD_VERSION"

if [[ -f "$STAMP" && -x "$BIN/kube-apiserver" && -x "$BIN/kube-controller-manager" && -x "$BIN/etcd" ]]; then
  echo "Control plane $KUBERNETES_VERSION (etcd $ETCD_VERSION) already built in $BIN"
  exit 0
fi

mkdir -p "$BIN" "$WORK"
export GOFLAGS="-mod=mod -buildvcs=false"
export CGO_ENABLED=0
start=$(date +%s)

# --- kube-apiserver and kube-controller-manager ------------------------------
kdir="$WORK/kubernetes-$KUBERNETES_VERSION"
rm -rf "$kdir" && mkdir -p "$kdir" && cd "$kdir"
go mod init mcp-operator.dev/build/kubernetes >/dev/null 2>&1
kmod=$(go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
staging_version="v0.${KUBERNETES_VERSION#v1.}"
go_line=$(sed -n 's/^go \(.*\)$/\1/p' "$kmod")
go mod edit -go="$go_line" -require="k8s.io/kubernetes@$KUBERNETES_VERSION"
for module in $(sed -n 's#^[[:space:]]*\(k8s.io/[^[:space:]]*\) => ./staging/.*#\1#p' "$kmod"); do
  go mod edit -replace="$module=$module@$staging_version"
done
# Carry over the release's own non-staging replaces and pins so the build sees
# the exact dependency versions the release was tested with.
go mod edit -require="k8s.io/kubernetes@$KUBERNETES_VERSION"
cat > tools.go <<'GO'
//go:build tools

package tools
GO

pkg="k8s.io/component-base/version"
git_commit=$(go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | sed -n 's/.*"Hash": "\(.*\)".*/\1/p' | head -1)
build_date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
ldflags="-s -w"
for p in "$pkg" "k8s.io/client-go/pkg/version"; do
  ldflags+=" -X $p.gitVersion=$KUBERNETES_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$(echo "$KUBERNETES_VERSION" | cut -d. -f2)"
  ldflags+=" -X $p.gitTreeState=clean -X $p.buildDate=$build_date -X $p.gitCommit=${git_commit:-unknown}"
done
echo "Building kube-apiserver and kube-controller-manager $KUBERNETES_VERSION (staging $staging_version)"
go build -trimpath -ldflags "$ldflags" -o "$BIN/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
go build -trimpath -ldflags "$ldflags" -o "$BIN/kube-controller-manager" k8s.io/kubernetes/cmd/kube-controller-manager

# --- etcd ---------------------------------------------------------------------
edir="$WORK/etcd-$ETCD_VERSION"
rm -rf "$edir" && mkdir -p "$edir" && cd "$edir"
go mod init mcp-operator.dev/build/etcd >/dev/null 2>&1
go mod edit -require="go.etcd.io/etcd/server/v3@$ETCD_VERSION"
emod=$(go mod download -json "go.etcd.io/etcd/server/v3@$ETCD_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
go mod edit -go="$(sed -n 's/^go \(.*\)$/\1/p' "$emod")"
echo "Building etcd $ETCD_VERSION"
go build -trimpath -ldflags "-s -w" -o "$BIN/etcd" go.etcd.io/etcd/server/v3

"$BIN/kube-apiserver" --version
"$BIN/etcd" --version | head -1
touch "$STAMP"
echo "Control plane built in $(( $(date +%s) - start ))s into $BIN"
