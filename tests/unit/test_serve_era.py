"""Which era an incoming request speaks, decided the way the SDK's session manager decides."""

from __future__ import annotations

from mcp_operator.serve import era


def test_only_non_handshake_versions_select_the_stateless_entry() -> None:
    assert era.is_modern("2026-07-28") and era.is_modern("garbage")
    assert not era.is_modern(None) and not era.is_modern("2025-06-18")
