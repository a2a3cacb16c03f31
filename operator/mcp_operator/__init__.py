"""mcp-operator: runs and governs Model Context Protocol servers on Kubernetes.

One room per job; the arrows run one way (import-linter contracts in ``make lint``):

- ``api``         pydantic models of the custom resources (parse at the boundary)
- ``kube``        the one door to the Kubernetes API (server-side apply, status patches)
- ``controller``  kopf handlers, settings, workers; the MCPServer and AgentRun controllers
- ``mcp``         the MCP client side shared by probe and bridge (target, discovery, naming)
- ``net``         the wire: connections, the egress policy, TLS
- ``oci``         an image's configuration, read from its registry
- ``serve``       the MCP server side shared by adapter and bridge (ASGI, SSE, Host/Origin)
- ``adapter``     the stdio -> Streamable HTTP adapter
- ``bridge``      the mcp-bridge sidecar: one governed MCP endpoint per agent
- ``otlp``        OTLP/HTTP traces of our own: light spans and their export
- ``tracing``     OpenTelemetry traces and metrics of MCP requests, off unless configured
- ``dev``         the local control plane used by tests and ``make demo``, and the demo
- ``commands``    the command line's subcommands: run, adapter, bridge, probe, dev
- ``cli``         the one entry point that wires the subcommands
"""

GROUP = "mcp-operator.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
FIELD_MANAGER = "mcp-operator"

METRICS_AUDIENCE = f"metrics.{GROUP}"
"""The audience of a scraper's ServiceAccount token for ``/metrics`` of the adapter and the
bridge (:mod:`mcp_operator.serve.auth.scrapers`)."""

OPT_IN_LABEL = f"{GROUP}/for-mcp-servers"
OPT_IN_VALUE = "true"
"""A Secret (or ServiceAccount) carrying ``mcp-operator.dev/for-mcp-servers=true`` may be used
by the MCPServers and AgentRuns of its namespace: its values sent as headers or put into a
server's environment (or the ServiceAccount run a managed server's Pods). Without it, the
right to create an MCPServer would be the right to every Secret of the namespace."""

__version__ = "0.1.0"
