"""The mcp-bridge: one governed MCP endpoint for an agent, in front of the run's MCPServers.

The configuration file it reads is :mod:`mcp_operator.api.bridge`; nothing here imports
``controller``, ``kube`` or ``adapter``, and it speaks to upstreams through
:mod:`mcp_operator.mcp.session` only (the MCP client the probe uses too). Modules, one job each:

- ``catalog``        exposed tool name → server, original name, schema, hints
- ``prompts``        exposed prompt name → server and original name
- ``overrides``      tool overrides of the MCPServer: our text, arguments we fix
- ``pinning``        pinned tool definitions: a live one that is not the pinned one
- ``discovery``      progressive discovery (``discovery: search``): two tools, not the catalog
- ``cursor``         the bridge's own signed pagination cursors
- ``errors``         the structured tool error every failure becomes
- ``unauthorized``   the tool errors of a refused authorization upstream
- ``validate``       arguments against the tool's ``inputSchema``
- ``rules``          authorization rules: allow, deny or hold for approval
- ``approval``       human approval of a held call: who is asked, and the answer
- ``ratelimit``      token buckets per limit and tool, on the pipeline's clock
- ``pii``            the PII scanner of any JSON value (detect, redact, block)
- ``pii_detectors``  the PII detectors: built-in, and plugins'
- ``pii_leaves``     a value's texts normalised, walked into leaves and rebuilt
- ``checksums``      the checksums that make a PII candidate count
- ``hooks``          the before/after-call hook interface, PII as built-ins
- ``plugins``        loading hook and detector plugins from entry points
- ``breaker``        a circuit breaker per server
- ``retry``          which failed attempts are tried again, and after how long
- ``audit``          one JSON line per call, never a value
- ``pipeline``       validate → before-hooks → call → after-hooks → normalise-error
- ``relay``          what an upstream says about one agent's call, relayed to that agent alone
- ``aggregate``      prompts, resources, templates, completion, logging beyond tools
- ``auth``           the OAuth credentials for an upstream
- ``egress``         where the bridge may connect upstream
- ``upstreams``      every server of the run: one session each, listings, re-listing
- ``core``           the running state: configuration, catalog, pipeline, sessions, audit
- ``front``          the agent's endpoint in both eras, on :mod:`mcp_operator.serve`
- ``front_legacy``   the legacy session endpoint (POST, GET stream, DELETE)
- ``front_relay``    an agent's relayed call over HTTP (tools, prompts, resources)
- ``reload``         re-reading the mounted configuration when its content changes
- ``health``         ``/healthz``, ``/readyz`` and ``/metrics`` on the health port
- ``metrics``        the bridge's Prometheus metrics, on a registry of its own
- ``server``         the process: settings, the two HTTP servers, reloads, SIGTERM
"""
