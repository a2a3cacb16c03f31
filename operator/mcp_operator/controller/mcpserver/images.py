"""The image configuration of a managed server, for servers whose Pod needs it.

A stdio server without ``deployment.command`` is wrapped around its image's own
``ENTRYPOINT``/``CMD`` (and runs as its ``USER`` when that is a non-root number): this
module reads the ``.dockerconfigjson`` of the server's ``imagePullSecrets`` through the one
door to the API server and asks :class:`~mcp_operator.oci.client.RegistryClient`. What the
registry says is rendered by :mod:`.render`; how a failure shows in status is
:mod:`.reconcile`'s business. Secret values go into the registry request and nowhere else.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from mcp_operator.api import MCPServer
from mcp_operator.kube import SECRETS, Kube, SecretReferenceError
from mcp_operator.oci.auth import credentials_for
from mcp_operator.oci.client import RegistryClient
from mcp_operator.oci.config import ImageConfig
from mcp_operator.oci.reference import InvalidReference, parse_reference

DOCKER_CONFIG_KEY = ".dockerconfigjson"


async def pull_secret_documents(kube: Kube, server: MCPServer) -> list[tuple[str, Any]]:
    """The parsed ``.dockerconfigjson`` of each ``imagePullSecrets`` entry, in order."""
    spec = server.spec.deployment
    namespace = server.metadata.namespace
    assert spec is not None and namespace is not None
    documents: list[tuple[str, Any]] = []
    for ref in spec.image_pull_secrets or ():
        source = f"Secret {namespace}/{ref.name}"
        secret = await kube.get(SECRETS, namespace, ref.name)
        if secret is None:
            raise SecretReferenceError(
                "SecretNotFound", f"{source} (imagePullSecrets) was not found"
            )
        encoded = (secret.get("data") or {}).get(DOCKER_CONFIG_KEY)
        if encoded is None:
            raise SecretReferenceError(
                "SecretKeyNotFound",
                f"{source} has no key {DOCKER_CONFIG_KEY!r} (a kubernetes.io/dockerconfigjson "
                "Secret: kubectl create secret docker-registry)",
            )
        try:
            documents.append((source, json.loads(base64.b64decode(encoded))))
        except (binascii.Error, ValueError):
            raise SecretReferenceError(
                "SecretKeyInvalid", f"{source} key {DOCKER_CONFIG_KEY!r} is not JSON"
            ) from None
    return documents


async def image_config(kube: Kube, server: MCPServer, registry: RegistryClient) -> ImageConfig:
    """The server image's configuration, with the credentials a kubelet would use.

    Raises :class:`~mcp_operator.oci.client.RegistryError`,
    :class:`~mcp_operator.kube.SecretReferenceError` or
    :class:`~mcp_operator.oci.auth.PullSecretError`.
    """
    spec = server.spec.deployment
    assert spec is not None
    credentials = None
    documents = await pull_secret_documents(kube, server)
    if documents:
        try:
            reference = parse_reference(spec.image)
        except InvalidReference:
            reference = None  # the client says so, with its own reason
        if reference is not None:
            credentials = credentials_for(documents, reference)
    return await registry.image_config(spec.image, credentials)
