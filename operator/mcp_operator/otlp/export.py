"""A span processor that sends finished spans (ours or the SDK's) over OTLP/HTTP, cheaply.

Owns the path of a finished span to the collector, in the place of the SDK's
``BatchSpanProcessor`` over its ``OTLPSpanExporter`` (same variables, same endpoint, same
bytes on the wire; why: docs/tracing.md, "What it costs"):

- **When a span ends** (:meth:`OtlpSpanProcessor.on_end`, on the thread that ends it) it is
  encoded at once (:mod:`~mcp_operator.otlp.encode`, a few microseconds) and only its bytes
  are queued: the SDK's span objects are freed as soon as they end, and the export thread
  has nothing left to compute while it holds the GIL. A span not sampled is not queued.
- **A bounded queue** of ``OTEL_BSP_MAX_QUEUE_SIZE`` spans (2048): when it is full the oldest
  are dropped and counted, never the caller blocked.
- **One export thread** that POSTs the queue in batches of at most
  ``OTEL_BSP_MAX_EXPORT_BATCH_SIZE`` spans (512) every ``OTEL_BSP_SCHEDULE_DELAY`` ms (5000),
  (then everything queued), or as soon as a batch is full (then full batches only), on one
  kept-alive connection with the exporter's timeout.
- **No retries**: a batch that fails (the collector down, slow or answering an error) is
  dropped, counted and logged (once a minute at most): retrying would pile the next batches
  behind it, and traces are the first thing to shed.

Configuration (:meth:`Settings.from_environ`): the OTLP exporter's standard variables,
the traces-specific one winning over the general one: ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``
(as is) or ``OTEL_EXPORTER_OTLP_ENDPOINT`` + ``/v1/traces`` (default
``http://localhost:4318``), ``…_HEADERS``, ``…_TIMEOUT`` (seconds, 10, as the Python SDK
reads it), ``…_COMPRESSION`` (``gzip``, ``deflate`` or ``none``), ``…_CERTIFICATE`` (the CA
bundle for an ``https`` endpoint; the system's otherwise), ``…_CLIENT_CERTIFICATE`` and
``…_CLIENT_KEY`` (mTLS).
"""

from __future__ import annotations

import collections
import http.client
import logging
import ssl
import threading
import time
import urllib.parse
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.util.re import parse_env_headers

from mcp_operator.otlp import encode

logger = logging.getLogger(__name__)

DEFAULT_ENDPOINT: Final = "http://localhost:4318"
TRACES_PATH: Final = "/v1/traces"
LOG_EVERY: Final = 60.0
"""Seconds between two log lines about lost spans (the first loss is logged at once)."""
ANSWER_MAX: Final = 65536
"""Bytes of a collector's answer read at most (OTLP's is a small ExportTraceServiceResponse)."""
REUSE_WITHIN: Final = 2.0
"""Seconds a connection may have been idle and still be used: the collector may have closed
one idle for longer (its idle timeout), and a batch sent on a connection closed under it is
lost, since an export that may have been read is not sent again. Under load, batches follow
each other faster than this and share one connection; otherwise each opens its own."""


def _variable(env: Mapping[str, str], name: str) -> str:
    """``OTEL_EXPORTER_OTLP_TRACES_<name>``, else ``OTEL_EXPORTER_OTLP_<name>``, else ``""``."""
    return (
        env.get(f"OTEL_EXPORTER_OTLP_TRACES_{name}") or env.get(f"OTEL_EXPORTER_OTLP_{name}") or ""
    ).strip()


def _number(raw: str, name: str, default: float) -> float:
    """``raw`` as a positive number, ``default`` when empty or not one (said in the log)."""
    raw = raw.strip()
    try:
        value = float(raw) if raw else default
    except ValueError:
        logger.warning("Ignored %s=%r: not a number, %s is used", name, raw, default)
        return default
    if value <= 0:
        logger.warning("Ignored %s=%r: not positive, %s is used", name, raw, default)
        return default
    return value


@dataclass(frozen=True)
class Settings:
    """Where and how spans are sent, and how many are kept waiting."""

    endpoint: str = DEFAULT_ENDPOINT + TRACES_PATH
    """The URL spans are POSTed to (``…/v1/traces``)."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """Sent with every export (``OTEL_EXPORTER_OTLP_HEADERS``: an API key, a tenant)."""
    timeout: float = 10.0
    """Seconds an export may take, connecting included."""
    compression: str = "none"
    """``gzip``, ``deflate`` or ``none``."""
    certificate: str | None = None
    """A CA bundle to verify an ``https`` collector with (the system's without it)."""
    client_certificate: str | None = None
    client_key: str | None = None
    """The certificate and key this process presents to the collector (mTLS)."""
    schedule_delay: float = 5.0
    """Seconds between two exports while no batch fills up (``OTEL_BSP_SCHEDULE_DELAY``)."""
    max_queue_size: int = 2048
    """Spans kept waiting at most; past it the oldest are dropped."""
    max_export_batch_size: int = 512
    """Spans in one export at most."""

    @classmethod
    def from_environ(cls, env: Mapping[str, str]) -> Settings:
        """The settings the standard ``OTEL_*`` variables in ``env`` give."""
        endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
        if not endpoint:
            base = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip() or DEFAULT_ENDPOINT
            endpoint = base.rstrip("/") + TRACES_PATH
        compression = _variable(env, "COMPRESSION").lower() or "none"
        if compression not in ("gzip", "deflate", "none"):
            logger.warning("Ignored OTEL_EXPORTER_OTLP_COMPRESSION=%r: not supported", compression)
            compression = "none"

        def bsp(name: str, default: float) -> float:
            return _number(env.get(f"OTEL_BSP_{name}", ""), f"OTEL_BSP_{name}", default)

        queue = int(bsp("MAX_QUEUE_SIZE", 2048))
        batch = min(int(bsp("MAX_EXPORT_BATCH_SIZE", 512)), queue)
        return cls(
            endpoint=endpoint,
            headers=parse_env_headers(_variable(env, "HEADERS"), liberal=True),
            timeout=_number(_variable(env, "TIMEOUT"), "OTEL_EXPORTER_OTLP_TIMEOUT", 10.0),
            compression=compression,
            certificate=_variable(env, "CERTIFICATE") or None,
            client_certificate=_variable(env, "CLIENT_CERTIFICATE") or None,
            client_key=_variable(env, "CLIENT_KEY") or None,
            schedule_delay=bsp("SCHEDULE_DELAY", 5000) / 1000,
            max_queue_size=queue,
            max_export_batch_size=batch,
        )


class ExportError(Exception):
    """An export that did not reach the collector or that it refused."""


class Sender:
    """POSTs request bodies to the collector on one kept-alive connection while exports
    follow each other closely (:data:`REUSE_WITHIN`), a new one otherwise, after a failure,
    or when the collector closes it."""

    def __init__(self, settings: Settings, user_agent: str) -> None:
        url = urllib.parse.urlsplit(settings.endpoint)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"an OTLP endpoint must be an http(s) URL, not {settings.endpoint!r}")
        self.settings = settings
        self._https = url.scheme == "https"
        self._host = url.hostname
        self._port = url.port or (443 if self._https else 80)
        self._path = (url.path or "/") + (f"?{url.query}" if url.query else "")
        self._headers = {
            **{key: value for key, value in settings.headers.items()},
            "content-type": "application/x-protobuf",
            "user-agent": user_agent,
        }
        if settings.compression != "none":
            self._headers["content-encoding"] = settings.compression
        self._tls: ssl.SSLContext | None = None
        if self._https:
            self._tls = ssl.create_default_context(cafile=settings.certificate)
            if settings.client_certificate:
                self._tls.load_cert_chain(settings.client_certificate, settings.client_key)
        self._connection: http.client.HTTPConnection | None = None
        self._used_at = 0.0

    def _connect(self) -> http.client.HTTPConnection:
        timeout = self.settings.timeout
        if self._tls is not None:
            return http.client.HTTPSConnection(
                self._host, self._port, timeout=timeout, context=self._tls
            )
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def post(self, body: bytes) -> None:
        """One POST of ``body``; :class:`ExportError` unless the collector answered 2xx."""
        if self.settings.compression == "gzip":
            body = zlib.compress(body, 6, wbits=31)
        elif self.settings.compression == "deflate":
            body = zlib.compress(body, 6)
        if self._connection is not None and time.monotonic() - self._used_at > REUSE_WITHIN:
            self.close()
        if self._connection is None:
            self._connection = self._connect()
        connection = self._connection
        try:
            connection.request("POST", self._path, body, self._headers)
            response = connection.getresponse()
            answer = response.read(ANSWER_MAX)
            self._used_at = time.monotonic()
            if response.will_close or not response.isclosed():  # closing, or more than we read
                self.close()
        except (OSError, http.client.HTTPException) as error:
            self.close()
            raise ExportError(f"{type(error).__name__}: {error}") from error
        if not 200 <= response.status < 300:
            text = answer[:200].decode("utf-8", "replace")
            raise ExportError(f"HTTP {response.status} {text}".strip())

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None


class OtlpSpanProcessor(SpanProcessor):
    """Encodes each sampled span as it ends and exports the bytes from a thread of its own
    (the module docstring says how)."""

    def __init__(self, settings: Settings, sender: Sender) -> None:
        self.settings = settings
        self.sender = sender
        self.dropped = 0
        """Spans lost: the queue was full, or their export failed."""
        self.exported = 0
        self._queue: collections.deque[tuple[Any, Any, bytes]] = collections.deque(
            maxlen=settings.max_queue_size
        )
        self._wake = threading.Event()
        self._export_lock = threading.Lock()
        self._stopping = False
        self._logged_at = -LOG_EVERY
        self._unlogged = 0
        self._failing = False
        self._thread = threading.Thread(target=self._run, name="OtlpSpanExport", daemon=True)
        self._thread.start()

    # -- the span's side (any thread) ----------------------------------------------------------

    def on_end(self, span: ReadableSpan) -> None:
        context = span.context
        if context is None or not context.trace_flags.sampled or self._stopping:
            return
        try:
            encoded = encode.span(span)
        except Exception as error:  # an attribute the SDK let through and OTLP cannot carry
            self._lost(1, f"could not encode span {span.name!r}: {error}")
            return
        queue = self._queue
        if len(queue) == self.settings.max_queue_size:
            self._lost(1, "the queue was full")
        queue.append((span.resource, span.instrumentation_scope, encoded))
        if len(queue) >= self.settings.max_export_batch_size:
            self._wake.set()

    # -- the export thread -----------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stopping:
            full = self._wake.wait(self.settings.schedule_delay)
            self._wake.clear()
            if not self._stopping:
                self._export(full_batches_only=full)

    def _export(self, full_batches_only: bool = False) -> None:
        """Export what is queued, a batch at a time; ``full_batches_only`` (woken by a full
        batch): leave the last partial batch for the next wake or the schedule. Under load,
        spans keep coming while a batch is posted, and draining the queue to its end posted
        them a few dozen at a time: a fifth of the spans' cost in a saturated bridge was the
        export thread's POSTs, for a fixed cost per POST. The queue is first in, first out:
        none waits longer than the schedule delay or the next full batch."""
        batch_size = self.settings.max_export_batch_size
        with self._export_lock:
            queue = self._queue
            while queue and (not full_batches_only or len(queue) >= batch_size):
                count = min(len(queue), batch_size)
                batch = [queue.popleft() for _ in range(count)]
                try:
                    self.sender.post(encode.request(batch))
                except ExportError as error:
                    self._lost(count, f"could not export them to {self.settings.endpoint}: {error}")
                except Exception as error:  # a bug of ours must not end the thread
                    self._lost(count, f"could not export them: {type(error).__name__}: {error}")
                else:
                    self.exported += count
                    if self._failing:
                        self._failing = False
                        logger.info("Exported spans to %s again", self.settings.endpoint)

    def _lost(self, count: int, why: str) -> None:
        self.dropped += count
        self._unlogged += count
        self._failing = True
        now = time.monotonic()
        if now - self._logged_at >= LOG_EVERY:
            logger.warning("Dropped %d span(s): %s", self._unlogged, why)
            self._logged_at, self._unlogged = now, 0

    # -- the SDK's calls -------------------------------------------------------------------------

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Export what is queued now, on the caller's thread (each POST bounded by the
        exporter's timeout)."""
        self._export()
        return True

    def shutdown(self) -> None:
        """Stop the thread, export what is left, close the connection."""
        if self._stopping:
            return
        self._stopping = True
        self._wake.set()
        self._thread.join(self.settings.timeout)
        self._export()
        self.sender.close()
