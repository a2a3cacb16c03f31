"""Who may call an endpoint, decided from a verified caller and the access configuration.

A ServiceAccount may call when its username (``system:serviceaccount:<ns>:<name>``) is one of
``allow.operators`` (the operator's own identity, for probes), or when its namespace is one of
``allow.namespaces`` (``*``: every namespace) and, if ``allow.serviceAccounts`` is set, its
``ns/name`` is listed there. An OIDC caller's token was issued for this resource by the issuer
the server trusts: that is its permission (which subjects get such tokens is the authorization
server's decision). Pure: no I/O.
"""

from __future__ import annotations

from mcp_operator.serve.auth.access import AccessConfig
from mcp_operator.serve.auth.caller import Caller


def permitted(caller: Caller, config: AccessConfig) -> bool:
    """Whether ``caller`` (verified) may call the endpoint ``config`` guards."""
    if caller.kind == "oidc":
        return config.oidc is not None and caller.issuer == config.oidc.issuer
    if caller.kind != "serviceaccount":
        return False
    if caller.subject in config.operators:
        return True
    namespaces = config.namespaces
    if caller.namespace not in namespaces and "*" not in namespaces:
        return False
    accounts = config.service_accounts
    return accounts is None or f"{caller.namespace}/{caller.service_account}" in accounts
