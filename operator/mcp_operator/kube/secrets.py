"""The Secrets the operator may read: opted in by their owner, each value checked.

This module owns the opt-in rule (the label ``mcp-operator.dev/for-mcp-servers=true``,
:func:`opted_in`) and what a value must be to be used (UTF-8 text, no line break, which a
header value cannot hold). Errors name the Secret and key, never a value. Pure: reading
the Secret is :class:`~mcp_operator.kube.client.KubeClient`'s.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from mcp_operator import OPT_IN_LABEL, OPT_IN_VALUE
from mcp_operator.kube.errors import SecretReferenceError


def opted_in(body: Mapping[str, Any] | None) -> bool:
    """Whether an object carries the opt-in label ``mcp-operator.dev/for-mcp-servers=true``."""
    labels = ((body or {}).get("metadata") or {}).get("labels") or {}
    return bool(labels.get(OPT_IN_LABEL) == OPT_IN_VALUE)


def not_opted_in(namespace: str, name: str) -> SecretReferenceError:
    return SecretReferenceError(
        "SecretNotOptedIn",
        f"Secret {namespace}/{name} is not labelled {OPT_IN_LABEL}={OPT_IN_VALUE}: the "
        "operator uses only Secrets whose owner opted them in for MCP servers",
    )


def secret_value(secret: Mapping[str, Any], namespace: str, name: str, key: str) -> str:
    """The value of ``key`` in ``secret`` (the Secret ``namespace/name`` as read), when the
    Secret is opted in and the value is usable; else a :class:`SecretReferenceError`."""
    if not opted_in(secret):
        raise not_opted_in(namespace, name)
    data = secret.get("data") or {}
    if key not in data:
        raise SecretReferenceError(
            "SecretKeyNotFound", f"Secret {namespace}/{name} has no key {key!r}"
        )
    try:
        value = base64.b64decode(data[key]).decode()
    except (ValueError, UnicodeDecodeError):
        raise SecretReferenceError(
            "SecretKeyInvalid", f"Secret {namespace}/{name} key {key!r} is not UTF-8 text"
        ) from None
    if "\n" in value or "\r" in value:
        # Common with `kubectl create secret --from-file`; HTTP would refuse the header.
        raise SecretReferenceError(
            "SecretKeyInvalid",
            f"Secret {namespace}/{name} key {key!r} contains a line break, which a header "
            "value cannot hold (a file with a trailing newline?)",
        )
    return value
