"""Render helpers every controller shares: pure functions, manifest pieces out.

Owner references of our objects, the recommended ``app.kubernetes.io/*`` labels and the
AgentRun label, the restricted Pod and container security contexts, and the ``OTEL_*``
variables of a ``tracing`` setting. What each child looks like is the business
of each controller's own ``render`` module.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from mcp_operator import GROUP, METRICS_AUDIENCE
from mcp_operator.api import TracingSpec

MANAGED_BY = "mcp-operator"
"""``app.kubernetes.io/managed-by`` of every child (the Deployment watch selects on it)."""
AGENT_RUN_LABEL = f"{GROUP}/agent-run"
"""The label naming a child's AgentRun (the operator watches Pods that carry it, and managed
servers' NetworkPolicies let Pods that carry it in)."""
NON_ROOT_UID = 65532

_RESTRICTED_CONTAINER = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "runAsNonRoot": True,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}
_RESTRICTED_POD = {
    "runAsNonRoot": True,
    "runAsUser": NON_ROOT_UID,
    "runAsGroup": NON_ROOT_UID,
    "fsGroup": NON_ROOT_UID,
    "seccompProfile": {"type": "RuntimeDefault"},
}


class _Metadata(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def uid(self) -> str | None: ...


class Owner(Protocol):
    """Any of our parsed objects (an MCPServer, an AgentRun)."""

    @property
    def api_version(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def metadata(self) -> _Metadata: ...


METRICS_ACCESS_KEY = "metrics.json"
"""The key of the file that says who may read ``/metrics`` of an adapter or a bridge, beside
their other configuration (``serve.auth.scrapers`` reads it with ``--metrics-access``)."""


def metrics_access(
    issuer: str | None, jwks: Mapping[str, Any] | None, scrapers: Iterable[str]
) -> dict[str, Any]:
    """Who may read ``/metrics`` of the data plane, in the access configuration's format: a
    ServiceAccount token of the audience ``metrics.mcp-operator.dev`` from one of
    ``scrapers`` (``namespace/name``), verified against the cluster's issuer keys. Without
    keys (they could not be read) every scrape is refused."""
    body: dict[str, Any] = {
        "audience": METRICS_AUDIENCE,
        "allow": {
            "namespaces": [],
            "operators": sorted(
                {f"system:serviceaccount:{s.replace('/', ':', 1)}" for s in scrapers}
            ),
        },
    }
    if issuer is not None and jwks is not None:
        body["issuer"] = issuer
        body["jwks"] = dict(jwks)
    return body


def metrics_access_text(body: Mapping[str, Any]) -> str:
    return json.dumps(dict(body), indent=1, sort_keys=True) + "\n"


def owner_reference(owner: Owner) -> dict[str, Any]:
    """The controller owner reference that makes ``owner``'s children garbage-collected."""
    return {
        "apiVersion": owner.api_version,
        "kind": owner.kind,
        "name": owner.metadata.name,
        "uid": owner.metadata.uid,
        "controller": True,
        # No blockOwnerDeletion: with OwnerReferencesPermissionEnforcement it would need
        # update on <plural>/finalizers, and background deletion does not need it.
    }


def recommended_labels(*, name: str, instance: str, component: str) -> dict[str, str]:
    """The recommended ``app.kubernetes.io/*`` labels of a child."""
    return {
        "app.kubernetes.io/name": name,
        "app.kubernetes.io/instance": instance,
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/managed-by": MANAGED_BY,
    }


def restricted_container_security() -> dict[str, Any]:
    """A container ``securityContext`` within the ``restricted`` Pod Security Standard."""
    return copy.deepcopy(_RESTRICTED_CONTAINER)


def restricted_pod_security() -> dict[str, Any]:
    """A Pod ``securityContext`` within the ``restricted`` standard: a fixed non-root user."""
    return copy.deepcopy(_RESTRICTED_POD)


def tracing_env(
    tracing: TracingSpec | None, service_name: str, resource: Mapping[str, str | None]
) -> list[dict[str, str]]:
    """The standard OpenTelemetry variables of a ``tracing`` setting (none when unset) for
    our program in a Pod (``mcp_operator.tracing`` reads them): the collector, the service
    name, the resource attributes (``resource``, in order) and a parent-based ratio sampler."""
    if tracing is None:
        return []
    attributes = ",".join(f"{key}={value}" for key, value in resource.items())
    return [
        {"name": "OTEL_EXPORTER_OTLP_ENDPOINT", "value": tracing.endpoint},
        {"name": "OTEL_SERVICE_NAME", "value": service_name},
        {"name": "OTEL_RESOURCE_ATTRIBUTES", "value": attributes},
        {"name": "OTEL_TRACES_SAMPLER", "value": "parentbased_traceidratio"},
        {"name": "OTEL_TRACES_SAMPLER_ARG", "value": f"{tracing.sample_percent / 100:g}"},
    ]
