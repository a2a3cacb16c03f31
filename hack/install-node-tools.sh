#!/usr/bin/env bash
# Installs the npm MCP peers that tests and benchmarks use into
# hack/node-tools/node_modules (git-ignored), exactly as hack/node-tools/package-lock.json
# pins them: `npm ci` installs the lockfile and never writes it, so an install leaves the
# tree clean (tests/unit/test_fresh_clone.py checks it). To change a pin: edit package.json,
# run `npm install --package-lock-only` in hack/node-tools, commit both files.
set -euo pipefail
cd "$(dirname "$0")/node-tools"
if [[ -f node_modules/.installed && node_modules/.installed -nt package.json \
      && node_modules/.installed -nt package-lock.json ]]; then
  echo "Node tools already installed"; exit 0
fi
npm ci --no-audit --no-fund --loglevel=error
touch node_modules/.installed
