"""The MCP server side that the adapter and the bridge share.

Modules, one job each (none imports ``adapter``, ``bridge``, ``controller`` or ``kube``):

- ``asgi``    ASGI types, bounded request bodies, plain and JSON responses, disconnects
- ``jsonrpc`` JSON-RPC over HTTP: compact encoding, error objects, reading one message
- ``sse``     Server-Sent Events: framing, the bounded stream object, the pump to a client
- ``hosts``   the Host/Origin policy (DNS rebinding protection)
- ``era``     which protocol era an incoming request speaks, the 2026-07-28 admission, and
  what our servers answer themselves per era (``initialize``, ``server/discover``, shaping)
- ``sessions`` the one legacy session table: bounded, fair per caller, expiring
- ``endpoint`` the endpoint's routing (Host/Origin, era, method) and a session's GET stream
- ``process`` uvicorn on its fastest parts without its own signal handlers; the listening
  socket (dual-stack for ``::``); the event loop
- ``deadlines`` header and body read deadlines on the HTTP protocol (slowloris)
- ``metrics`` the call-latency buckets and content type of the Prometheus endpoints
"""
