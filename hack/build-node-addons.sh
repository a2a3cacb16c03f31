#!/usr/bin/env bash
# Builds the local node's add-ons from Go modules into $MCP_OPERATOR_CACHE/bin
# (default ~/.cache/mcp-operator/bin); skipped when already built:
#
# - coredns, from github.com/coredns/coredns: the local cluster's DNS, serving
#   the cluster domain from the API server (operator/mcp_operator/dev/node_addons.py);
# - kube-router, from github.com/cloudnativelabs/kube-router/v2, run with its
#   firewall only, as the local cluster's NetworkPolicy enforcer (iptables +
#   ipset; this kernel lacks nftables' `queue` statement, so nftables-based
#   enforcers such as kube-network-policies cannot work here).
#
# kube-router v2.1.0 is the only version of the v2 module the Go module proxy
# serves, and it has reported security flaws. It is acceptable ONLY as a part
# of the local test cluster, whose every listener is on loopback or the
# cluster's own bridge: never ship it, recommend it or run it anywhere else.
#
# No Docker, no download site: only the Go module proxy.
set -euo pipefail

COREDNS_VERSION="${COREDNS_VERSION:-v1.15.0}"
KUBE_ROUTER_VERSION="${KUBE_ROUTER_VERSION:-v2.1.0}"
CACHE="${MCP_OPERATOR_CACHE:-$HOME/.cache/mcp-operator}"
BIN="$CACHE/bin"
WORK="$CACHE/build"
STAMP="$BIN/.node-addons-coredns-$COREDNS_VERSION-kube-router-$KUBE_ROUTER_VERSION"

if [[ -f "$STAMP" && -x "$BIN/coredns" && -x "$BIN/kube-router" ]]; then
  echo "Node add-ons (coredns $COREDNS_VERSION, kube-router $KUBE_ROUTER_VERSION) already built in $BIN"
  exit 0
fi

mkdir -p "$BIN" "$WORK"
export GOFLAGS="-mod=mod -buildvcs=false"
export CGO_ENABLED=0
start=$(date +%s)

# A wrapper module that requires one module at one version, with that module's
# own `go` line, so its go.sum-pinned dependency versions are the ones built.
wrapper() { # name module version
  local dir="$WORK/$1-$3" gomod
  rm -rf "$dir" && mkdir -p "$dir" && cd "$dir"
  go mod init "mcp-operator.dev/build/$1" >/dev/null 2>&1
  go mod edit -require="$2@$3"
  gomod=$(go mod download -json "$2@$3" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  go mod edit -go="$(sed -n 's/^go \(.*\)$/\1/p' "$gomod")"
}

wrapper coredns github.com/coredns/coredns "$COREDNS_VERSION"
echo "Building coredns $COREDNS_VERSION"
go build -trimpath -ldflags "-s -w -X github.com/coredns/coredns/coremain.GitCommit=$COREDNS_VERSION" \
  -o "$BIN/coredns" github.com/coredns/coredns

wrapper kube-router github.com/cloudnativelabs/kube-router/v2 "$KUBE_ROUTER_VERSION"
echo "Building kube-router $KUBE_ROUTER_VERSION (local test cluster only: it has reported security flaws)"
go build -trimpath \
  -ldflags "-s -w -X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=$KUBE_ROUTER_VERSION -X github.com/cloudnativelabs/kube-router/v2/pkg/version.BuildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
  -o "$BIN/kube-router" github.com/cloudnativelabs/kube-router/v2/cmd/kube-router

"$BIN/coredns" -version | sed -n 1p  # not head: its early exit can SIGPIPE the writer (exit 141)
"$BIN/kube-router" --version 2>&1 | sed -n 1p
rm -f "$BIN"/.node-addons-*
touch "$STAMP"
echo "Node add-ons built in $(( $(date +%s) - start ))s into $BIN"
