"""The one door to the Kubernetes API server: nothing else in the package speaks HTTP to it.

HTTP status codes become exceptions in ``errors`` and nowhere else.

- ``protocol``     ``Kube``: the verbs the controllers use, which the client and the fake have
- ``client``       ``KubeClient``: server-side apply, status patches, Secrets, Events
- ``errors``       refusals and requests without an answer, as ``KubeError`` and its kinds
- ``secrets``      the Secrets the operator may read: opted in, each value checked (pure)
- ``events``       the body of an Event about one of the operator's objects (pure)
- ``ownership``    whether an existing object of a child's name is the owner's own (pure)
- ``resources``    where each kind lives in the REST API
- ``credentials``  who the client is (the ``kubernetes`` package's loaders), asked again
- ``exec_plugins`` an exec plugin that outlived its load's time limit, found and stopped
- ``tls``          SSL contexts and pools for a client certificate that is renewed
- ``identity``     the operator's own audience-bound tokens, and the ServiceAccount issuer
"""

from mcp_operator.kube.client import KubeClient
from mcp_operator.kube.credentials import SERVICE_ACCOUNT_DIR
from mcp_operator.kube.errors import (
    ApiUnreachable,
    KubeError,
    NameConflict,
    NotFound,
    SecretReferenceError,
)
from mcp_operator.kube.protocol import Kube
from mcp_operator.kube.resources import (
    AGENTRUNS,
    CONFIGMAPS,
    DEPLOYMENTS,
    EVENTS,
    LEASES,
    MCPSERVERS,
    NAMESPACES,
    NETWORKPOLICIES,
    PODS,
    SECRETS,
    SERVICEACCOUNTS,
    SERVICES,
    VALIDATING_ADMISSION_POLICIES,
    VALIDATING_ADMISSION_POLICY_BINDINGS,
    Resource,
)
from mcp_operator.kube.secrets import opted_in

__all__ = [
    "AGENTRUNS",
    "CONFIGMAPS",
    "DEPLOYMENTS",
    "EVENTS",
    "LEASES",
    "MCPSERVERS",
    "NAMESPACES",
    "NETWORKPOLICIES",
    "PODS",
    "SECRETS",
    "SERVICEACCOUNTS",
    "SERVICES",
    "SERVICE_ACCOUNT_DIR",
    "VALIDATING_ADMISSION_POLICIES",
    "VALIDATING_ADMISSION_POLICY_BINDINGS",
    "ApiUnreachable",
    "Kube",
    "KubeClient",
    "KubeError",
    "NameConflict",
    "NotFound",
    "Resource",
    "SecretReferenceError",
    "opted_in",
]
