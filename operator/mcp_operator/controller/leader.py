"""Leader election, the loop: read the Lease, let :mod:`~mcp_operator.controller.lease`
decide, write what it decided; and run the operator only while leading.

:class:`Elector` owns the I/O of the election (through :mod:`mcp_operator.kube`:
a get, then a create or a replace guarded by ``resourceVersion``, so two
candidates that write at once cannot both win) and the timing of rounds:
every retry period while following, and while leading, with each renewal
bounded by what is left of the renew deadline.

:func:`lead` is the life cycle of one process: follow until elected, then run
the operator (kopf, the fleet) while holding the Lease; on a clean stop, stop
the operator, keep renewing until it has quiesced (its reconciles stopped, its
client closed: kopf's clean-up), and release the Lease right then -- not when
kopf has finished shutting down, some seconds later -- so a follower takes over
at once and never while this process may still write; when
renewal fails, stop the operator and report that leadership was lost, and
the caller exits (a Pod then restarts as a follower). Exiting rather than
pausing is client-go's choice too: nothing of the old term (a probe in
flight, a half-built schedule) survives into the next.

Why not kopf's peering: it is kopf's own ``KopfPeering`` objects with
priorities, not a ``coordination.k8s.io`` Lease (the convention that
platform teams' tooling and every other controller use), and a paused kopf
still holds its watches and memory. Starting kopf only once elected keeps
followers cheap: they hold no watch and no cache, and serve only health and
metrics (:mod:`mcp_operator.controller.endpoints`).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

from mcp_operator.controller.lease import LeaseRecord, decide, must_step_down, released
from mcp_operator.controller.settings import LeaderElectionSettings
from mcp_operator.kube import LEASES, Kube, KubeError

logger = logging.getLogger(__name__)


class ElectionError(RuntimeError):
    """The election cannot take place at all (the message says how to fix it)."""


def _utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class Elector:
    """One candidate in the election of ``settings.lease_namespace/lease_name``."""

    def __init__(
        self,
        kube: Kube,
        settings: LeaderElectionSettings,
        identity: str,
        *,
        on_change: Callable[[bool], None] | None = None,
        wall: Callable[[], datetime.datetime] = _utc_now,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kube = kube
        self.settings = settings
        self.identity = identity
        self._on_change = on_change
        self._wall = wall
        self._monotonic = monotonic
        self._seen: LeaseRecord | None = None
        self._seen_at = 0.0
        self._held: LeaseRecord | None = None
        self._last_renewed = 0.0
        self._last_error: str | None = None
        self.leading = False

    @property
    def lease(self) -> str:
        return f"{self.settings.lease_namespace}/{self.settings.lease_name}"

    async def acquire(self, stop: asyncio.Event) -> bool:
        """Follow until elected (True) or until ``stop`` is set (False)."""
        logger.info("Following Lease %s as %s", self.lease, self.identity)
        while not stop.is_set():
            if await self._round_logged():
                return True
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self.settings.retry_period_seconds)
        return False

    async def hold(self) -> None:
        """Renew while leading; return once leadership is lost (renewal failed for the
        renew deadline, or someone else holds the Lease)."""
        while True:
            await asyncio.sleep(self.settings.retry_period_seconds)
            left = self.settings.renew_deadline_seconds - (self._monotonic() - self._last_renewed)
            try:
                renewed = await asyncio.wait_for(self._round_logged(), timeout=max(left, 0.1))
            except TimeoutError:
                renewed = False
            if renewed:
                continue
            if self._held is None:
                logger.error("Lost Lease %s: another candidate holds it", self.lease)
                return
            if must_step_down(self._last_renewed, self._monotonic(), self.settings):
                logger.error(
                    "Lost Lease %s: not renewed for %.0f s",
                    self.lease,
                    self._monotonic() - self._last_renewed,
                )
                self._set_leading(False)
                return

    async def release(self) -> None:
        """Give the Lease up (a clean shutdown): followers need not wait for it to expire."""
        held, self._held = self._held, None
        self._set_leading(False)
        if held is None:
            return
        record = released(held, self._wall())
        try:
            await self.kube.replace(
                LEASES, record.manifest(self.settings.lease_name, self.settings.lease_namespace)
            )
        except KubeError as error:
            logger.warning("Could not release Lease %s: %s", self.lease, error)
            return
        logger.info("Released Lease %s", self.lease)

    # -- one round -----------------------------------------------------------------------

    async def _round_logged(self) -> bool:
        try:
            won = await self._round()
        except KubeError as error:
            message = f"{type(error).__name__}: {error}"
            if message != self._last_error:
                logger.warning("Could not read or write Lease %s: %s", self.lease, message)
            self._last_error = message
            return False
        self._last_error = None
        return won

    async def _round(self) -> bool:
        """One round of the election; True when this candidate holds the Lease after it."""
        settings = self.settings
        body = await self.kube.get(LEASES, settings.lease_namespace, settings.lease_name)
        current = LeaseRecord.of(body) if body is not None else None
        started = self._monotonic()
        if current is None or not current.same_as(self._seen):
            self._seen, self._seen_at = current, started
        chosen = decide(
            current,
            identity=self.identity,
            unchanged_for=started - self._seen_at,
            now=self._wall(),
            settings=settings,
        )
        if chosen.record is None:
            if self._held is not None:
                self._held = None  # someone else took the Lease: we are not the leader
                self._set_leading(False)
            return False
        manifest = chosen.record.manifest(settings.lease_name, settings.lease_namespace)
        try:
            if chosen.action == "create":
                written = await self.kube.create(LEASES, manifest)
            else:
                written = await self.kube.replace(LEASES, manifest)
        except KubeError as error:
            if error.status == 409:
                return False  # another candidate wrote first; the next round reads its record
            if error.status == 404 and chosen.action == "create":
                raise ElectionError(
                    f"Namespace {settings.lease_namespace} of the leader Lease does not exist: "
                    f"create it (kubectl create namespace {settings.lease_namespace}), choose "
                    "another with --leader-election-namespace, or run a single operator with "
                    "--no-leader-election"
                ) from None
            raise
        self._held = LeaseRecord.of(written)
        self._seen, self._seen_at = self._held, started
        self._last_renewed = started
        if chosen.action != "renew":
            logger.info(
                "Acquired Lease %s as %s (transition %d)",
                self.lease,
                self.identity,
                self._held.transitions,
            )
        self._set_leading(True)
        return True

    def _set_leading(self, leading: bool) -> None:
        if leading != self.leading:
            self.leading = leading
            if self._on_change is not None:
                self._on_change(leading)


async def lead(
    elector: Elector,
    operate: Callable[[asyncio.Event, asyncio.Event], Coroutine[Any, Any, None]],
    stop: asyncio.Event,
) -> bool:
    """Follow, then run ``operate`` while leading. True: ended by ``stop`` or by ``operate``
    returning (the Lease is released); False: leadership was lost (``operate`` is stopped
    through the event it was given, and the caller should exit).

    ``operate(operator_stop, quiesced)`` sets ``quiesced`` once it makes no more writes (its
    reconciles have stopped, its client is closed) though it may still be winding down.
    The Lease is renewed until then and released right then, so a follower takes over
    without waiting for the rest of the shutdown and never while this process may still
    write. ``operator_stop`` is set then too: kopf, stopped by SIGTERM itself, still has a
    task waiting on that flag, and gives such leftover tasks 5 s before cancelling them."""
    if not await elector.acquire(stop):
        return True
    operator_stop, quiesced = asyncio.Event(), asyncio.Event()
    operating = asyncio.create_task(operate(operator_stop, quiesced), name="operator")
    holding = asyncio.create_task(elector.hold(), name="leader-lease")
    stopping = asyncio.create_task(stop.wait(), name="stop-signal")
    quieting = asyncio.create_task(quiesced.wait(), name="operator-quiesced")
    try:
        # kopf handles SIGTERM itself (``stop`` is then never set): it quiesces, then returns.
        await asyncio.wait(
            {operating, holding, stopping, quieting}, return_when=asyncio.FIRST_COMPLETED
        )
        operator_stop.set()
        await asyncio.wait({operating, holding, quieting}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        operator_stop.set()
        stopping.cancel()
        quieting.cancel()
    lost = holding.done()
    if lost:
        logger.error("Stopping the operator: leadership of Lease %s was lost", elector.lease)
    else:
        holding.cancel()
    try:
        await asyncio.gather(holding, return_exceptions=True)
        if not lost:
            await elector.release()
    finally:
        await operating
    return not lost
