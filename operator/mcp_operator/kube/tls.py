"""TLS towards the API server when the client certificate changes: contexts and connection pools.

Owns what a client certificate that is renewed needs on the wire: an SSL context
per certificate (the ``ssl`` module loads a key only from a file, so the pair is
written to a private directory, 0700 with 0600 files, loaded and removed at
once), and :class:`CertificateTransport`, which asks its source for the current
certificate before every request and, when it has changed, opens new
connections with a new context while requests already in flight finish on the
old pool, which is closed once they have (as client-go's exec authenticator
drops its connections when a plugin hands out a new certificate).

Where the certificate comes from and when it is renewed is
:mod:`mcp_operator.kube.credentials`'s business (the ``kubernetes`` package resolves it); which
transport a client uses is :mod:`mcp_operator.kube.client`'s. The request path stays on
``net/pool`` rather than the package's urllib3 pool: docs/architecture.md says why.
"""

from __future__ import annotations

import logging
import os
import ssl
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from mcp_operator.net.pool import MAX_CONNECTIONS_PER_ORIGIN
from mcp_operator.net.transport import Http1Transport

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ClientCertificate:
    """A PEM certificate (chain) and its private key; the ``repr`` never shows the key."""

    certificate_pem: str
    key_pem: str

    def __repr__(self) -> str:
        return "ClientCertificate(certificate=<PEM>, key=<hidden>)"


@dataclass(frozen=True)
class ServerVerification:
    """How the API server's certificate is checked: against ``ca_pem`` (``None``: the
    system's trust store), or not at all (``insecure``, the kubeconfig's
    ``insecure-skip-tls-verify``); for the name ``server_name`` (the kubeconfig's
    ``tls-server-name``, also sent as SNI) instead of the URL's host when given."""

    ca_pem: str | None = None
    insecure: bool = False
    server_name: str | None = None


def client_context(
    verification: ServerVerification, certificate: ClientCertificate | None
) -> ssl.SSLContext:
    """A fresh SSL context that verifies the server as told and presents ``certificate``."""
    context = ssl.create_default_context(cadata=verification.ca_pem)
    if verification.insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if certificate is not None:
        load_certificate(context, certificate)
    return context


def load_certificate(context: ssl.SSLContext, certificate: ClientCertificate) -> None:
    """Load the pair into ``context`` through files that live only while loading."""
    with tempfile.TemporaryDirectory(prefix="mcp-operator-tls-") as directory:
        # mkdtemp makes the directory 0700; the files are created 0600 before any byte.
        certificate_path = _private_file(
            Path(directory) / "client.crt", certificate.certificate_pem
        )
        key_path = _private_file(Path(directory) / "client.key", certificate.key_pem)
        try:
            context.load_cert_chain(certificate_path, key_path)
        except ssl.SSLError as error:
            # OpenSSL's reason names no key material; the message says which part failed.
            raise ValueError(
                f"the client certificate and key do not load ({error.reason or 'invalid PEM'})"
            ) from None


def _private_file(path: Path, text: str) -> str:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(text)
    return str(path)


class _Pool:
    """One connection pool with the context of one certificate, and its requests in flight."""

    def __init__(self, transport: Http1Transport) -> None:
        self.transport = transport
        self.context = transport.context
        self.in_flight = 0
        self.retired = False

    async def close_if_idle(self) -> None:
        if self.retired and self.in_flight == 0:
            await self.transport.aclose()


class _CountedStream(httpx.AsyncByteStream):
    """A response body that tells its pool when it is closed (the request is over)."""

    def __init__(self, stream: httpx.AsyncByteStream, done: Callable[[], Awaitable[None]]) -> None:
        self._stream = stream
        self._done: Callable[[], Awaitable[None]] | None = done

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._stream:
            yield chunk

    async def aclose(self) -> None:
        try:
            await self._stream.aclose()
        finally:
            done, self._done = self._done, None
            if done is not None:
                await done()


class CertificateTransport(httpx.AsyncBaseTransport):
    """An httpx transport that presents the current certificate of ``source``: a new pool
    (new connections, new TLS handshakes) whenever the certificate changes.

    ``source`` reads the certificate as last obtained, without renewing it: the client renews
    the credential before each request (for its token) and the transport follows. ``None``
    while a pool exists means "being renewed" (another request's 401), not "no certificate":
    the current pool is kept then."""

    def __init__(
        self,
        source: Callable[[], ClientCertificate | None],
        verification: ServerVerification,
        *,
        max_connections: int = MAX_CONNECTIONS_PER_ORIGIN,
    ) -> None:
        self._source = source
        self._max_connections = max_connections
        self._verification = verification
        self._certificate: ClientCertificate | None = None
        self._pool: _Pool | None = None
        self._retired: list[_Pool] = []
        self.pools_opened = 0
        """How many pools (certificates) this transport has used (tests and logs)."""

    @property
    def context(self) -> ssl.SSLContext | None:
        """The SSL context of the current certificate (``None`` before the first request)."""
        return self._pool.context if self._pool is not None else None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        certificate = self._source()
        pool = self._pool
        if pool is None or (certificate is not None and certificate != self._certificate):
            pool = await self._switch(certificate)
        pool.in_flight += 1
        try:
            response = await pool.transport.handle_async_request(request)
        except BaseException:
            await self._finished(pool)
            raise
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return httpx.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=_CountedStream(response.stream, lambda: self._finished(pool)),
            extensions=response.extensions,
        )

    async def _switch(self, certificate: ClientCertificate | None) -> _Pool:
        context = client_context(self._verification, certificate)
        pool = _Pool(
            Http1Transport(
                context,
                egress=None,
                server_name=self._verification.server_name,
                max_connections=self._max_connections,
            )
        )
        old, self._pool, self._certificate = self._pool, pool, certificate
        self.pools_opened += 1
        if old is not None:
            logger.info(
                "Opened new connections to the API server with a renewed client certificate"
            )
            old.retired = True
            self._retired.append(old)
            await old.close_if_idle()
        self._retired = [p for p in self._retired if p.in_flight > 0]
        return pool

    async def _finished(self, pool: _Pool) -> None:
        pool.in_flight -= 1
        await pool.close_if_idle()

    async def aclose(self) -> None:
        pools = [*self._retired, *([self._pool] if self._pool is not None else [])]
        self._pool, self._retired = None, []
        for pool in pools:
            await pool.transport.aclose()
