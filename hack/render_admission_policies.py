"""Writes deploy/admission-policies.yaml: the chart's admission policies, rendered.

The chart's templates (charts/mcp-operator/templates/admission-*.yaml) are the source;
``helm template`` renders them with the chart's defaults for the release ``mcp-operator``
in ``mcp-operator-system`` (the names deploy/ uses), and the labels become deploy/'s own.
Run it through ``make admission-policies`` after editing a template;
tests/unit/test_admission_policies.py fails when the two differ.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from mcp_operator.dev.processes import BIN_DIR

REPO = Path(__file__).resolve().parents[1]
TARGET = REPO / "deploy" / "admission-policies.yaml"
TEMPLATES = (
    "templates/admission-tenants.yaml",
    "templates/admission-guard-rails.yaml",
    "templates/admission-bridge-keys.yaml",
)
LABELS = {
    "app.kubernetes.io/name": "mcp-operator",
    "app.kubernetes.io/part-of": "mcp-operator",
    "app.kubernetes.io/component": "operator",
}
HEADER = """\
# Rendered from charts/mcp-operator/templates/admission-*.yaml by
# hack/render_admission_policies.py (`make admission-policies`): edit the templates, not
# this file. The chart's defaults for release mcp-operator in mcp-operator-system; see
# docs/security.md, "Admission policies". Needs Kubernetes 1.30 or later: drop this file
# from an overlay to install without them. Cluster-scoped objects: the API server drops
# the namespace that kustomize sets on them.
"""


def main(helm: str) -> None:
    shown = [arg for template in TEMPLATES for arg in ("--show-only", template)]
    chart = str(REPO / "charts" / "mcp-operator")
    rendered = subprocess.run(
        [helm, "template", "mcp-operator", chart, "--namespace", "mcp-operator-system", *shown],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    documents = [doc for doc in yaml.safe_load_all(rendered) if doc]
    for doc in documents:
        doc["metadata"]["labels"] = dict(LABELS)
    body = yaml.safe_dump_all(documents, sort_keys=False, width=100)
    TARGET.write_text(HEADER + "---\n" + body)
    print(f"Wrote {TARGET.relative_to(REPO)} ({len(documents)} objects)")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else str(BIN_DIR / "helm"))
