"""The stdio → Streamable HTTP adapter (``mcp-operator adapter``).

Serves one stdio MCP server to many HTTP clients of both protocol eras.
Modules, one job each:

- ``config``   the typed configuration (flags and environment)
- ``records``  the shared shapes: Session, PendingCall, the call and stream sinks
- ``sessions`` the adapter's sessions in ``serve.sessions``' table: capability names, opening
- ``router``   the protocol core: id and token remapping, routing, cancellation
- ``attribution`` which call (and session) a server→client message belongs to
- ``child``    the supervised stdio child (spawn, read loop, restart, group kill)
- ``core``     the running state: child + router + sessions, health and readiness
- ``front``    the ASGI entry: dispatch by path, method and era; /healthz, /readyz, lifespan
- ``front_legacy`` the legacy session endpoint (POST, GET stream, DELETE)
- ``front_modern`` the stateless 2026-07-28 endpoint
- ``front_sse``    the legacy HTTP+SSE transport (``--sse``)
- ``http_call``    the sink of one POSTed call (answer, stream, questions)
- ``front_calls``  answering one forwarded call: JSON, or SSE once something streams
- ``front_rounds`` input-required rounds of a 2026-07-28 call over HTTP
- ``server``   running the front under uvicorn with signal handling
"""
