#!/usr/bin/env bash
# Builds what managed mode's image handling needs, from Go modules and this
# repository only (no Docker, no download site), into $MCP_OPERATOR_CACHE/bin
# (default ~/.cache/mcp-operator/bin); skipped when already built:
#
# - mcp-stdio-exec: our own static helper (operator/stdio-exec), which the
#   operator's image carries and the server container runs through
#   (docs/managed-mode.md); the tests' kubelet stand-in runs this very binary;
# - crane, from github.com/google/go-containerregistry: `crane registry serve`
#   is the tests' local OCI registry, and `crane` pushes test images to it;
# - mcp-hello-server: the official Go MCP SDK's stdio example, a static binary,
#   which the tests put into an image that has no shell.
set -euo pipefail

CRANE_VERSION="${CRANE_VERSION:-v0.22.1}"
GO_SDK_VERSION="${GO_SDK_VERSION:-v1.8.0}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CACHE="${MCP_OPERATOR_CACHE:-$HOME/.cache/mcp-operator}"
BIN="$CACHE/bin"
WORK="$CACHE/build"
helper_sum=$(cat "$ROOT"/operator/stdio-exec/go.mod "$ROOT"/operator/stdio-exec/*.go | sha256sum | cut -c1-16)
STAMP="$BIN/.image-tools-crane-$CRANE_VERSION-sdk-$GO_SDK_VERSION-exec-$helper_sum"

if [[ -f "$STAMP" && -x "$BIN/crane" && -x "$BIN/mcp-stdio-exec" && -x "$BIN/mcp-hello-server" ]]; then
  echo "Image tools (crane $CRANE_VERSION, mcp-stdio-exec $helper_sum) already built in $BIN"
  exit 0
fi

mkdir -p "$BIN" "$WORK"
export GOFLAGS="-mod=mod -buildvcs=false"
export CGO_ENABLED=0
start=$(date +%s)

echo "Building mcp-stdio-exec from operator/stdio-exec"
(cd "$ROOT/operator/stdio-exec" && go build -trimpath -ldflags "-s -w" -o "$BIN/mcp-stdio-exec" .)

cdir="$WORK/crane-$CRANE_VERSION"
rm -rf "$cdir" && mkdir -p "$cdir" && cd "$cdir"
go mod init mcp-operator.dev/build/crane >/dev/null 2>&1
go mod edit -require="github.com/google/go-containerregistry@$CRANE_VERSION"
cmod=$(go mod download -json "github.com/google/go-containerregistry@$CRANE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
go mod edit -go="$(sed -n 's/^go \(.*\)$/\1/p' "$cmod")"
echo "Building crane $CRANE_VERSION"
go build -trimpath -ldflags "-s -w" -o "$BIN/crane" github.com/google/go-containerregistry/cmd/crane

sdir="$WORK/go-sdk-$GO_SDK_VERSION"
rm -rf "$sdir" && mkdir -p "$sdir" && cd "$sdir"
go mod init mcp-operator.dev/build/go-sdk >/dev/null 2>&1
go mod edit -require="github.com/modelcontextprotocol/go-sdk@$GO_SDK_VERSION"
smod=$(go mod download -json "github.com/modelcontextprotocol/go-sdk@$GO_SDK_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
go mod edit -go="$(sed -n 's/^go \(.*\)$/\1/p' "$smod")"
echo "Building the Go MCP SDK's hello server $GO_SDK_VERSION"
go build -trimpath -ldflags "-s -w" -o "$BIN/mcp-hello-server" github.com/modelcontextprotocol/go-sdk/examples/server/hello

"$BIN/crane" version
rm -f "$BIN"/.image-tools-*
touch "$STAMP"
echo "Image tools built in $(( $(date +%s) - start ))s into $BIN"
