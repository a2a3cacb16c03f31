"""Read an image's configuration from its registry: the distribution API, pull only.

:class:`RegistryClient` asks ``/v2/<repository>/manifests/<tag or digest>`` (an OCI or
Docker index is narrowed to the wanted platform), then the configuration blob, checking
every sha256 it is given. Authentication follows the registry's challenge: Bearer (the
token endpoint it names, anonymously or with the pull credentials) or Basic. Results are
cached by manifest digest (immutable) and, for a tag, for a short time only.

Every failure is a :class:`RegistryError` whose ``reason`` is a condition reason; nothing
is guessed. Reading Secrets and deciding what to do with a failure are the caller's.

The HTTP stack is the operator's one: httpx's client (redirects, with ``Authorization``
dropped when a redirect leaves the origin; streaming, content decoding) over
:class:`~mcp_operator.oci.wire.RegistryTransport`, which is the guarded keep-alive pool of
the probe, OAuth and the API client. No transport of its own: a registry is named by a
tenant's image, and its blobs and token service live behind whatever hosts it names, so the
first request, every redirect hop and the token service connect only where the operator's
egress policy allows (:mod:`.wire` says which). A refused destination is
``ImageRegistryNotAllowed``, naming the destination and why, with no packet sent to it;
every other failure of the wire is ``ImageRegistryUnreachable``, translated in one place
(:meth:`RegistryClient._send`).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlencode

import httpx

from mcp_operator.net.egress import EgressPolicy
from mcp_operator.net.transport import DestinationRefused
from mcp_operator.oci.auth import Credentials, basic_header, parse_challenge
from mcp_operator.oci.config import ImageConfig, ImageConfigError, parse_config, pick_platform
from mcp_operator.oci.reference import InvalidReference, Reference, parse_reference
from mcp_operator.oci.settings import RegistrySettings
from mcp_operator.oci.wire import RegistryTransport, origin_of

logger = logging.getLogger(__name__)

INDEX_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)
MANIFEST_TYPES = (
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
ACCEPT = ", ".join((*INDEX_TYPES, *MANIFEST_TYPES))
MAX_DOCUMENT_BYTES = 4 * 1024 * 1024
"""Manifests and configuration blobs are a few KiB; anything above this is refused."""

Reason = Literal[
    "InvalidImageReference",
    "ImageRegistryNotAllowed",
    "ImageRegistryUnreachable",
    "ImageNotFound",
    "ImagePullUnauthorized",
    "ImageNotRunnable",
]


class RegistryError(Exception):
    """Why an image's configuration could not be read; ``reason`` is a condition reason."""

    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(message)
        self.reason: Reason = reason
        self.message = message


@dataclass
class _Cached:
    config: ImageConfig
    expires: float


@dataclass
class _Session:
    """One resolution: the reference, its credentials and the token earned on the way."""

    reference: Reference
    credentials: Credentials | None
    base: str
    authorization: str | None = None
    tried: set[str] = field(default_factory=set)


class RegistryClient:
    """Reads image configurations; one per operator, closed at cleanup."""

    def __init__(
        self,
        settings: RegistrySettings | None = None,
        *,
        egress: EgressPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``egress``: where registries the settings do not name, their redirects and token
        services may be (default: public addresses only). ``transport``: tests' mock
        transports only; it replaces the guarded wire."""
        self.settings = settings or RegistrySettings()
        self._http = httpx.AsyncClient(
            timeout=httpx.Timeout(self.settings.timeout_seconds),
            follow_redirects=True,  # blobs live behind redirects; Authorization is not forwarded
            transport=transport or RegistryTransport(self.settings, egress or EgressPolicy()),
            trust_env=False,
        )
        self._clock = clock
        self._cache: OrderedDict[tuple[str, ...], _Cached] = OrderedDict()
        self.requests = 0
        """Requests sent so far (tests and logs read it: a cache hit sends none)."""

    async def aclose(self) -> None:
        await self._http.aclose()

    async def image_config(self, image: str, credentials: Credentials | None = None) -> ImageConfig:
        """The configuration of ``image`` for the settings' platform, from cache or registry."""
        try:
            reference = parse_reference(image)
        except InvalidReference as error:
            raise RegistryError("InvalidImageReference", str(error)) from error
        allowed = self.settings.allowed_hosts
        if allowed and not any(fnmatch.fnmatchcase(reference.registry, p) for p in allowed):
            raise RegistryError(
                "ImageRegistryNotAllowed",
                f"{reference}: the operator may read only from {', '.join(sorted(allowed))} "
                "(--allowed-registries)",
            )
        who = credentials.fingerprint if credentials is not None else "anonymous"
        key = (reference.registry, reference.repository, reference.manifest_reference, who)
        now = self._clock()
        cached = self._cache.get(key)
        if cached is not None and cached.expires > now:
            self._cache.move_to_end(key)
            return cached.config
        scheme = "http" if reference.registry in self.settings.insecure_hosts else "https"
        session = _Session(reference, credentials, f"{scheme}://{reference.api_host}")
        try:
            config = await self._resolve(session)
        except RegistryError as error:
            if cached is None or error.reason != "ImageRegistryUnreachable":
                raise
            # The tag's last answer is what the Pod is pinned to and runs: keep it while the
            # registry is away (asked again next time) rather than call a running server
            # unready. Only an answer once read is kept; nothing is ever made up.
            logger.warning("Kept the last configuration of image %s: %s", image, error.message)
            return cached.config
        ttl = float("inf") if reference.digest else self.settings.tag_ttl_seconds
        self._cache[key] = _Cached(config, now + ttl)
        self._cache[(*key[:2], config.digest, who)] = _Cached(config, float("inf"))
        while len(self._cache) > self.settings.cache_entries:
            self._cache.popitem(last=False)
        return config

    async def _resolve(self, session: _Session) -> ImageConfig:
        reference = session.reference
        wanted = reference.digest
        body, media_type, digest = await self._document(
            session, f"manifests/{reference.manifest_reference}", ACCEPT, wanted
        )
        index_digest = ""
        if media_type in INDEX_TYPES or "manifests" in body:
            index_digest = digest
            descriptor = _or_not_runnable(lambda: pick_platform(body, *self.settings.platform))
            body, media_type, digest = await self._document(
                session, f"manifests/{descriptor['digest']}", ACCEPT, str(descriptor["digest"])
            )
        known = self._cache.get(
            (reference.registry, reference.repository, digest, _who(session.credentials))
        )
        if known is not None:
            return ImageConfig(
                digest=digest,
                entrypoint=known.config.entrypoint,
                cmd=known.config.cmd,
                user=known.config.user,
                index_digest=index_digest,
            )
        config_descriptor = body.get("config") or {}
        config_digest = config_descriptor.get("digest")
        if not isinstance(config_digest, str):
            raise RegistryError("ImageNotRunnable", f"{reference}: the manifest has no config")
        blob, _, _ = await self._document(session, f"blobs/{config_digest}", "*/*", config_digest)
        parsed = _or_not_runnable(lambda: parse_config(blob, digest))
        return ImageConfig(
            digest=digest,
            entrypoint=parsed.entrypoint,
            cmd=parsed.cmd,
            user=parsed.user,
            index_digest=index_digest,
        )

    async def _document(
        self, session: _Session, path: str, accept: str, digest: str | None
    ) -> tuple[dict[str, Any], str, str]:
        """A JSON document of the repository: (body, media type, sha256 digest of its bytes)."""
        reference = session.reference
        url = f"{session.base}/v2/{reference.repository}/{path}"
        response = await self._get(session, url, accept)
        if response.status_code == 404:
            raise RegistryError(
                "ImageNotFound", f"{reference}: the registry has no {_what(path)} (HTTP 404)"
            )
        if response.status_code in (401, 403):
            hint = (
                f"the credentials of {session.credentials.source} were refused"
                if session.credentials is not None
                else "no imagePullSecrets entry matches this registry"
            )
            raise RegistryError(
                "ImagePullUnauthorized",
                f"{reference}: HTTP {response.status_code} for its {_what(path)}; {hint}",
            )
        if response.status_code != 200:
            raise RegistryError(
                "ImageRegistryUnreachable",
                f"{reference}: HTTP {response.status_code} for its {_what(path)}",
            )
        content = response.content
        actual = "sha256:" + hashlib.sha256(content).hexdigest()
        if digest is not None and actual != digest:
            raise RegistryError(
                "ImageNotRunnable", f"{reference}: {_what(path)} does not match digest {digest}"
            )
        try:
            body = json.loads(content)
        except ValueError as error:
            raise RegistryError(
                "ImageNotRunnable", f"{reference}: its {_what(path)} is not JSON"
            ) from error
        if not isinstance(body, dict):
            raise RegistryError("ImageNotRunnable", f"{reference}: {_what(path)} is not an object")
        media_type = response.headers.get("content-type", "").split(";")[0].strip()
        return body, str(body.get("mediaType") or media_type), actual

    async def _get(self, session: _Session, url: str, accept: str) -> httpx.Response:
        for _ in range(3):
            headers = {"Accept": accept}
            if session.authorization is not None:
                headers["Authorization"] = session.authorization
            response = await self._send(session, url, headers)
            if response.status_code != 401:
                return response
            challenge = response.headers.get("www-authenticate", "")
            if not challenge or challenge in session.tried:
                return response
            session.tried.add(challenge)
            session.authorization = await self._authorize(session, challenge)
        return response

    async def _send(
        self, session: _Session, url: str, headers: Mapping[str, str]
    ) -> httpx.Response:
        self.requests += 1
        try:
            async with self._http.stream("GET", url, headers=headers) as response:
                chunks: list[bytes] = []
                size = 0
                async for chunk in response.aiter_bytes():
                    size += len(chunk)
                    if size > MAX_DOCUMENT_BYTES:
                        raise RegistryError(
                            "ImageNotRunnable",
                            f"{session.reference}: an answer exceeded {MAX_DOCUMENT_BYTES} bytes",
                        )
                    chunks.append(chunk)
                return httpx.Response(
                    response.status_code, headers=response.headers, content=b"".join(chunks)
                )
        except DestinationRefused as error:
            hop = origin_of(error.request.url)
            hop_text = f"{error.request.url.scheme}://{_hostport(hop)}"
            first = origin_of(httpx.URL(url))
            via = "" if hop == first else f" (redirected from {_hostport(first)})"
            raise RegistryError(
                "ImageRegistryNotAllowed",
                f"{session.reference}: did not connect to {hop_text}{via}: {error.refused} "
                "(the operator's egress policy, docs/security.md)",
            ) from None
        except httpx.HTTPError as error:
            raise RegistryError(
                "ImageRegistryUnreachable",
                f"{session.reference}: {session.reference.api_host} could not be reached: "
                f"{type(error).__name__}: {error}",
            ) from error

    async def _authorize(self, session: _Session, challenge: str) -> str | None:
        scheme, params = parse_challenge(challenge)
        credentials = session.credentials
        if scheme == "basic":
            return basic_header(credentials) if credentials is not None else None
        if scheme != "bearer" or not params.get("realm", "").startswith(("https://", "http://")):
            raise RegistryError(
                "ImagePullUnauthorized",
                f"{session.reference}: unsupported authentication challenge {scheme!r}",
            )
        if params["realm"].startswith("http://") and not session.base.startswith("http://"):
            raise RegistryError(
                "ImagePullUnauthorized",
                f"{session.reference}: the registry's token service is plain HTTP; "
                "credentials are only sent over HTTPS to an HTTPS registry's token service",
            )
        query = {"scope": f"repository:{session.reference.repository}:pull"}
        if params.get("service"):
            query["service"] = params["service"]
        headers = {"Authorization": basic_header(credentials)} if credentials is not None else {}
        url = f"{params['realm']}?{urlencode(query)}"
        response = await self._send(session, url, headers)
        if response.status_code in (401, 403):
            raise RegistryError(
                "ImagePullUnauthorized",
                f"{session.reference}: the token service refused "
                + (f"the credentials of {credentials.source}" if credentials else "anonymous pull")
                + f" (HTTP {response.status_code})",
            )
        if response.status_code != 200:
            raise RegistryError(
                "ImageRegistryUnreachable",
                f"{session.reference}: the token service answered HTTP {response.status_code}",
            )
        try:
            answer = json.loads(response.content)
            token = answer.get("token") or answer.get("access_token")
        except (ValueError, AttributeError):
            token = None
        if not isinstance(token, str) or not token:
            raise RegistryError(
                "ImagePullUnauthorized", f"{session.reference}: the token service gave no token"
            )
        return f"Bearer {token}"


def _hostport(origin: tuple[str, int]) -> str:
    host, port = origin
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _who(credentials: Credentials | None) -> str:
    return credentials.fingerprint if credentials is not None else "anonymous"


def _what(path: str) -> str:
    kind, _, name = path.partition("/")
    return f"manifest {name}" if kind == "manifests" else f"configuration blob {name}"


def _or_not_runnable(step: Callable[[], Any]) -> Any:
    try:
        return step()
    except ImageConfigError as error:
        raise RegistryError("ImageNotRunnable", str(error)) from error
