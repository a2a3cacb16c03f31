"""mcp-operator: runs and governs Model Context Protocol servers on Kubernetes.

The package is layered; each module's docstring says what it owns:

- ``api``      pydantic models of the custom resources (parse at the boundary)
- ``mcp``      the MCP client side shared by probe, adapter and bridge (naming, filters, probe)
- ``kube``     the one door to the Kubernetes API (server-side apply, status patches)
- ``handlers`` thin kopf handlers (parse -> render -> apply -> status)
- ``adapter``  the stdio -> Streamable HTTP adapter
- ``devcluster`` the local control plane used by tests and ``make demo``
"""

GROUP = "mcp-operator.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
FIELD_MANAGER = "mcp-operator"

__version__ = "0.1.0"
