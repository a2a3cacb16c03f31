"""Who is calling an MCP endpoint we serve: inbound authentication and authorization.

Shared by the adapter and the bridge, so it imports neither. Modules, one job each:

- ``access``    the access configuration (the JSON of the server's ``<server>-access``
  ConfigMap), parsed, and re-read when the kubelet swaps the file
- ``caller``    the verified caller of a request, never the token
- ``tokens``    offline verification of ServiceAccount tokens and OIDC JWTs, with a cache
- ``verifier``  one configuration's verifier: a bearer token in, an authorized caller out
- ``policy``    who may call, decided from the verified claims
- ``jwks``      an OIDC issuer's keys fetched from its ``jwksURL`` (bounded, cached)
- ``metadata``  the RFC 9728 protected-resource metadata document
- ``scrapers``  who may read ``/metrics``: an authenticated, authorized scraper
- ``gate``      the HTTP side: the token from the headers, 401/403 before the body, refusals
  counted by reason, the caller logged, never the token
"""
