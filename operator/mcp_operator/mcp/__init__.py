"""The MCP client side, shared by the probe and the bridge. One module per job:

- ``session``            the one MCP client session (either era): requests, pages, its end
- ``session_wire``       a session's state, headers and credentials; one request sent
- ``session_exchange``   a request's answer: read, matched by id, resumed when cut
- ``session_handshake``  a session's era: ``server/discover``, else ``initialize``
- ``session_changes``    a session's change streams, and ``follow`` keeping one open
- ``failures``           ``McpFailure``: what broke in a session's request, what the caller may do
- ``resume``             a cut answer stream's cursor, and the bounds of resuming it
- ``bounds``             a session's bounds: bytes per answer, pages and items per listing
- ``messages``           a session's JSON-RPC messages, and its server's URL safe to show
- ``legacy_sse``         one client session over the legacy HTTP+SSE transport (bridge, probe)
- ``legacy_routing``     that transport's endpoint (same origin only), and whose answer is whose
- ``sse``                the one SSE reader
- ``probe_client``       the probe's face of the session, either transport (bounds, SDK models)
- ``probe_bodies``       the probe's bounds on every body and event stream it reads
- ``target``             where and how to probe, and URLs safe to show
- ``discovery``          the probe: handshake, then every page of ``tools/list``
- ``pages``              tool lists counted and cut on the raw JSON
- ``budget``             the byte budget shared by all probes
- ``watch``              waiting for ``tools/list_changed``
- ``errors``             ``ProbeError``, and what the probe had seen when it failed
- ``translation``        the table that translates any failure into one ``ProbeError``
- ``naming``             exposed names and filters, as one plan
- ``definitions``        the digest of a tool's definition: what is pinned and checked
- ``uris``               resource URIs namespaced per server, reversibly
- ``scrub``              masking secret values a server echoes back
- ``credentials``        what a client presents on every request: the ``Credentials`` protocol
- ``oauth``              OAuth client credentials and token exchange, one cached token
- ``tokens``             OAuth tokens, and the token endpoint's request, bounds and answers
- ``challenge``          what a server's ``401``/``403`` asks for: its ``WWW-Authenticate``, read

The wire (connections, egress policy, TLS) is :mod:`mcp_operator.net`'s. Nothing here
imports ``kube`` or ``controller``.
"""
