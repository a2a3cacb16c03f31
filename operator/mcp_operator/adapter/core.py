"""The adapter's running state: one supervised child, its handshake, the router and the sessions.

Owns the wiring between the child (``child``), the protocol core (``router``)
and the session table (``sessions``), and the truth that ``/healthz`` and
``/readyz`` report: the child is alive; the child answered ``initialize``.
The HTTP fronts (``front*``) call in here, never into the router; nothing
here knows about HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any, Final

from mcp_types import methods as _methods
from mcp_types.jsonrpc import INTERNAL_ERROR, UNSUPPORTED_PROTOCOL_VERSION
from mcp_types.version import LATEST_HANDSHAKE_VERSION
from pydantic import ValidationError

from mcp_operator import __version__
from mcp_operator.adapter.audit import from_flag as audit_from_flag
from mcp_operator.adapter.child import (
    ChildProcess,
    ChildUnavailableError,
    CrashLoopError,
    FifoChild,
    Supervisor,
)
from mcp_operator.adapter.config import AdapterConfig
from mcp_operator.adapter.metrics import AdapterMetrics
from mcp_operator.adapter.records import CallSink, Envelope, PendingCall, Session
from mcp_operator.adapter.rounds import ParkedCall, RoundStore
from mcp_operator.adapter.router import Router
from mcp_operator.adapter.sessions import AdapterSessions

logger = logging.getLogger(__name__)

CHILD_EXITED = "The MCP server process exited; the call was not answered"

ADAPTER_CLIENT_CAPABILITIES: Final[dict[str, Any]] = {
    "roots": {"listChanged": True},
    "sampling": {},
    "elicitation": {},
}
"""What the adapter declares to the child: the union of what its clients may answer.

Each server→client request is then routed only to a session whose client
declared the capability, and refused otherwise.
"""


def child_initialize_params() -> dict[str, Any]:
    """The ``initialize`` params the adapter sends its child, once per child start."""
    return {
        "protocolVersion": LATEST_HANDSHAKE_VERSION,
        "capabilities": ADAPTER_CLIENT_CAPABILITIES,
        "clientInfo": {"name": "mcp-operator-adapter", "version": __version__},
    }


class _FutureSink:
    """A call sink for requests the adapter itself makes (the handshake)."""

    def __init__(self) -> None:
        self.future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()

    def respond(self, message: dict[str, Any]) -> None:
        if not self.future.done():
            self.future.set_result(message)

    def related(self, message: dict[str, Any]) -> bool:
        return False

    def ask(self, message: dict[str, Any]) -> bool:
        return False


class AdapterCore:
    """One child behind many clients."""

    def __init__(
        self, config: AdapterConfig, *, on_fatal: Callable[[], None] | None = None
    ) -> None:
        self.config = config
        self.sessions = AdapterSessions(
            max_sessions=config.max_sessions, idle_seconds=config.session_idle_seconds
        )
        self.router = Router(self.sessions, max_inflight=config.max_inflight)
        self.rounds = RoundStore(
            max_parked=max(1, config.max_inflight // 2), ttl=config.request_timeout_seconds
        )
        """2026-07-28 calls waiting for their callers' input: at most half the calls in flight
        (callers that never retry cannot take every slot), each for one request timeout."""
        self.supervisor = Supervisor(
            self._new_child, config, on_started=self._handshake, on_exited=self._on_child_exited
        )
        self.metrics = AdapterMetrics(
            sessions=lambda: len(self.sessions),
            inflight=lambda: self.inflight,
            restarts=lambda: self.supervisor.restart_count,
            unattributed=lambda: self.router.unattributed,
        )
        self.audit = audit_from_flag(config.audit)
        self.init_result: dict[str, Any] | None = None
        """The child's InitializeResult, once its handshake is done (None: not ready)."""
        self.failed = False
        self._child_subscriptions: set[str] = set()
        """Resource URIs the adapter subscribed to at the child for listen streams."""
        self._on_fatal = on_fatal
        self._tasks: list[asyncio.Task[None]] = []

    # ------------------------------------------------------------------ lifecycle

    @property
    def alive(self) -> bool:
        child = self.supervisor.child
        return child is not None and child.running

    @property
    def ready(self) -> bool:
        return self.init_result is not None and self.alive

    async def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._supervise(), name="adapter-supervisor"),
            asyncio.create_task(self._expire_sessions(), name="adapter-session-expiry"),
        ]

    def close_streams(self) -> None:
        """Begin shutdown: end every session's stream so that HTTP connections can finish."""
        for session in self.sessions.clear():
            self.router.end_session(session, "The adapter is shutting down")
        self._close_listeners()

    def _close_listeners(self) -> None:
        for listener in self.router.listeners:
            listener.stream.close()
        self.router.listeners.clear()

    async def stop(self) -> None:
        """Shut down: fail what is in flight, drop sessions, kill the child's process group."""
        self.close_streams()
        self.router.fail_all(INTERNAL_ERROR, "The adapter is shutting down")
        await self.supervisor.stop()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, CrashLoopError):
                await task
        self._tasks = []

    async def _supervise(self) -> None:
        try:
            await self.supervisor.run()
        except CrashLoopError as error:
            logger.error("Gave up on the MCP server: %s", error)
            self.failed = True
            if self._on_fatal is not None:
                self._on_fatal()

    async def _expire_sessions(self) -> None:
        config = self.config
        period = max(
            1.0, min(60.0, config.session_idle_seconds / 2, config.request_timeout_seconds / 2)
        )
        while True:
            await asyncio.sleep(period)
            now = time.monotonic()
            for session in self.sessions.expire(now):
                logger.info("Expired idle session %s", session.id)
                self.end_session(session, "Session expired")
            self.drop_parked(self.rounds.expire(now), "The caller did not retry in time")

    # ------------------------------------------------------------------ child side

    async def _handshake(self, child: ChildProcess) -> None:
        sink = _FutureSink()
        try:
            await child.write(
                self.router.internal_request("initialize", child_initialize_params(), sink)
            )
            answer = await asyncio.wait_for(sink.future, self.config.handshake_timeout_seconds)
        except TimeoutError:
            logger.error(
                "MCP server (pid %s) did not answer initialize within %.0fs; not ready",
                child.pid,
                self.config.handshake_timeout_seconds,
            )
            await self.supervisor.kill_child("no answer to initialize")
            return
        except ChildUnavailableError:
            return
        result = answer.get("result")
        if not isinstance(result, dict):
            raw_error = answer.get("error")
            error: dict[str, Any] = raw_error if isinstance(raw_error, dict) else {}
            if error.get("code") == UNSUPPORTED_PROTOCOL_VERSION:
                logger.error(
                    "MCP server (pid %s) speaks only the stateless era (%s); a stdio child must "
                    "accept initialize",
                    child.pid,
                    error.get("data"),
                )
            else:
                logger.error("MCP server (pid %s) refused initialize: %s", child.pid, error)
            await self.supervisor.kill_child("initialize failed")
            return
        version = result.get("protocolVersion")
        try:
            _methods.validate_server_result("initialize", str(version), result)
        except (ValidationError, KeyError, ValueError) as error:
            logger.warning(
                "MCP server's InitializeResult does not validate at %s: %s", version, error
            )
        try:
            await child.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        except ChildUnavailableError:
            return
        self.init_result = result
        if isinstance(result.get("capabilities"), dict) and "tools" in result["capabilities"]:
            # learn the tools' x-mcp-header schemas before the first 2026-07-28 call needs them
            self.write_nowait(self.router.internal_request("tools/list", {}, _FutureSink()))
        raw_info = result.get("serverInfo")
        info: dict[str, Any] = raw_info if isinstance(raw_info, dict) else {}
        logger.info(
            "MCP server (pid %s) is ready: %s %s, protocol %s",
            child.pid,
            info.get("name"),
            info.get("version"),
            version,
        )

    def _new_child(self) -> ChildProcess:
        """The child of the next run: the configured command, or the FIFOs of a managed Pod."""
        config = self.config
        if config.stdio_fifo_dir is not None:
            return FifoChild(
                config.stdio_fifo_dir,
                max_line_bytes=config.max_line_bytes,
                on_message=self._on_child_message,
            )
        return ChildProcess(
            config.command,
            env=config.env,
            max_line_bytes=config.max_line_bytes,
            on_message=self._on_child_message,
        )

    def _on_child_message(self, message: dict[str, Any]) -> None:
        for line in self.router.from_child(message):
            self.write_nowait(line)

    def _on_child_exited(self, returncode: int | None) -> None:
        self.init_result = None
        self.rounds.clear()
        self._close_listeners()  # clients listen again and refetch
        self._child_subscriptions.clear()
        failed = self.router.fail_all(INTERNAL_ERROR, CHILD_EXITED)
        sessions = self.sessions.clear()
        for session in sessions:
            self.router.end_session(session, "The MCP server restarted")
        logger.warning(
            "MCP server exited (code %s): failed %d calls in flight, reset %d sessions",
            returncode,
            failed,
            len(sessions),
        )

    # ------------------------------------------------------------------ used by the HTTP fronts

    @property
    def inflight(self) -> int:
        """Calls forwarded to the child and not answered yet."""
        return len(self.router.pending)

    async def submit(
        self,
        message: dict[str, Any],
        session: Session | None,
        sink: CallSink,
        envelope: Envelope | None = None,
    ) -> PendingCall:
        """Forward a client's request to the child; its answer goes to ``sink``.

        ``envelope``: what a 2026-07-28 caller said of itself (its capabilities and log
        level go with the call). Raises RouterFullError when too many calls wait, and
        ChildUnavailableError (after forgetting the call) when there is no child to write to.
        """
        sink = self.metrics.timed(message, sink)
        if self.audit is not None:
            sink = self.audit.wrap(message, sink)
        call, line = self.router.forward_request(
            message,
            session,
            sink,
            capabilities=envelope.capabilities if envelope is not None else None,
            log_level=envelope.log_level if envelope is not None else None,
        )
        message.clear()  # the line is all the child needs: no decoded body waits with the call
        try:
            await self.send(line)
        except ChildUnavailableError:
            self.router.cancel(call, "The MCP server is not running")
            raise
        return call

    def submit_nowait(
        self, message: dict[str, Any], session: Session | None, sink: CallSink
    ) -> PendingCall:
        """Forward a request without waiting for the pipe; raises RouterFullError when full."""
        sink = self.metrics.timed(message, sink)
        if self.audit is not None:
            sink = self.audit.wrap(message, sink)
        call, line = self.router.forward_request(message, session, sink)
        self.write_nowait(line)
        return call

    def notify(self, message: dict[str, Any], session: Session) -> None:
        """Forward a client's notification (a cancellation is mapped to the child's id)."""
        line = self.router.forward_notification(message, session)
        if line is not None:
            self.write_nowait(line)

    def answer(self, message: dict[str, Any], session: Session) -> None:
        """Forward a client's answer to a server→client request."""
        line = self.router.forward_response(message, session)
        if line is not None:
            self.write_nowait(line)

    def answer_asked(self, child_request_id: Any, result: dict[str, Any]) -> None:
        """A 2026-07-28 caller's answer (from ``inputResponses``) to what the child asked it."""
        line = self.router.answer_asked(child_request_id, result)
        if line is not None:
            self.write_nowait(line)

    def subscribe_child(self, uri: str) -> None:
        """Ask the child for ``resources/updated`` on ``uri`` (once per child), for listeners."""
        if uri in self._child_subscriptions:
            return
        self._child_subscriptions.add(uri)
        line = self.router.internal_request("resources/subscribe", {"uri": uri}, _FutureSink())
        self.write_nowait(line)

    def drop_parked(self, parked: list[ParkedCall], reason: str) -> None:
        """Calls whose callers will not retry (expired, evicted): cancel them at the child."""
        for waiting in parked:
            logger.info("Cancelled call %s waiting for input: %s", waiting.call.child_id, reason)
            self.cancel(waiting.call, reason)

    def cancel(self, call: PendingCall, reason: str) -> None:
        """Give up on a call (timeout, disconnect): its sink gets an error, the child is told."""
        line = self.router.cancel(call, reason)
        if line is not None:
            self.write_nowait(line)

    async def send(self, line: bytes) -> None:
        """Write one line to the child; raises ChildUnavailableError when there is none."""
        child = self.supervisor.child
        if child is None:
            raise ChildUnavailableError("the MCP server process is not running")
        await child.write(line)

    def write_nowait(self, line: bytes) -> None:
        """Write one line without waiting; a dead child drops it (its calls fail on exit anyway)."""
        child = self.supervisor.child
        if child is not None:
            with contextlib.suppress(ChildUnavailableError):
                child.write_nowait(line)

    def end_session(self, session: Session, reason: str) -> None:
        for line in self.router.end_session(session, reason):
            self.write_nowait(line)
