"""Pull credentials and registry challenges (pure).

:func:`credentials_for` picks, from the ``.dockerconfigjson`` documents of a Pod's
``imagePullSecrets`` (in their order), the entry a kubelet would use for a registry and
repository; :func:`parse_challenge` reads a ``WWW-Authenticate`` header. Fetching tokens is
:mod:`.client`'s business; reading the Secrets is the caller's.
"""

from __future__ import annotations

import base64
import binascii
import fnmatch
import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mcp_operator.oci.reference import DOCKER_HUB, Reference

_DOCKER_HUB_KEYS = {"docker.io", "index.docker.io", "registry-1.docker.io"}


class PullSecretError(ValueError):
    """A pull Secret's ``.dockerconfigjson`` cannot be read (the message names no value)."""


@dataclass(frozen=True)
class Credentials:
    """A user name and password (or token) for one registry; the password never shows."""

    username: str
    password: str = field(repr=False)
    source: str = ""
    """Where they came from (``Secret ns/name``), for messages."""

    @property
    def fingerprint(self) -> str:
        """A short hash that tells credentials apart in cache keys, never the secret itself."""
        digest = hashlib.sha256(f"{self.username}\0{self.password}".encode()).hexdigest()
        return digest[:16]


def credentials_for(
    documents: Sequence[tuple[str, Mapping[str, Any]]], reference: Reference
) -> Credentials | None:
    """The first matching ``auths`` entry, Secrets in order, the longest key first within one.

    ``documents`` pairs a source name with a parsed ``.dockerconfigjson``. A key matches by
    host (``*`` globs a label, as the kubelet allows) and, when it has a path, by repository
    prefix; ``https://index.docker.io/v1/`` and friends mean Docker Hub.
    """
    for source, document in documents:
        auths = document.get("auths")
        if not isinstance(auths, Mapping):
            raise PullSecretError(f"{source}: .dockerconfigjson has no auths object")
        matching = [
            (len(key), key, entry)
            for key, entry in auths.items()
            if isinstance(entry, Mapping) and _matches(key, reference)
        ]
        for _, key, entry in sorted(matching, key=lambda m: -m[0]):
            return _entry_credentials(entry, f"{source} (auths key {key})")
    return None


def _matches(key: str, reference: Reference) -> bool:
    text = re.sub(r"^[a-z]+://", "", key.strip()).rstrip("/")
    host, _, path = text.partition("/")
    if host in _DOCKER_HUB_KEYS:
        host = DOCKER_HUB
        path = "" if path in ("v1", "v2") else path
    if host.count(".") != reference.registry.count(".") or not fnmatch.fnmatchcase(
        reference.registry, host
    ):
        return False
    return not path or reference.repository == path or reference.repository.startswith(path + "/")


def _entry_credentials(entry: Mapping[str, Any], source: str) -> Credentials:
    username, password = entry.get("username"), entry.get("password")
    if isinstance(username, str) and isinstance(password, str) and username:
        return Credentials(username, password, source)
    auth = entry.get("auth")
    if isinstance(auth, str) and auth:
        try:
            decoded = base64.b64decode(auth, validate=True).decode()
        except (binascii.Error, UnicodeDecodeError) as error:
            raise PullSecretError(f"{source}: auth is not base64 of user:password") from error
        user, colon, secret = decoded.partition(":")
        if colon and user:
            return Credentials(user, secret, source)
        raise PullSecretError(f"{source}: auth is not base64 of user:password")
    if entry.get("identitytoken"):
        raise PullSecretError(f"{source}: identitytoken entries are not supported; use auth")
    raise PullSecretError(f"{source}: the entry has neither auth nor username and password")


_PARAM = re.compile(r'([A-Za-z][A-Za-z0-9_-]*)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]*))')


def parse_challenge(header: str) -> tuple[str, dict[str, str]]:
    """``Bearer realm="...",service="...",scope="..."`` → ``("bearer", {realm: ...})``."""
    scheme, _, rest = header.strip().partition(" ")
    params = {
        match.group(1).lower(): (
            match.group(2).replace('\\"', '"') if match.group(2) is not None else match.group(3)
        )
        for match in _PARAM.finditer(rest)
    }
    return scheme.lower(), params


def basic_header(credentials: Credentials) -> str:
    """The ``Authorization`` value of HTTP Basic for ``credentials``."""
    raw = f"{credentials.username}:{credentials.password}".encode()
    return "Basic " + base64.b64encode(raw).decode()
