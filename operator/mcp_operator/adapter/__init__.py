"""The stdio → Streamable HTTP adapter (``mcp-operator adapter``).

Serves one stdio MCP server to many HTTP clients of both protocol eras. Modules, one job each:

- ``config``        the typed configuration (flags and environment)
- ``records``       the shared shapes: Session, PendingCall, the call and stream sinks
- ``sessions``      the adapter's sessions in ``serve.sessions``' table: capabilities, opening
- ``router``        the protocol core: id and token remapping, routing, cancellation
- ``attribution``   which call (and session) a server→client message belongs to
- ``rounds``        input-required rounds: what a legacy child's call keeps between them
- ``child``         the supervised stdio child (spawn, read loop, restart, group kill)
- ``socket_child``  a child started per connection by ``mcp-stdio-exec --spawn-socket``
- ``pool``          the bounded pool of children of ``--child-per-session``
- ``oversized``     a stdout line of the child too long to read: the call it answers
- ``core``          the running state: child + router + sessions, health and readiness
- ``auth``          inbound authentication, built from the configuration
- ``budget``        the byte budget of request bodies in flight
- ``param_headers`` ``Mcp-Param-*`` headers checked against the child's tool schemas
- ``audit``         one JSON line per ``tools/call`` served (``--audit``)
- ``metrics``       the adapter's Prometheus metrics, on a registry of its own
- ``front``         the ASGI entry: dispatch by path, method and era; health, lifespan
- ``front_pool``    the ASGI entry of ``--child-per-session``: a child (and front) per session
- ``front_legacy``  the legacy session endpoint (POST, GET stream, DELETE)
- ``front_modern``  the stateless 2026-07-28 endpoint
- ``front_sse``     the legacy HTTP+SSE transport (``--sse``)
- ``http_call``     the sink of one POSTed call (answer, stream, questions)
- ``front_calls``   answering one forwarded call: JSON, or SSE once something streams
- ``front_rounds``  input-required rounds of a 2026-07-28 call over HTTP
- ``upstream``      the authenticating front of an HTTP-native server (``--upstream-url``)
- ``server``        running the front under uvicorn with signal handling
"""
