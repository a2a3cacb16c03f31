"""The MCP server side that the adapter and the bridge share.

Modules, one job each (none imports ``adapter``, ``bridge``, ``controller`` or ``kube``):

- ``asgi``          ASGI types, bounded request bodies, plain and JSON responses, disconnects
- ``jsonrpc``       JSON-RPC over HTTP: compact encoding, error objects, reading one message
- ``sse``           Server-Sent Events: framing, the bounded stream object, the pump
- ``events``        resumable SSE streams: event ids and the bounded replay store
- ``coalesce``      one socket write per event-loop turn
- ``hosts``         the Host/Origin policy (DNS rebinding protection)
- ``era``           which protocol era a request speaks, and what our servers answer per era
- ``capabilities``  client capabilities as our servers route by them
- ``sessions``      the one legacy session table: bounded, fair per caller, expiring
- ``rounds``        input-required rounds of the 2026-07-28 era: parked calls by token
- ``listeners``     2026-07-28 ``subscriptions/listen`` streams and their tagging
- ``endpoint``      the endpoint's routing (Host/Origin, era, method)
- ``audit``         where audit lines go: stdout and, when configured, a file
- ``auth``          who is calling: inbound authentication and authorization (a package)
- ``process``       uvicorn on its fastest parts without its own signals; the listening
  socket (dual-stack for ``::``); the event loop; stacks printed on a crash or SIGUSR1
- ``deadlines``     header and body read deadlines on the HTTP protocol (slowloris)
- ``metrics``       the call-latency buckets and content type of the Prometheus endpoints
"""
