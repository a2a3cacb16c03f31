#!/usr/bin/env bash
# Builds kstatus-check (hack/kstatus/main.go): the real kstatus library
# (sigs.k8s.io/cli-utils/pkg/kstatus, what Flux uses for health) behind a small
# command, so that e2e tests ask the library itself whether our objects are
# healthy. Only the Go module proxy is used, like hack/build-control-plane.sh;
# the binary lands in $MCP_OPERATOR_CACHE/bin and the build is skipped when it
# is already there for this pin and this source.
set -euo pipefail
cd "$(dirname "$0")/.."

CLI_UTILS_VERSION="${CLI_UTILS_VERSION:-v0.37.2}"
CACHE="${MCP_OPERATOR_CACHE:-$HOME/.cache/mcp-operator}"
BIN="$CACHE/bin"
WORK="$CACHE/build/kstatus-$CLI_UTILS_VERSION"
SOURCE_SUM=$(sha256sum hack/kstatus/main.go | cut -c1-16)
STAMP="$BIN/.kstatus-$CLI_UTILS_VERSION-$SOURCE_SUM"

if [[ -f "$STAMP" && -x "$BIN/kstatus-check" ]]; then
  echo "kstatus-check (cli-utils $CLI_UTILS_VERSION) already built in $BIN"
  exit 0
fi
command -v go >/dev/null || { echo "go is not on PATH: install Go 1.22 or newer" >&2; exit 1; }

mkdir -p "$BIN"
rm -rf "$WORK" && mkdir -p "$WORK"
cp hack/kstatus/main.go "$WORK/"
cd "$WORK"
export GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0
go mod init mcp-operator.dev/build/kstatus >/dev/null 2>&1
go get "sigs.k8s.io/cli-utils@$CLI_UTILS_VERSION" >/dev/null 2>&1
go mod tidy
go build -ldflags="-s -w" -o "$BIN/kstatus-check" .
rm -f "$BIN"/.kstatus-*
touch "$STAMP"
echo "Built kstatus-check (cli-utils $CLI_UTILS_VERSION) into $BIN"
