"""Where each kind the operator touches lives in the REST API (paths, no I/O)."""

from __future__ import annotations

from dataclasses import dataclass

from mcp_operator import GROUP, VERSION


@dataclass(frozen=True)
class Resource:
    """Where a kind lives in the REST API."""

    group: str
    version: str
    plural: str

    def path(self, namespace: str | None, name: str | None = None, sub: str | None = None) -> str:
        base = f"/api/{self.version}" if not self.group else f"/apis/{self.group}/{self.version}"
        if namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name:
            base += f"/{name}"
        if sub:
            base += f"/{sub}"
        return base


SECRETS = Resource("", "v1", "secrets")
NAMESPACES = Resource("", "v1", "namespaces")
SERVICEACCOUNTS = Resource("", "v1", "serviceaccounts")
EVENTS = Resource("", "v1", "events")
SERVICES = Resource("", "v1", "services")
DEPLOYMENTS = Resource("apps", "v1", "deployments")
PODS = Resource("", "v1", "pods")
CONFIGMAPS = Resource("", "v1", "configmaps")
MCPSERVERS = Resource(GROUP, VERSION, "mcpservers")
AGENTRUNS = Resource(GROUP, VERSION, "agentruns")
NETWORKPOLICIES = Resource("networking.k8s.io", "v1", "networkpolicies")
LEASES = Resource("coordination.k8s.io", "v1", "leases")
VALIDATING_ADMISSION_POLICIES = Resource(
    "admissionregistration.k8s.io", "v1", "validatingadmissionpolicies"
)
VALIDATING_ADMISSION_POLICY_BINDINGS = Resource(
    "admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings"
)
