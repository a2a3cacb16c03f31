#!/usr/bin/env bash
# Builds the test control plane from Go modules: kube-apiserver and
# kube-controller-manager from one pinned k8s.io/kubernetes release, etcd from
# go.etcd.io/etcd/server/v3. No Docker, no download site: only the Go module
# proxy. The binaries land in $MCP_OPERATOR_CACHE/bin (default
# ~/.cache/mcp-operator/bin); the build is skipped when they are already there.
#
# Which k8s.io/kubernetes release, and how it is built through a wrapper
# module: hack/kubernetes-module.sh (shared with hack/build-node.sh).
set -euo pipefail

ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
CACHE="${MCP_OPERATOR_CACHE:-$HOME/.cache/mcp-operator}"
# shellcheck source=hack/kubernetes-module.sh
source "$(dirname "$0")/kubernetes-module.sh"
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
echo "Building kube-apiserver and kube-controller-manager $KUBERNETES_VERSION"
build_kubernetes_commands "$BIN" kube-apiserver kube-controller-manager

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
"$BIN/etcd" --version | sed -n 1p  # sed reads to the end: no SIGPIPE under pipefail
touch "$STAMP"
echo "Control plane built in $(( $(date +%s) - start ))s into $BIN"
