"""docs/api-reference.md is what ``make api-reference`` generates from the CRDs."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_api_reference_is_generated_from_the_current_crds() -> None:
    spec = importlib.util.spec_from_file_location(
        "api_reference", ROOT / "hack" / "api_reference.py"
    )
    assert spec is not None and spec.loader is not None
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    committed = (ROOT / "docs" / "api-reference.md").read_text()
    assert committed == generator.render(), (
        "docs/api-reference.md is stale: run `make api-reference`"
    )
    for field in (
        "`spec.mode` (required)",
        "`spec.mcpServers[].name` (required)",
        "`status.conditions`",
    ):
        assert field in committed
