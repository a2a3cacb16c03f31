"""Who is calling an MCP endpoint we serve: inbound authentication and authorization.

Shared by the adapter and (later) the bridge, so it imports neither. The rooms:

- ``access``: the access configuration (the JSON the operator writes into the server's
  ``<server>-access`` ConfigMap), parsed, and re-read when the kubelet swaps the file;
- ``caller``: the verified caller (:class:`~mcp_operator.serve.auth.caller.Caller`);
- ``tokens``: offline verification of Kubernetes ServiceAccount tokens and OIDC JWTs against
  the keys of the configuration, with a small cache of verified tokens;
- ``policy``: who may call, decided from the verified claims;
- ``jwks``: fetching an OIDC issuer's keys from its ``jwksURL`` (bounded, cached);
- ``metadata``: the RFC 9728 protected-resource metadata document;
- ``gate``: the HTTP side — the token taken from the request's headers, 401/403 answered
  before the body is read, refusals counted by reason, the caller logged, never the token.
"""
