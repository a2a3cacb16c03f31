"""The label opt-ins, for every kind: Secrets and ServiceAccounts used only when labelled.

An MCPServer's or an AgentRun's Pods run an image of the author's choosing. Without the
label ``mcp-operator.dev/for-mcp-servers=true`` on a Secret (mounted or put into the
environment) or on a named ServiceAccount, the right to create one of those objects would
be the right to read any Secret of the namespace, or to act as any identity in it. Both
controllers ask here before anything is applied; errors name the object, never a value
(only metadata is read into messages).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp_operator import OPT_IN_LABEL, OPT_IN_VALUE
from mcp_operator.kube import SECRETS, SERVICEACCOUNTS, Kube, SecretReferenceError, opted_in
from mcp_operator.kube.secrets import not_opted_in


async def require_secret(
    kube: Kube, namespace: str, name: str, *, reader: str
) -> Mapping[str, Any]:
    """The Secret, which exists and is opted in; ``reader`` says who would read it.

    Raises:
        SecretReferenceError: ``SecretNotFound`` or ``SecretNotOptedIn``.
    """
    secret: Mapping[str, Any] | None = await kube.get(SECRETS, namespace, name)
    if secret is None:
        raise SecretReferenceError(
            "SecretNotFound", f"Secret {namespace}/{name} (read by {reader}) was not found"
        )
    if not opted_in(secret):
        raise not_opted_in(namespace, name)
    return secret


async def require_service_account(kube: Kube, namespace: str, name: str, *, runs: str) -> None:
    """A named ServiceAccount must exist and be opted in; ``runs`` says what would run as it.

    Raises:
        SecretReferenceError: ``ServiceAccountNotFound`` or ``ServiceAccountNotOptedIn``.
    """
    account = await kube.get(SERVICEACCOUNTS, namespace, name)
    if account is None:
        raise SecretReferenceError(
            "ServiceAccountNotFound", f"ServiceAccount {namespace}/{name} was not found"
        )
    if not opted_in(account):
        raise SecretReferenceError(
            "ServiceAccountNotOptedIn",
            f"ServiceAccount {namespace}/{name} is not labelled {OPT_IN_LABEL}={OPT_IN_VALUE}: "
            f"{runs} run only as identities opted in for them",
        )
