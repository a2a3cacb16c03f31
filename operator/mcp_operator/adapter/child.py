"""The supervised stdio child: spawn, read loop, writes, restart with backoff, process-group kill.

Owns the operating-system side of the stdio server and nothing of the
protocol: lines in, decoded JSON objects out. The child runs in its own
process group (``start_new_session``) so that wrappers such as ``npx`` and
their grandchildren die together; on Linux it also gets ``PR_SET_PDEATHSIG``
so that it cannot outlive an adapter that was killed outright. Stdout lines
that are not JSON objects are logged and dropped; stderr passes through to
the adapter's stderr. A line over the limit is read past without keeping it:
if it is an answer whose id shows at either end (``oversized``), that call
fails at once; its content is never logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import logging
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from mcp_operator.adapter.config import AdapterConfig
from mcp_operator.adapter.oversized import EDGE_BYTES, response_id, too_large_answer
from mcp_operator.net import jsoncodec

logger = logging.getLogger(__name__)

MAX_BACKOFF_SECONDS = 30.0
_WRITE_HIGH_WATER = 1024 * 1024
_DRAIN_TIMEOUT_SECONDS = 30.0
"""How long a write may wait for a child that does not read its stdin; the call then fails."""
_STDIN_BUFFER_LIMIT = 16 * 1024 * 1024
"""Most bytes queued for the server's stdin; beyond that, writes fail (calls get 503).

Notifications and answers are written without waiting for the pipe: without this
bound, a server that stops reading would let clients grow the buffer without end."""


class ChildUnavailableError(Exception):
    """The child is not running (or its stdin closed): the write did not happen."""


class CrashLoopError(Exception):
    """The child died more often than the crash-loop guard allows."""


def _set_pdeathsig() -> None:  # runs in the forked child before exec
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class ChildProcess:
    """One run of the stdio server."""

    def __init__(
        self,
        command: Sequence[str],
        *,
        env: Mapping[str, str],
        max_line_bytes: int,
        on_message: Callable[[dict[str, Any]], None],
    ) -> None:
        self.command = tuple(command)
        self._env = env
        self._max_line = max_line_bytes
        self._on_message = on_message
        self._proc: asyncio.subprocess.Process | None = None
        self._dropped = 0

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    async def start(self) -> None:
        """Spawn the child in a new process group with piped stdin and stdout."""
        env = {**os.environ, **self._env} if self._env else None
        self._proc = await asyncio.create_subprocess_exec(
            *self.command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=None,
            env=env,
            start_new_session=True,
            limit=self._max_line,
            preexec_fn=_set_pdeathsig if sys.platform == "linux" else None,
        )

    def _stdout(self) -> asyncio.StreamReader:
        assert self._proc is not None and self._proc.stdout is not None
        return self._proc.stdout

    async def read_loop(self) -> None:
        """Hand each stdout line to ``on_message`` until stdout closes."""
        stdout = self._stdout()
        loads = jsoncodec.loads
        on_message = self._on_message
        while True:
            try:
                line = await stdout.readuntil(b"\n")
            except asyncio.IncompleteReadError as eof:
                line = eof.partial  # the last line had no newline; the next read returns b""
                if not line:
                    return
            except asyncio.LimitOverrunError as overrun:
                await self._skip_oversized(stdout, overrun.consumed)
                continue
            try:
                message = loads(line)
            except ValueError:
                if line.strip():
                    self._drop(line, "a stdout line that is not JSON")
                continue
            if not isinstance(message, dict):
                self._drop(line, "a stdout line that is not a JSON-RPC object")
                continue
            try:
                on_message(message)
            except Exception:
                logger.exception("Failed to route a message from the child")

    async def _skip_oversized(self, stdout: asyncio.StreamReader, buffered: int) -> None:
        """Read past a line over the limit, keeping only its ends; fail the call it answers.

        ``buffered`` bytes of the line are in the reader's buffer (at most about twice
        the limit); the rest arrives in pieces of that size. Nothing of the line is logged.
        """
        chunk = await stdout.readexactly(buffered)
        head, tail, size = chunk[:EDGE_BYTES], chunk[-EDGE_BYTES:], len(chunk)
        while True:
            try:
                chunk = await stdout.readuntil(b"\n")
                last = True
            except asyncio.LimitOverrunError as overrun:
                chunk = await stdout.readexactly(overrun.consumed)
                last = False
            except asyncio.IncompleteReadError as eof:
                chunk = eof.partial
                last = True
            size += len(chunk)
            tail = (tail + chunk[-EDGE_BYTES:])[-EDGE_BYTES:]
            if last:
                break
        request_id = response_id(head, tail)
        self._dropped += 1
        if request_id is None:
            logger.warning(
                "Dropped a stdout line of %d bytes from the child (over --max-line-bytes %d): "
                "not an answer whose id could be found",
                size,
                self._max_line,
            )
            return
        logger.warning(
            "Dropped a stdout line of %d bytes from the child (over --max-line-bytes %d): "
            "failed the call it answers (child id %s)",
            size,
            self._max_line,
            request_id,
        )
        self._on_message(too_large_answer(request_id, size, self._max_line))

    def _drop(self, line: bytes, what: str) -> None:
        self._dropped += 1
        # Loud for the first few, then sampled: a chatty child must not flood the log.
        if self._dropped <= 10 or self._dropped % 1000 == 0:
            text = line[:200].decode(errors="replace").rstrip()
            logger.warning("Dropped %s from the child (%d so far): %s", what, self._dropped, text)

    def write_nowait(self, line: bytes) -> None:
        """Queue ``line`` for the child's stdin; raises ChildUnavailableError if it is gone."""
        proc = self._proc
        if (
            proc is None
            or proc.returncode is not None
            or proc.stdin is None
            or proc.stdin.is_closing()
        ):
            raise ChildUnavailableError("the MCP server process is not running")
        if proc.stdin.transport.get_write_buffer_size() > _STDIN_BUFFER_LIMIT:
            raise ChildUnavailableError("the MCP server is not reading its stdin")
        proc.stdin.write(line)

    async def write(self, line: bytes) -> None:
        """Write ``line`` and wait only when the pipe is backed up (bounded buffer and time)."""
        self.write_nowait(line)
        stdin = self._proc.stdin if self._proc is not None else None
        if stdin is not None and stdin.transport.get_write_buffer_size() > _WRITE_HIGH_WATER:
            try:
                await asyncio.wait_for(stdin.drain(), _DRAIN_TIMEOUT_SECONDS)
            except TimeoutError:
                raise ChildUnavailableError("the MCP server is not reading its stdin") from None
            except (ConnectionError, BrokenPipeError) as error:
                raise ChildUnavailableError(str(error)) from error

    async def wait(self) -> int:
        assert self._proc is not None
        return await self._proc.wait()

    async def terminate(self, grace: float) -> None:
        """SIGTERM the process group, then SIGKILL whatever is left after ``grace`` seconds."""
        proc = self._proc
        if proc is None:
            return
        pgid = proc.pid  # start_new_session: the child leads its own group
        if proc.stdin is not None and not proc.stdin.is_closing():
            proc.stdin.close()
        _killpg(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), grace)
        while time.monotonic() < deadline and _group_alive(pgid):  # noqa: ASYNC110 - no event to wait on
            await asyncio.sleep(0.05)
        _killpg(pgid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            await proc.wait()


STDIN_FIFO = "stdin"
STDOUT_FIFO = "stdout"
_FIFO_POLL_SECONDS = 0.1


def make_fifos(directory: str) -> None:
    """Create the two FIFOs of the FIFO mode in ``directory`` (the Pod's init container)."""
    os.makedirs(directory, exist_ok=True)
    for name in (STDIN_FIFO, STDOUT_FIFO):
        path = os.path.join(directory, name)
        if not os.path.exists(path):
            os.mkfifo(path)
            # Whatever the umask: the server container may run as the image's own user,
            # another UID than ours. The volume is the Pod's alone (an in-memory emptyDir).
            os.chmod(path, 0o666)


class StreamChild(ChildProcess):
    """A stdio server that is not our process, reached through a transport we write to.

    What the FIFO and socket kinds share: there is no pid, the child runs while our write
    end is open, the read loop reads ``self._reader``, ``terminate`` closes our end (the
    server sees end-of-file on its stdin) and writes are refused, not buffered without
    bound, when the server stops reading. Subclasses open both ends in ``start``.
    """

    _closed_message = "the MCP server's stdin is closed"
    """Why a write is refused before ``start`` or after the end closed."""

    def __init__(
        self,
        name: str,
        *,
        max_line_bytes: int,
        on_message: Callable[[dict[str, Any]], None],
    ) -> None:
        super().__init__((name,), env={}, max_line_bytes=max_line_bytes, on_message=on_message)
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.WriteTransport | None = None

    @property
    def pid(self) -> int | None:
        return None

    @property
    def running(self) -> bool:
        return self._writer is not None and not self._writer.is_closing()

    def _stdout(self) -> asyncio.StreamReader:
        assert self._reader is not None
        return self._reader

    def write_nowait(self, line: bytes) -> None:
        if self._writer is None or self._writer.is_closing():
            raise ChildUnavailableError(self._closed_message)
        # A pipe transport has no flow control of its own: a server that stops reading
        # would let the buffer grow until the container is out of memory.
        if self._writer.get_write_buffer_size() > _STDIN_BUFFER_LIMIT:
            raise ChildUnavailableError("the MCP server is not reading its stdin")
        self._writer.write(line)

    async def write(self, line: bytes) -> None:
        self.write_nowait(line)

    async def wait(self) -> int:
        return 0

    async def terminate(self, grace: float) -> None:
        if self._writer is not None:
            self._writer.close()


class FifoChild(StreamChild):
    """A stdio server in another container, reached through two FIFOs in a shared volume.

    The server container runs ``exec CMD <DIR/stdin >DIR/stdout`` (see
    ``docs/managed-mode.md``); the kubelet, not the adapter, starts and restarts it.
    ``start`` waits until a server process has both FIFOs open; the server's exit
    shows as end-of-file on ``stdout``; ``terminate`` closes our ends, which gives the
    server end-of-file on its stdin. There is no pid: the process is not ours.
    """

    _closed_message = "the MCP server container has not opened its stdin"

    def __init__(
        self,
        directory: str,
        *,
        max_line_bytes: int,
        on_message: Callable[[dict[str, Any]], None],
    ) -> None:
        super().__init__(f"fifo:{directory}", max_line_bytes=max_line_bytes, on_message=on_message)
        self._directory = directory

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        stdin_path = os.path.join(self._directory, STDIN_FIFO)
        stdout_path = os.path.join(self._directory, STDOUT_FIFO)
        # Opening the write end without blocking fails (ENXIO) until the server's shell has
        # opened its stdin: poll, so that stopping the adapter is never stuck in open().
        while True:
            try:
                write_fd = os.open(stdin_path, os.O_WRONLY | os.O_NONBLOCK)
                break
            except OSError as error:
                if error.errno != errno.ENXIO:
                    raise
            await asyncio.sleep(_FIFO_POLL_SECONDS)
        # The shell opens stdout right after stdin; this open returns as soon as it does.
        read_fd = await asyncio.to_thread(os.open, stdout_path, os.O_RDONLY)
        self._reader = asyncio.StreamReader(limit=self._max_line)
        protocol = asyncio.StreamReaderProtocol(self._reader)
        await loop.connect_read_pipe(lambda: protocol, os.fdopen(read_fd, "rb", buffering=0))
        self._writer, _ = await loop.connect_write_pipe(
            asyncio.Protocol, os.fdopen(write_fd, "wb", buffering=0)
        )


def _killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


class Supervisor:
    """Keeps one child running: restart with exponential backoff, give up on a crash loop."""

    def __init__(
        self,
        new_child: Callable[[], ChildProcess],
        config: AdapterConfig,
        *,
        on_started: Callable[[ChildProcess], Awaitable[None]],
        on_exited: Callable[[int | None], None],
    ) -> None:
        """``new_child`` makes each run's child (a :class:`ChildProcess`, or a
        :class:`FifoChild` in ``config.stdio_fifo_dir``): what it runs is its maker's, when
        and how often it runs is the supervisor's, by the restart and shutdown settings of
        ``config``."""
        self._new_child = new_child
        self._config = config
        self._on_started = on_started
        self._on_exited = on_exited
        self._restarts: list[float] = []
        self._stopping = False
        self.child: ChildProcess | None = None
        self.restart_count = 0

    async def run(self) -> None:
        """Run the child until ``stop``; raises CrashLoopError when restarts exceed the guard."""
        config = self._config
        while not self._stopping:
            child = self._new_child()
            returncode: int | None = None
            try:
                await child.start()
            except OSError as error:
                logger.error("Failed to start the MCP server %s: %s", child.command[0], error)
            else:
                self.child = child
                if config.stdio_fifo_dir is not None and config.child_per_session:
                    logger.debug("Connected to a new MCP server process: %s", child.command[0])
                elif config.stdio_fifo_dir is not None:
                    logger.info(
                        "Connected to the MCP server through FIFOs in %s", config.stdio_fifo_dir
                    )
                else:
                    logger.info(
                        "Started the MCP server (pid %d): %s", child.pid, " ".join(child.command)
                    )
                started: asyncio.Task[None] = asyncio.ensure_future(self._on_started(child))
                try:
                    await child.read_loop()
                    returncode = await child.wait()
                finally:
                    started.cancel()
                    self.child = None
                    await child.terminate(
                        0 if not self._stopping else config.shutdown_grace_seconds
                    )
            self._on_exited(returncode)
            if self._stopping:
                return
            now = time.monotonic()
            window = config.restart_window_seconds
            self._restarts = [t for t in self._restarts if now - t < window] + [now]
            # In FIFO mode the kubelet restarts the server container (with its own back-off);
            # the adapter only waits for the next one, so it never gives up.
            if config.stdio_fifo_dir is None and len(self._restarts) > config.max_restarts:
                raise CrashLoopError(
                    f"the MCP server exited {len(self._restarts)} times within {window:.0f}s"
                )
            backoff = config.restart_backoff_seconds * 2 ** (len(self._restarts) - 1)
            delay = min(backoff, MAX_BACKOFF_SECONDS)
            logger.warning("MCP server exited (code %s); restarting in %.1fs", returncode, delay)
            await asyncio.sleep(delay)
            self.restart_count += 1

    async def stop(self) -> None:
        """Stop for good: terminate the child's process group (SIGTERM, then SIGKILL)."""
        self._stopping = True
        child = self.child
        if child is not None:
            await child.terminate(self._config.shutdown_grace_seconds)

    async def kill_child(self, reason: str) -> None:
        """Kill the current child (it will be restarted), e.g. after a failed handshake."""
        child = self.child
        if child is not None:
            logger.warning("Killing the MCP server (pid %s): %s", child.pid, reason)
            await child.terminate(0)
