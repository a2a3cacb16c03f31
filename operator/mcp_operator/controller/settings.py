"""The operator's settings: grouped, frozen, each field saying what it is for.

``mcp-operator run`` builds them from its flags (:mod:`mcp_operator.commands.run`);
the controllers only read them. kopf's own settings (watch timeouts, storage of
finalizers and progress) are set in :mod:`mcp_operator.controller.handlers`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from mcp_operator.api.common import AdmissionLayer
from mcp_operator.api.network import Egress
from mcp_operator.oci.settings import RegistrySettings

Permission = Literal["refused", "labelled", "allowed"]
"""Who may use a kind of destination: nobody, servers in Namespaces labelled for it, all."""

PRIVATE_DESTINATIONS_LABEL = "mcp-operator.dev/private-destinations"
"""Namespace label (value ``allowed``) that opts the namespace's servers in to private
addresses, where the operator's setting is ``labelled``."""

LOOPBACK_DESTINATIONS_LABEL = "mcp-operator.dev/loopback-destinations"
"""Namespace label (value ``allowed``) that opts the namespace's servers in to loopback."""


@dataclass(frozen=True)
class ScheduleSettings:
    """How often and how many: the knobs of every per-object worker."""

    max_concurrent: int = 64
    """Expensive steps (probes) running at once across all objects; the rest wait their turn."""

    initial_backoff_seconds: float = 5.0
    """First retry delay after a failed reconcile; doubles on each further failure."""

    max_backoff_seconds: float = 300.0
    """Cap of the retry delay (also capped by the object's own interval)."""

    jitter: float = 0.1
    """Relative spread of every delay, so that objects created together drift apart."""


@dataclass(frozen=True)
class ListenerSettings:
    """Listening to MCP servers for ``notifications/tools/list_changed``."""

    max_listeners: int = 256
    """Servers listened to at once (each holds one connection); the others are re-probed on
    their timer only. 0 turns listening off."""


@dataclass(frozen=True)
class RenderSettings:
    """What rendering needs to know about the operator's own installation."""

    adapter_image: str = "ghcr.io/mcp-operator/mcp-operator:0.1.0"
    """Image of the adapter sidecar and the FIFO init container (the operator's own image)."""

    adapter_image_pull_policy: str = "IfNotPresent"
    """Pull policy of that image (and of ``dataplane_image``)."""

    dataplane_image: str | None = None
    """The compiled data plane's image (``mcp-dataplane``): when set, a managed server's
    adapter or front and its init containers run it instead of ``adapter_image``, except where
    the server asks for what it does not serve yet (:func:`~mcp_operator.controller.mcpserver.
    containers.data_plane_image` says what). ``None``: the Python adapter everywhere."""

    cluster_domain: str = "cluster.local"
    """The cluster's DNS domain, for the in-cluster URL of a managed server's Service."""


@dataclass(frozen=True)
class EgressSettings:
    """Where the probe may connect for external servers (docs/security.md). Loopback,
    link-local, metadata and the API server's addresses are refused by default; these open
    what a platform team decides to open."""

    private_destinations: Permission = "refused"
    """Private addresses (in-cluster Services, nodes): ``labelled`` allows them for servers in
    Namespaces labelled ``mcp-operator.dev/private-destinations=allowed``."""

    loopback_destinations: Permission = "refused"
    """Loopback (the operator's own Pod or machine): for development, like the demo."""

    refused_endpoints: frozenset[tuple[str, int | None]] = frozenset()
    """The API server's addresses and ports, refused whatever else is allowed (found at
    start-up)."""


@dataclass(frozen=True)
class NetworkPolicySettings:
    """The NetworkPolicies the operator renders for managed servers and AgentRun Pods
    (docs/security.md, "NetworkPolicies"). They are defence in depth next to the endpoints'
    token check, and only hold where the cluster's network plugin enforces them."""

    enabled: bool = True
    """Render them (``--network-policies=enabled``); off where the cluster has no enforcer,
    where they would only pretend: status then says ``NetworkPolicy=False, Disabled``."""

    agent_egress: Egress = "open"
    """The egress of an AgentRun Pod whose ``spec.network.egress`` is unset."""

    operator_namespace: str | None = None
    """The operator's own namespace (in a Pod: ``POD_NAMESPACE``), whose Pods labelled
    :attr:`operator_pod_labels` may reach managed servers (the probe); ``None``: no Pod peer
    (an operator outside the cluster probes through the API server)."""

    operator_pod_labels: tuple[tuple[str, str], ...] = (
        ("app.kubernetes.io/name", "mcp-operator"),
        ("app.kubernetes.io/component", "operator"),
    )
    """The labels the chart and ``deploy/`` give the operator's Pods."""

    api_server_addresses: tuple[str, ...] = ()
    """The API server's addresses (the ``default/kubernetes`` endpoints, read at start-up)
    when the operator runs outside the cluster and probes through the API server's service
    proxy: the proxied connections come from them."""

    dns_namespace: str = "kube-system"
    """The namespace of the cluster's DNS Pods, which restricted egress may reach."""

    dns_pod_labels: tuple[tuple[str, str], ...] = (("k8s-app", "kube-dns"),)
    """The labels of the cluster's DNS Pods (CoreDNS's and kube-dns's usual label)."""

    dns_cidrs: tuple[str, ...] = ()
    """Addresses of a DNS server that is not a Pod (NodeLocal DNSCache's link-local address,
    a DNS on the nodes), which restricted egress may reach on port 53 too."""


@dataclass(frozen=True)
class FleetSettings:
    """Everything the MCPServer controller is configured with, by group."""

    schedule: ScheduleSettings = field(default_factory=ScheduleSettings)
    """When each MCPServer is reconciled and how many probes run at once."""

    listeners: ListenerSettings = field(default_factory=ListenerSettings)
    """Which servers are listened to for a new tool list."""

    render: RenderSettings = field(default_factory=RenderSettings)
    """How managed servers' children are rendered (adapter image, cluster domain)."""

    registry: RegistrySettings = field(default_factory=RegistrySettings)
    """How image configurations are read from registries (platform, plain-HTTP hosts)."""
    egress: EgressSettings = field(default_factory=EgressSettings)

    admission: AdmissionLayer = "Labels"
    """The admission layer that status reports (found at start, controller.admission)."""

    bridge_key_policy: str | None = None
    """The bridge-key ValidatingAdmissionPolicy when found with a binding that denies (at
    start, controller.admission); managed servers' ``Isolation`` condition reports it."""

    network: NetworkPolicySettings = field(default_factory=NetworkPolicySettings)
    """The NetworkPolicy of each managed server's Pods."""

    metrics_scrapers: tuple[str, ...] = ()
    """ServiceAccounts (``namespace/name``) that may read ``/metrics`` of the adapters
    (``--metrics-scrapers``); nobody else may."""


@dataclass(frozen=True)
class AgentRenderSettings:
    """What rendering an AgentRun needs to know about the operator's installation."""

    bridge_image: str = "ghcr.io/mcp-operator/mcp-operator:0.1.0"
    """Image of the bridge sidecar when a run names none (the operator's own image)."""

    bridge_image_pull_policy: str = "IfNotPresent"
    """Pull policy of that image (and of ``dataplane_image``)."""

    dataplane_image: str | None = None
    """The compiled data plane's image (``mcp-dataplane``, ``--dataplane-image``): when set,
    a run that names no image gets its bridge from it instead of :attr:`bridge_image`, except
    where the run asks for what it does not serve yet (:func:`~mcp_operator.controller.
    agentrun.render.bridge_image` says what). ``None``: the Python bridge."""

    bridge_images: tuple[str, ...] = ()
    """Other images a run may name in ``spec.bridge.image`` (``*``/``?`` globs): the bridge
    mounts the servers' header Secrets and enforces the filters and policy, so its image is
    the platform's choice. Empty: only :attr:`bridge_image`."""

    bridge_enabled: bool = True
    """The operator-wide switch: False renders every run without the bridge (no sidecar, no
    ``MCP_BRIDGE_URL``), whatever the run asks."""


@dataclass(frozen=True)
class AgentRunSettings:
    """Everything the AgentRun controller is configured with, by group."""

    schedule: ScheduleSettings = field(
        default_factory=lambda: ScheduleSettings(
            initial_backoff_seconds=2.0, max_backoff_seconds=60.0
        )
    )
    """When each run is reconciled again after a failure (its Pod and servers wake it too)."""

    render: AgentRenderSettings = field(default_factory=AgentRenderSettings)

    admission: AdmissionLayer = "Labels"
    """The admission layer that status reports (found at start, controller.admission)."""
    """How runs' Pods and ConfigMaps are rendered (bridge image, the operator-wide switch)."""

    network: NetworkPolicySettings = field(default_factory=NetworkPolicySettings)
    """The egress NetworkPolicy of each run's Pod."""

    metrics_scrapers: tuple[str, ...] = ()
    """ServiceAccounts (``namespace/name``) that may read ``/metrics`` of the bridges
    (``--metrics-scrapers``); nobody else may."""

    refused_endpoints: frozenset[tuple[str, int | None]] = frozenset()
    """The API server's addresses and ports (found at start-up), never opened to a run's Pod
    even when an external server's name resolves to one."""


# -- high availability: leader election and the operator's own endpoints -----------------


@dataclass(frozen=True)
class LeaderElectionSettings:
    """Who reconciles when several operators run: the holder of one ``coordination.k8s.io``
    Lease. The durations are client-go's defaults, so the behaviour is the one platform
    teams know from every other controller."""

    enabled: bool = True
    """Take part in the election; off, the process reconciles at once (one replica only)."""

    lease_name: str = "mcp-operator"
    """Name of the Lease; operators sharing it (name and namespace) elect one leader."""

    lease_namespace: str = "mcp-operator-system"
    """Namespace of the Lease (in a Pod: the Pod's own namespace)."""

    lease_duration_seconds: int = 15
    """How long a follower waits, after it last saw the Lease change, before taking it."""

    renew_deadline_seconds: float = 10.0
    """The leader steps down when it could not renew for this long; shorter than the lease
    duration, so it stops reconciling before anyone else may start."""

    retry_period_seconds: float = 2.0
    """Time between two attempts to acquire or renew."""


@dataclass(frozen=True)
class EndpointSettings:
    """The operator's own HTTP endpoints, served by leader and followers alike."""

    liveness: str | None = "http://0.0.0.0:8080/healthz"
    """URL of ``/healthz`` (``None``: not served)."""

    metrics: str | None = "http://0.0.0.0:8081/metrics"
    """URL of the Prometheus metrics (``None``: not served); may share the liveness port."""
