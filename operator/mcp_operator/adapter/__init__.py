"""The stdio → Streamable HTTP adapter (``mcp-operator adapter``).

Serves one stdio MCP server to many HTTP clients of both protocol eras.
Modules, one job each:

- ``config``   the typed configuration (flags and environment)
- ``records``  the shared shapes: Session, PendingCall, the call and stream sinks
- ``sessions`` the legacy session table (create, look up, expire, reset)
- ``router``   the protocol core: id and token remapping, routing, cancellation
- ``era``      what the adapter answers itself per era, and 2026 result shaping
- ``child``    the supervised stdio child (spawn, read loop, restart, group kill)
- ``core``     the running state: child + router + sessions, health and readiness
- ``front``    the ASGI entry: dispatch by path, method and era; /healthz, /readyz, lifespan
- ``front_legacy`` the legacy session endpoint (POST, GET stream, DELETE)
- ``front_modern`` the stateless 2026-07-28 endpoint
- ``front_sse``    the legacy HTTP+SSE transport (``--sse``)
- ``front_calls``  answering one forwarded call: JSON, or SSE once something streams
- ``server``   running the front under uvicorn with signal handling
"""
