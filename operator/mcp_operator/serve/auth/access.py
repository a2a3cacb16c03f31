"""The access configuration of an MCP endpoint, and its file re-read as it changes.

Owns the JSON the operator writes into a managed server's ``<server>-access`` ConfigMap (key
``access.json``, mounted read-only at ``/etc/mcp-operator/access/``)::

    {"audience": "mcpserver.mcp-operator.dev/ns/name",
     "issuer": "<the cluster's service-account issuer>",
     "jwks": {"keys": [...]},
     "allow": {"namespaces": ["ns"] | ["*"], "serviceAccounts": ["ns/name"] | null,
               "operators": ["system:serviceaccount:mcp-operator:mcp-operator"]},
     "revokedPods": ["<pod uid>", ...],
     "oidc": null | {"issuer", "audience", "jwksURL"?, "jwks"?, "resource",
                     "authorizationServers"}}

:func:`parse` checks it (a clear :class:`AccessConfigError` naming the field) and returns an
:class:`AccessConfig`; :class:`AccessFile` keeps the last good one of a path and re-reads
the file when its inode, size or mtime change — the kubelet updates a mounted ConfigMap by
swapping a ``..data`` symlink, so the path's ``stat`` (which follows it) changes at once. A
bad update keeps the last good configuration and logs why, once per bad version.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger("mcp_operator.serve.auth")

MAX_FILE_BYTES = 1024 * 1024
"""A ConfigMap holds at most 1 MiB; a bigger file is not ours."""

MAX_ENTRIES = 100_000
"""Bound on every list of the file (namespaces, service accounts, revoked Pods, keys)."""


class AccessConfigError(ValueError):
    """The access configuration cannot be used; the message names the field."""


@dataclass(frozen=True, slots=True)
class OidcSettings:
    """Where OIDC tokens come from and what they must be for."""

    issuer: str
    audience: str
    resource: str
    """The RFC 8707 resource (this endpoint's URL), served in the RFC 9728 metadata."""
    authorization_servers: tuple[str, ...]
    jwks: dict[str, Any] | None = None
    jwks_url: str | None = None


@dataclass(frozen=True, slots=True)
class AccessConfig:
    """One version of the access configuration."""

    audience: str
    issuer: str | None = None
    jwks: dict[str, Any] | None = None
    namespaces: frozenset[str] = frozenset()
    service_accounts: frozenset[str] | None = None
    """``ns/name`` entries narrowing ``namespaces``; ``None`` = every ServiceAccount there."""
    operators: frozenset[str] = frozenset()
    """Full ``system:serviceaccount:<ns>:<name>`` usernames always permitted (the probe)."""
    revoked_pods: frozenset[str] = frozenset()
    oidc: OidcSettings | None = None


def _string(raw: Any, where: str, *, optional: bool = False) -> str | None:
    if raw is None and optional:
        return None
    if not isinstance(raw, str) or not raw or len(raw) > 4096:
        raise AccessConfigError(f"{where} must be a non-empty string")
    return raw


def _strings(raw: Any, where: str) -> frozenset[str]:
    if raw is None:
        return frozenset()
    if not isinstance(raw, list) or len(raw) > MAX_ENTRIES:
        raise AccessConfigError(f"{where} must be a list of at most {MAX_ENTRIES} strings")
    for item in raw:
        if not isinstance(item, str) or not item or len(item) > 512:
            raise AccessConfigError(f"{where} must hold non-empty strings")
    return frozenset(raw)


def _jwks(raw: Any, where: str) -> dict[str, Any] | None:
    if raw is None:
        return None
    keys = raw.get("keys") if isinstance(raw, dict) else None
    if not isinstance(keys, list) or len(keys) > 100:
        raise AccessConfigError(f"{where} must be a JWK Set: {{'keys': [...]}}, at most 100")
    return {"keys": keys}


def _oidc(raw: Any) -> OidcSettings | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise AccessConfigError("oidc must be an object or null")
    jwks = _jwks(raw.get("jwks"), "oidc.jwks")
    jwks_url = _string(raw.get("jwksURL"), "oidc.jwksURL", optional=True)
    if jwks is None and jwks_url is None:
        raise AccessConfigError("oidc needs jwks or jwksURL")
    if jwks_url is not None and not jwks_url.startswith(("https://", "http://")):
        raise AccessConfigError("oidc.jwksURL must be an http(s) URL")
    resource = _string(raw.get("resource"), "oidc.resource")
    servers = sorted(_strings(raw.get("authorizationServers"), "oidc.authorizationServers"))
    return OidcSettings(
        issuer=_string(raw.get("issuer"), "oidc.issuer") or "",
        audience=_string(raw.get("audience") or resource, "oidc.audience") or "",
        resource=resource or "",
        authorization_servers=tuple(servers),
        jwks=jwks,
        jwks_url=jwks_url,
    )


def parse(raw: Any) -> AccessConfig:
    """The access configuration of a decoded JSON document, or :class:`AccessConfigError`."""
    if not isinstance(raw, dict):
        raise AccessConfigError("the access configuration must be a JSON object")
    allow = raw.get("allow") or {}
    if not isinstance(allow, dict):
        raise AccessConfigError("allow must be an object")
    accounts = allow.get("serviceAccounts")
    service_accounts = None if accounts is None else _strings(accounts, "allow.serviceAccounts")
    for entry in service_accounts or ():
        if entry.count("/") != 1:
            raise AccessConfigError(f"allow.serviceAccounts entry {entry!r} must be ns/name")
    config = AccessConfig(
        audience=_string(raw.get("audience"), "audience") or "",
        issuer=_string(raw.get("issuer"), "issuer", optional=True),
        jwks=_jwks(raw.get("jwks"), "jwks"),
        namespaces=_strings(allow.get("namespaces"), "allow.namespaces"),
        service_accounts=service_accounts,
        operators=_strings(allow.get("operators"), "allow.operators"),
        revoked_pods=_strings(raw.get("revokedPods"), "revokedPods"),
        oidc=_oidc(raw.get("oidc")),
    )
    if (config.issuer is None) != (config.jwks is None):
        raise AccessConfigError("issuer and jwks go together: set both or neither")
    return config


def load(path: str) -> tuple[AccessConfig, tuple[int, int, int]]:
    """Read and parse ``path``; returns the configuration and the file's (inode, size,
    mtime) it was read at. Raises :class:`AccessConfigError` with the reason."""
    try:
        with open(path, "rb") as file:
            stat = os.fstat(file.fileno())
            data = file.read(MAX_FILE_BYTES + 1)
    except OSError as error:
        raise AccessConfigError(f"cannot read {path}: {error.strerror or error}") from None
    if len(data) > MAX_FILE_BYTES:
        raise AccessConfigError(f"{path} is larger than {MAX_FILE_BYTES} bytes")
    try:
        document = json.loads(data)
    except ValueError as error:
        raise AccessConfigError(f"{path} is not JSON: {error}") from None
    try:
        config = parse(document)
    except AccessConfigError as error:
        raise AccessConfigError(f"{path}: {error}") from None
    return config, (stat.st_ino, stat.st_size, stat.st_mtime_ns)


_MISSING = (-1, -1, -1)


class AccessFile:
    """The current access configuration of a file: read at start (an error then is fatal
    to the caller), re-read when the file changes, checked at most every
    ``check_seconds`` of the injected monotonic ``clock``."""

    def __init__(
        self,
        path: str,
        *,
        check_seconds: float = 1.0,
        clock: Callable[[], float],
    ) -> None:
        self.path = path
        self.config, self._version = load(path)
        self.generation = 1
        """Grows with every configuration taken (caches keyed on it start over)."""
        self.reload_failures = 0
        self._check_seconds = check_seconds
        self._clock = clock
        self._next_check = clock() + check_seconds
        self._bad_version: tuple[int, int, int] | None = None

    def current(self) -> AccessConfig:
        """The configuration, re-read first when due and the file changed."""
        now = self._clock()
        if now >= self._next_check:
            self._next_check = now + self._check_seconds
            self._maybe_reload()
        return self.config

    def _maybe_reload(self) -> None:
        try:
            stat = os.stat(self.path)
        except OSError as error:
            version = _MISSING
            reason = f"cannot stat {self.path}: {error.strerror or error}"
        else:
            version = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
            if version == self._version:
                return
            if version != self._bad_version:
                try:
                    config, version = load(self.path)
                except AccessConfigError as error:
                    reason = str(error)
                else:
                    self.config, self._version = config, version
                    self._bad_version = None
                    self.generation += 1
                    logger.info("Reloaded the access configuration from %s", self.path)
                    return
        if version != self._bad_version:
            self.reload_failures += 1
            logger.warning("Kept the last good access configuration: %s", reason)
            self._bad_version = version
