#!/usr/bin/env bash
# Build mcp-dataplane (operator/dataplane, the Rust data plane) in release mode into the
# cache's target directory, so that later builds are incremental and every clone of the
# repository on this machine shares them. Needs cargo (Rust stable); crates come from
# crates.io as Cargo.lock pins them.
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${MCP_OPERATOR_CACHE:-$HOME/.cache/mcp-operator}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$cache/dataplane-target}"
if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo is not on PATH: install Rust stable (rustup, or Debian's cargo), then run make dataplane" >&2
  exit 1
fi
cargo build --release --locked --manifest-path operator/dataplane/Cargo.toml
echo "mcp-dataplane: $CARGO_TARGET_DIR/release/mcp-dataplane"
