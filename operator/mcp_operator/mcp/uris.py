"""Resource URIs namespaced per server, reversibly: the URIs agents see behind one endpoint.

Two servers behind one bridge may both offer ``file:///README.md`` or ``ui://widget/chart``;
the agent must be able to tell them apart and the bridge must know where a ``resources/read``
goes. This module owns the one rule, as pure functions (no I/O):

- :func:`exposed_uri` — the server's URI with its prefix and a ``.`` put where the URI's
  authority (or opaque part) begins, the scheme kept: ``ui://widget/chart`` of prefix ``apps``
  is ``ui://apps.widget/chart``, ``file:///etc/hosts`` is ``file://apps./etc/hosts``,
  ``urn:isbn:1`` is ``urn:apps.isbn:1``; text without a scheme gets ``apps.`` in front. The
  scheme stays, so a host still knows an MCP Apps ``ui://`` resource, and the prefix alphabet
  (``[a-z0-9_-]``, no ``.``) is unreserved in every URI component, so nothing is escaped;
- :func:`original_uri` — its inverse: the server's own URI, or ``None`` when the text is not
  a URI of that prefix (checked by mapping back: ``exposed_uri(p, original_uri(p, u)) == u``);
- the same two for URI templates (RFC 6570): a template is rewritten as text by the same
  rule, so a URI expanded from the exposed template is the exposed URI of the URI the server's
  template expands to.

The empty prefix (a server that opted out) leaves URIs as they are. Which server a URI belongs
to, and what to do with two servers that want one URI, is the caller's (the bridge's catalog).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
"""An RFC 3986 scheme and its colon, at the start of a URI."""


def _split(uri: str) -> tuple[str, str]:
    """``uri`` as the part before the namespace goes (scheme, ``:`` and ``//`` when present)
    and the rest."""
    match = _SCHEME.match(uri)
    if match is None:
        return "", uri
    head = match.group(0)
    if uri.startswith("//", len(head)):
        head += "//"
    return head, uri[len(head) :]


def exposed_uri(prefix: str, uri: str) -> str:
    """The URI agents see for the server of ``prefix``'s ``uri`` (a URI template alike)."""
    if not prefix:
        return uri
    head, rest = _split(uri)
    return f"{head}{prefix}.{rest}"


def original_uri(prefix: str, exposed: str) -> str | None:
    """The server's own URI behind ``exposed``, or ``None`` when ``exposed`` is no URI the
    server of ``prefix`` has (a URI template alike)."""
    if not prefix:
        return exposed
    marker = f"{prefix}."
    candidates = []
    head, rest = _split(exposed)
    if rest.startswith(marker):
        candidates.append(head + rest[len(marker) :])
    if exposed.startswith(marker):
        candidates.append(exposed[len(marker) :])
    for candidate in candidates:
        if exposed_uri(prefix, candidate) == exposed:
            return candidate
    return None


def with_exposed_ui(prefix: str, tool: Mapping[str, Any]) -> dict[str, Any]:
    """``tool`` (as listed) with the ``ui://`` resource its ``_meta`` names under the exposed
    URI, so that the agent's host reads the resource it lists; all else as sent."""
    meta = tool.get("_meta")
    if not prefix or not isinstance(meta, Mapping):
        return dict(tool)
    fresh = dict(meta)
    ui = meta.get("ui")
    if isinstance(ui, Mapping) and isinstance(ui.get("resourceUri"), str):
        fresh["ui"] = {**ui, "resourceUri": exposed_uri(prefix, ui["resourceUri"])}
    if isinstance(meta.get("ui/resourceUri"), str):
        fresh["ui/resourceUri"] = exposed_uri(prefix, meta["ui/resourceUri"])
    return {**tool, "_meta": fresh}
