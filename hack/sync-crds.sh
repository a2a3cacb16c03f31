#!/usr/bin/env bash
# Copies the CustomResourceDefinitions from crds/ (the one source of truth) into
# deploy/crds/ (kustomize), charts/mcp-operator/crds/ (Helm's CRD directory) and
# operator/mcp_operator/dev/crds/ (package data: `mcp-operator dev demo` installs
# them from an installed package, where crds/ does not exist).
# Each copy starts with a header that names its source; the rest is byte for byte
# the source file. tests/unit/test_install_manifests.py fails when a copy drifts.
# Run it through `make crds` after editing anything under crds/.
set -euo pipefail
cd "$(dirname "$0")/.."

targets=(deploy/crds charts/mcp-operator/crds operator/mcp_operator/dev/crds)
for target in "${targets[@]}"; do
  mkdir -p "$target"
  # A CRD removed from crds/ must disappear from the copies too.
  find "$target" -maxdepth 1 -name '*.yaml' -delete
  for source in crds/*.yaml; do
    {
      printf '# Copied from %s by hack/sync-crds.sh (`make crds`): edit the source, not this copy.\n' "$source"
      cat "$source"
    } >"$target/$(basename "$source")"
  done
  echo "Synced $(ls crds/*.yaml | wc -l) CRDs into $target"
done
