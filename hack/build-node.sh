#!/usr/bin/env bash
# Builds the local cluster's node from Go modules (no Docker, no download
# site: only the Go module proxy), each part cached by a stamp naming its
# version, into $MCP_OPERATOR_CACHE (default ~/.cache/mcp-operator):
#
# - kubelet, kube-proxy, kube-scheduler into bin/, from the same
#   k8s.io/kubernetes release and wrapper module as the API server
#   (hack/kubernetes-module.sh);
# - containerd 2.x (containerd, containerd-shim-runc-v2, ctr) into bin/, from
#   github.com/containerd/containerd/v2. Not Debian's containerd: bookworm has
#   1.6, and Kubernetes 1.35 was the last release to support containerd 1.x;
# - the CNI reference plugins (bridge, host-local, loopback, portmap) into
#   cni/bin/, from github.com/containernetworking/plugins. Not Debian's
#   containernetworking-plugins: bookworm has 1.1.1 (2022), and the module
#   pins the version here as every other part of the cluster is pinned;
# - mcp-node-pause into bin/, from hack/node-pause: the Pod sandbox program
#   (the node pushes it as an image into its own registry).
#
# runc, nft, iptables and the other host tools are Debian packages:
# hack/install-node-packages.sh.
set -euo pipefail

CONTAINERD_VERSION="${CONTAINERD_VERSION:-v2.4.2}"
CNI_PLUGINS_VERSION="${CNI_PLUGINS_VERSION:-v1.10.0}"
HACK="$(cd "$(dirname "$0")" && pwd)"
CACHE="${MCP_OPERATOR_CACHE:-$HOME/.cache/mcp-operator}"
# shellcheck source=hack/kubernetes-module.sh
source "$HACK/kubernetes-module.sh"
BIN="$CACHE/bin"
CNI_BIN="$CACHE/cni/bin"
WORK="$CACHE/build"
export GOFLAGS="-mod=mod -buildvcs=false"
export CGO_ENABLED=0
mkdir -p "$BIN" "$CNI_BIN" "$WORK"
start=$(date +%s)

# A module wrapper in $WORK/$1 requiring $2@$3, at the go version that module asks for.
wrapper() {
  local dir="$WORK/$1" module="$2" version="$3" gomod
  rm -rf "$dir" && mkdir -p "$dir" && cd "$dir"
  go mod init "mcp-operator.dev/build/$1" >/dev/null 2>&1
  go mod edit -require="$module@$version"
  gomod=$(go mod download -json "$module@$version" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  go mod edit -go="$(sed -n 's/^go \(.*\)$/\1/p' "$gomod")"
}

# --- kubelet, kube-proxy, kube-scheduler -------------------------------------
stamp="$BIN/.node-kubernetes-$KUBERNETES_VERSION"
if [[ -f "$stamp" && -x "$BIN/kubelet" && -x "$BIN/kube-proxy" && -x "$BIN/kube-scheduler" ]]; then
  echo "kubelet, kube-proxy, kube-scheduler $KUBERNETES_VERSION already built in $BIN"
else
  build_kubernetes_commands "$BIN" kubelet kube-proxy kube-scheduler
  rm -f "$BIN"/.node-kubernetes-*; touch "$stamp"
fi

# --- containerd ----------------------------------------------------------------
stamp="$BIN/.node-containerd-$CONTAINERD_VERSION"
if [[ -f "$stamp" && -x "$BIN/containerd" && -x "$BIN/containerd-shim-runc-v2" && -x "$BIN/ctr" ]]; then
  echo "containerd $CONTAINERD_VERSION already built in $BIN"
else
  wrapper "containerd-$CONTAINERD_VERSION" github.com/containerd/containerd/v2 "$CONTAINERD_VERSION"
  # CGO off: no btrfs, devmapper or zfs snapshotters (the node uses overlayfs).
  ldflags="-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION"
  ldflags+=" -X github.com/containerd/containerd/v2/version.Package=github.com/containerd/containerd/v2"
  for command in containerd containerd-shim-runc-v2 ctr; do
    started=$(date +%s)
    go build -trimpath -tags no_btrfs,no_devmapper,no_zfs -ldflags "$ldflags" \
      -o "$BIN/$command" "github.com/containerd/containerd/v2/cmd/$command"
    echo "Built $command $CONTAINERD_VERSION in $(( $(date +%s) - started ))s"
  done
  rm -f "$BIN"/.node-containerd-*; touch "$stamp"
fi

# --- CNI reference plugins -------------------------------------------------------
stamp="$CNI_BIN/.cni-plugins-$CNI_PLUGINS_VERSION"
if [[ -f "$stamp" && -x "$CNI_BIN/bridge" && -x "$CNI_BIN/host-local" && -x "$CNI_BIN/loopback" && -x "$CNI_BIN/portmap" ]]; then
  echo "CNI plugins $CNI_PLUGINS_VERSION already built in $CNI_BIN"
else
  wrapper "cni-plugins-$CNI_PLUGINS_VERSION" github.com/containernetworking/plugins "$CNI_PLUGINS_VERSION"
  started=$(date +%s)
  ldflags="-s -w -X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=$CNI_PLUGINS_VERSION"
  for plugin in main/bridge ipam/host-local main/loopback meta/portmap; do
    go build -trimpath -ldflags "$ldflags" -o "$CNI_BIN/${plugin#*/}" \
      "github.com/containernetworking/plugins/plugins/$plugin"
  done
  echo "Built CNI plugins $CNI_PLUGINS_VERSION in $(( $(date +%s) - started ))s"
  rm -f "$CNI_BIN"/.cni-plugins-*; touch "$stamp"
fi

# --- the Pod sandbox program -------------------------------------------------------
pause_sum=$(sha256sum "$HACK/node-pause/main.go" | cut -c1-16)
stamp="$BIN/.node-pause-$pause_sum"
if [[ -f "$stamp" && -x "$BIN/mcp-node-pause" ]]; then
  echo "mcp-node-pause $pause_sum already built in $BIN"
else
  (cd "$HACK/node-pause" && go build -trimpath -ldflags "-s -w" -o "$BIN/mcp-node-pause" main.go)
  echo "Built mcp-node-pause $pause_sum"
  rm -f "$BIN"/.node-pause-*; touch "$stamp"
fi

echo "Node binaries ready in $(( $(date +%s) - start ))s: $BIN, $CNI_BIN"
