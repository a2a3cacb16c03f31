"""The wire: every HTTP connection the operator and the bridge open, and the rules for it.

One module per job:

- ``pool``       the lean keep-alive HTTP/1.1 client (probe, bridge, API server)
- ``http1``      one answer on one connection of that pool, and its failures
- ``post``       one bounded POST on the shared pool, for callers that are not MCP sessions
- ``transport``  httpx's interface on that pool (the Kubernetes API client, the registry reader)
- ``dial``       the one way a TCP connection is opened: every address judged, then raced
- ``egress``     which addresses a connection may go to (pure policy)
- ``headers``    which configured headers may be sent (the one rule)
- ``tls``        the shared TLS client contexts
- ``jsoncodec``  the one JSON encoder and decoder of the messages on the wire
- ``cancel``     whether the current task was asked to stop

Nothing here knows MCP or Kubernetes: ``net`` imports none of the operator's other rooms
(import-linter contract ``net``).
"""
