"""A managed server's access ConfigMap: who may call it, the keys to check them, revoked Pods.

Pure: no I/O, no clock (the caller passes ``now``). The operator writes one ConfigMap per
managed server, ``<server>-access`` (owned by the MCPServer; written only when it is ours),
whose key ``access.json`` the adapter reads (mounted read-only at
``/etc/mcp-operator/access/``; the format is :mod:`mcp_operator.serve.auth.access`'s):

- ``audience``: :func:`~mcp_operator.api.access.token_audience` of the server;
- ``issuer`` and ``jwks``: the cluster's ServiceAccount issuer and its public keys, as the
  API server publishes them (:class:`~mcp_operator.kube.identity.IssuerKeys`);
- ``allow``: the server's namespace and ``spec.access.namespaces``, ``serviceAccounts``
  (``namespace/name``; ``null``: any of those namespaces), and ``operators``: the operator's
  own ServiceAccount (its probe);
- ``revokedPods``: uids of AgentRun Pods the operator saw deleted while their tokens may still
  be unexpired; each is kept until its tokens' lifetime (plus a skew) has passed.

**Where revocations live.** In the ConfigMap itself: the annotation
``mcp-operator.dev/revoked-pods`` maps each uid to the time it may be forgotten. Every
reconcile reads it back, adds what the operator has seen since, prunes what has expired and
writes both, so a restarted operator keeps revoking what it revoked before.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterable, Mapping
from typing import Any

from mcp_operator import GROUP
from mcp_operator.api import MCPServer
from mcp_operator.api.access import TOKEN_AUDIENCE_PREFIX, token_audience
from mcp_operator.controller.mcpserver.containers import ACCESS_KEY
from mcp_operator.controller.mcpserver.render import access_config_map_name, labels
from mcp_operator.controller.render import (
    METRICS_ACCESS_KEY,
    metrics_access_text,
    owner_reference,
)

REVOKED_ANNOTATION = f"{GROUP}/revoked-pods"
MAX_REVOKED = 2000
"""Revoked Pods kept per server (the annotation stays well under its 256 KiB bound); past
it the oldest are dropped first (and the drop is logged by the caller)."""
TOKEN_SKEW = datetime.timedelta(seconds=60)
"""Added to a token's lifetime: clocks differ, and a token issued just before the Pod's end
lives its full lifetime after it."""


def document(
    server: MCPServer,
    *,
    issuer: str | None,
    jwks: Mapping[str, Any] | None,
    operators: Iterable[str],
    revoked: Iterable[str],
) -> dict[str, Any]:
    """The JSON of ``access.json`` for ``server``."""
    namespace = server.metadata.namespace or ""
    access = server.spec.access
    listed = list(access.namespaces or ()) if access is not None else []
    namespaces = ["*"] if "*" in listed else sorted({namespace, *listed})
    oidc: dict[str, Any] | None = None
    if access is not None and access.authentication == "oidc" and access.oidc is not None:
        oidc = {
            "issuer": access.oidc.issuer,
            "audience": access.oidc.audience,
            "resource": access.oidc.audience,
            "authorizationServers": [access.oidc.issuer],
        }
        if access.oidc.jwks_url:
            oidc["jwksURL"] = access.oidc.jwks_url
    body: dict[str, Any] = {
        "audience": token_audience(namespace, server.metadata.name),
        "allow": {
            "namespaces": namespaces,
            "serviceAccounts": (
                access.service_account_names(namespace) if access is not None else None
            ),
            "operators": sorted(set(operators)),
        },
        "revokedPods": sorted(set(revoked)),
        "oidc": oidc,
    }
    if issuer is not None and jwks is not None:
        body["issuer"] = issuer
        body["jwks"] = dict(jwks)
    return body


def revocations(
    existing: Mapping[str, Any] | None,
    added: Mapping[str, datetime.datetime],
    now: datetime.datetime,
) -> dict[str, datetime.datetime]:
    """The revoked Pods of a server: those of the ``existing`` ConfigMap's annotation and
    the ``added`` ones (uid → when they may be forgotten), without the expired, at most
    :data:`MAX_REVOKED` (the latest to expire kept)."""
    annotations = ((existing or {}).get("metadata") or {}).get("annotations") or {}
    kept: dict[str, datetime.datetime] = {}
    try:
        stored = json.loads(annotations.get(REVOKED_ANNOTATION) or "{}")
    except ValueError:
        stored = {}
    for uid, until in (stored if isinstance(stored, dict) else {}).items():
        when = _time(until)
        if isinstance(uid, str) and when is not None:
            kept[uid] = when
    for uid, until in added.items():
        kept[uid] = max(until, kept.get(uid, until))
    alive = {uid: until for uid, until in kept.items() if until > now}
    latest = sorted(alive.items(), key=lambda item: (item[1], item[0]), reverse=True)
    return dict(sorted(latest[:MAX_REVOKED]))


def config_map(
    server: MCPServer,
    body: Mapping[str, Any],
    revoked: Mapping[str, datetime.datetime],
    *,
    metrics: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``<server>-access`` ConfigMap, owned by the server; ``metrics``: who may read the
    adapter's ``/metrics`` (key ``metrics.json``, :func:`~mcp_operator.controller.render.
    metrics_access`)."""
    data = {ACCESS_KEY: json.dumps(dict(body), indent=1, sort_keys=True) + "\n"}
    if metrics is not None:
        data[METRICS_ACCESS_KEY] = metrics_access_text(metrics)
    stamps = {uid: _text(until) for uid, until in sorted(revoked.items())}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": access_config_map_name(server),
            "namespace": server.metadata.namespace,
            "labels": labels(server),
            "annotations": {REVOKED_ANNOTATION: json.dumps(stamps, separators=(",", ":"))},
            "ownerReferences": [owner_reference(server)],
        },
        "data": data,
    }


def token_servers(pod: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(namespace, name)`` of every MCPServer whose audience a Pod's projected tokens name
    (the servers that must stop accepting them once the Pod is gone)."""
    found: set[tuple[str, str]] = set()
    for volume in ((pod.get("spec") or {}).get("volumes")) or ():
        for source in ((volume.get("projected") or {}).get("sources")) or ():
            audience = str((source.get("serviceAccountToken") or {}).get("audience") or "")
            if audience.startswith(TOKEN_AUDIENCE_PREFIX):
                namespace, _, name = audience[len(TOKEN_AUDIENCE_PREFIX) :].partition("/")
                if namespace and name and "/" not in name:
                    found.add((namespace, name))
    return sorted(found)


def token_lifetime(pod: Mapping[str, Any]) -> datetime.timedelta:
    """The longest lifetime of a Pod's projected server tokens, plus :data:`TOKEN_SKEW`."""
    seconds = 600
    for volume in ((pod.get("spec") or {}).get("volumes")) or ():
        for source in ((volume.get("projected") or {}).get("sources")) or ():
            token = source.get("serviceAccountToken") or {}
            if str(token.get("audience") or "").startswith(TOKEN_AUDIENCE_PREFIX):
                value = token.get("expirationSeconds")
                if isinstance(value, int) and not isinstance(value, bool):
                    seconds = max(seconds, value)
    return datetime.timedelta(seconds=seconds) + TOKEN_SKEW


def _time(text: Any) -> datetime.datetime | None:
    if not isinstance(text, str):
        return None
    try:
        when = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo is not None else None


def _text(when: datetime.datetime) -> str:
    return when.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
