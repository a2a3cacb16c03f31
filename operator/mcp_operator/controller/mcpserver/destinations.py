"""Which egress policy a server's probe gets: pure, from the settings and its Namespace's labels.

External servers get what the operator's :class:`EgressSettings` and the
Namespace's opt-in labels allow together: private ranges or loopback only when
the setting is ``allowed``, or ``labelled`` and the Namespace carries the label
(a tenant who may create MCPServers cannot usually label its Namespace). The API
server's addresses stay refused. A managed server's probe goes to the Service
the operator itself rendered (a private ClusterIP), or through the API server's
service proxy from outside a cluster, so it gets private ranges (and, for the
proxy, the API server) without any opt-in. The registry reader (:func:`registry_policy`)
goes where a tenant's image names, like an external probe, but it is one reader with one
cache for every Namespace: only an operator-wide ``allowed`` opens private or loopback
registries to it (the registries the operator's own flags name are opened by
:mod:`mcp_operator.oci.wire`). Reading the Namespace is the reconciler's; the rules of
addresses are :mod:`mcp_operator.net.egress`'s.
"""

from __future__ import annotations

from collections.abc import Mapping

from mcp_operator.controller.settings import (
    LOOPBACK_DESTINATIONS_LABEL,
    PRIVATE_DESTINATIONS_LABEL,
    EgressSettings,
    Permission,
)
from mcp_operator.net.egress import EgressPolicy

OPTED_IN = "allowed"


def _permitted(permission: Permission, labels: Mapping[str, str], label: str) -> bool:
    return permission == "allowed" or (permission == "labelled" and labels.get(label) == OPTED_IN)


def needs_namespace(settings: EgressSettings) -> bool:
    """Whether the Namespace's labels can change the policy (worth reading it)."""
    return "labelled" in (settings.private_destinations, settings.loopback_destinations)


def external_policy(settings: EgressSettings, namespace_labels: Mapping[str, str]) -> EgressPolicy:
    """The policy of an external server's probe in a Namespace with ``namespace_labels``."""
    policy = EgressPolicy(
        allow_private=_permitted(
            settings.private_destinations, namespace_labels, PRIVATE_DESTINATIONS_LABEL
        ),
        allow_loopback=_permitted(
            settings.loopback_destinations, namespace_labels, LOOPBACK_DESTINATIONS_LABEL
        ),
    )
    return policy.with_refused(settings.refused_endpoints)


def managed_policy(settings: EgressSettings, *, through_api_server: bool) -> EgressPolicy:
    """The policy of a managed server's probe: its own Service (a private address), or the
    API server's service proxy (the API server itself, wherever it listens)."""
    if through_api_server:
        return EgressPolicy(allow_private=True, allow_loopback=True)
    policy = EgressPolicy(
        allow_private=True, allow_loopback=settings.loopback_destinations == "allowed"
    )
    return policy.with_refused(settings.refused_endpoints)


def registry_policy(settings: EgressSettings) -> EgressPolicy:
    """The policy of the registry reader for registries its flags do not name, their
    redirect targets and token services: ``labelled`` opens nothing here (no Namespace
    decides for the reader all Namespaces share)."""
    policy = EgressPolicy(
        allow_private=settings.private_destinations == "allowed",
        allow_loopback=settings.loopback_destinations == "allowed",
    )
    return policy.with_refused(settings.refused_endpoints)
