"""Reading an image's configuration from its OCI registry (distribution API, pull only).

- :mod:`.reference`: image references, normalised as a container runtime does (pure);
- :mod:`.config`: the parts of an image configuration the operator uses, and the platform
  choice in a multi-arch index (pure);
- :mod:`.auth`: pull credentials from ``dockerconfigjson`` Secrets and the registry's
  ``WWW-Authenticate`` challenges (pure);
- :mod:`.client`: the HTTP side (httpx): manifests, the anonymous or authenticated bearer
  token flow, the config blob, and a cache by digest.

Nothing here knows Kubernetes: the caller reads the pull Secrets and hands their data in.
This package file imports nothing, so pure modules (render) can use :mod:`.config` alone.
"""
