#!/usr/bin/env bash
# Installs the npm MCP peers that tests and benchmarks use, pinned in
# hack/node-tools/package.json, into hack/node-tools/node_modules (git-ignored).
set -euo pipefail
cd "$(dirname "$0")/node-tools"
if [[ -f node_modules/.installed && node_modules/.installed -nt package.json ]]; then
  echo "Node tools already installed"; exit 0
fi
npm install --no-audit --no-fund --loglevel=error
touch node_modules/.installed
