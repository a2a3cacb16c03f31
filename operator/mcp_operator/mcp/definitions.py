"""The digest of a tool's definition: what the operator pins and the bridge checks.

A tool's definition is what a model reads and what an agent's arguments are checked
against: ``name``, ``title``, ``description``, ``inputSchema``, ``outputSchema`` and
``annotations``, as the server listed them (raw JSON, before anything is cut). Its digest is
the SHA-256 of their canonical JSON (keys sorted, no spaces, UTF-8, absent fields left out),
so the probe (on the raw page, before the page is cut for status) and the bridge (on the tool
as it listed it) compute the same value for the same definition. ``_meta``, icons and the
rest are not covered: they change without changing what the tool does or says. Recording
the digests is the operator's job; refusing a changed definition is the bridge's.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Final

DEFINITION_FIELDS: Final = (
    "name",
    "title",
    "description",
    "inputSchema",
    "outputSchema",
    "annotations",
)
"""The fields of a tool that its digest covers."""

DIGEST_META: Final = "dev.mcp-operator/definitionSha256"
"""The ``_meta`` key under which a cut ``tools/list`` page keeps each tool's digest of its
whole definition (:mod:`mcp_operator.mcp.pages`), for the discovery to read back."""

SHA256_PATTERN: Final = r"^[0-9a-f]{64}$"


def definition_digest(tool: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the canonical JSON of the tool's :data:`DEFINITION_FIELDS`."""
    covered = {key: tool[key] for key in DEFINITION_FIELDS if tool.get(key) is not None}
    canonical = json.dumps(
        covered, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr
    )
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()
