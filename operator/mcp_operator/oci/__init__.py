"""Reading an image's configuration from its OCI registry (distribution API, pull only).

- ``reference``  image references, normalised as a container runtime does (pure)
- ``config``     what the operator uses of an image configuration; the platform choice (pure)
- ``auth``       pull credentials from ``dockerconfigjson`` Secrets; registry challenges (pure)
- ``settings``   how the operator talks to registries: one frozen group of settings (pure)
- ``client``     the HTTP side (httpx): manifests, bearer tokens, the config blob, a cache
- ``wire``       where the reader may connect: its transport, every connection guarded

Nothing here knows Kubernetes: the caller reads the pull Secrets and hands their data in.
This package file imports nothing, so pure modules (render) can use :mod:`.config` alone.
"""
