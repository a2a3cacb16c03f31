"""The MCPServer fleet: every MCPServer this operator watches, each on its own worker.

What every kind shares (observing events, parsing once per generation, the worker, the
metrics, the status writer, ``InvalidSpec``, the end of an object) is
:class:`~mcp_operator.controller.kind.KindController`'s. What is the MCPServer's own is
wired here, each part owning one job:

- :class:`~mcp_operator.controller.worker.Worker` (through the kind controller): when
  each server is reconciled (at once, on its probe interval with jitter, with back-off
  while failing, sooner when woken) and how many probes run at once;
- :mod:`~mcp_operator.controller.mcpserver.reconcile`: what one reconcile
  does and decides;
- :mod:`~mcp_operator.controller.mcpserver.status`: what status says (pure), and what of
  it the fleet remembers between reconciles;
- :mod:`~mcp_operator.controller.mcpserver.wake`: which Secret or Deployment
  change wakes which server;
- :mod:`~mcp_operator.controller.mcpserver.listeners`: listening for
  ``tools/list_changed`` on servers that advertise it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from mcp_operator.api import MCPServer
from mcp_operator.controller.kind import KindController, Known, Reconciled
from mcp_operator.controller.mcpserver import destinations, reconcile
from mcp_operator.controller.mcpserver.auth import ProbeCredentials, no_subject
from mcp_operator.controller.mcpserver.data_path import DataPath
from mcp_operator.controller.mcpserver.listeners import Listeners
from mcp_operator.controller.mcpserver.pins import APPROVED_TOOLS_ANNOTATION
from mcp_operator.controller.mcpserver.status import events, probed_reason, remembered, status_patch
from mcp_operator.controller.mcpserver.wake import RolloutState, WakePolicy
from mcp_operator.controller.metrics import OperatorMetrics
from mcp_operator.controller.parsing import InvalidSpec, parse
from mcp_operator.controller.settings import FleetSettings
from mcp_operator.controller.worker import Clock, Next
from mcp_operator.kube import MCPSERVERS, Kube
from mcp_operator.kube.credentials import CredentialError
from mcp_operator.mcp.tokens import TokenError
from mcp_operator.oci.client import RegistryClient


class Fleet(KindController[MCPServer]):
    """Every MCPServer this operator watches, each with its own worker."""

    inputs_in_annotations = (APPROVED_TOOLS_ANNOTATION,)
    """A person approving changed tool definitions (``toolsPinning: strict``) re-probes."""

    def __init__(
        self,
        kube: Kube,
        settings: FleetSettings | None = None,
        *,
        clock: Clock | None = None,
        metrics: OperatorMetrics | None = None,
        data_path: DataPath | None = None,
    ) -> None:
        self.settings = settings or FleetSettings()
        super().__init__(
            kube,
            kind="MCPServer",
            resource=MCPSERVERS,
            transitions=events,
            schedule=self.settings.schedule,
            clock=clock,
            metrics=metrics,
            stamp={"admission": self.settings.admission},
        )
        self._wake = WakePolicy()
        self._listeners = Listeners(self.settings.listeners)
        self._registry = RegistryClient(
            self.settings.registry, egress=destinations.registry_policy(self.settings.egress)
        )
        self._credentials = ProbeCredentials(subject=self._own_token)
        """The probes' OAuth credentials by server uid, whose tokens outlive one probe."""
        self.data_path = data_path
        """The operator's side of managed servers' authentication (``None``: not wired,
        as in tests of the fleet alone)."""

    async def _own_token(self, audience: str) -> str:
        """The operator's own token for ``audience``: the subject of the probe's token
        exchanges (``spec.auth.tokenExchange``)."""
        tokens = self.data_path.tokens if self.data_path is not None else None
        if tokens is None:
            return await no_subject(audience)
        try:
            return await tokens.token(audience)
        except CredentialError as error:
            raise TokenError("AuthRequired", f"no token of the operator's own: {error}") from None

    # -- kopf side -------------------------------------------------------------------

    def deployment_changed(self, uid: str, state: RolloutState) -> None:
        """Reconcile a managed server now if its Deployment's rollout state moved."""
        if self._wake.woken_by_rollout(uid, state):
            self.wake(uid)

    def pod_deleted(self, pod: Mapping[str, Any]) -> None:
        """An AgentRun Pod is gone: the servers its tokens were for refuse them from now on
        (their access ConfigMaps are written at once)."""
        if self.data_path is None:
            return
        servers = set(self.data_path.pod_deleted(pod))
        for known in self.known():
            if (known.ref.namespace, known.ref.name) in servers:
                self.wake(known.ref.uid)

    def secret_changed(self, namespace: str, name: str) -> None:
        """Reconcile now every server in ``namespace`` that references Secret ``name``."""
        for uid in self._wake.woken_by_secret(namespace, name):
            self._listeners.stop(uid)  # it may hold a rotated-out credential
            self.wake(uid, changed=True)

    async def stop(self) -> None:
        """Cancel every worker and listener and wait for them to end."""
        await self._listeners.stop_all()
        await super().stop()
        await self._registry.aclose()

    # -- what the kind controller asks of an MCPServer --------------------------------

    def parse(self, body: Mapping[str, Any]) -> MCPServer | InvalidSpec:
        # Without the status: the fleet keeps what it needs of that apart (``remembered``),
        # and a parsed tool list per server would be most of the fleet's memory.
        return parse(MCPServer, {key: value for key, value in body.items() if key != "status"})

    def remember(self, status: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
        return remembered(status)

    def track(self, uid: str, parsed: MCPServer | InvalidSpec, *, new: bool) -> None:
        self._wake.track(uid, parsed)
        if not new:
            self._listeners.stop(uid)  # the target may have changed; the next probe re-arms it

    def ended(self, uid: str) -> None:
        self._wake.forget(uid)
        self._credentials.forget(uid)
        self._listeners.stop(uid)

    # -- one run -----------------------------------------------------------------------

    async def reconcile_object(self, server: Known[MCPServer], parsed: MCPServer) -> Reconciled:
        # One slot covers the probe and the status patch that reports it: a probe's result
        # waits in memory for the patch, so when the API server is the slower side, probes
        # wait for patches instead of a fleet's worth of results piling up in the operator.
        # The change's Events (a few hundred bytes each) are posted after the slot is free.
        previous = server.status
        async with self.limit:
            result = await reconcile.mcpserver(
                self.kube,
                parsed,
                probe_slots=contextlib.nullcontext(),  # held already
                render_settings=self.settings.render,
                registry=self._registry,
                egress_settings=self.settings.egress,
                probe_credentials=self._credentials,
                data_path=self.data_path,
                network_settings=self.settings.network,
                bridge_key_policy=self.settings.bridge_key_policy,
            )
            written = await self._write(server, parsed, result)
        if written is None:
            return None, Next(None, failed=True)
        await self.announce(server, previous, written)
        if result.outcome.kind == "failed":
            return written, Next(result.interval, failed=True)
        if result.watch is not None:
            uid = server.ref.uid
            self._listeners.listen(
                uid,
                result.watch,
                max_seconds=result.interval or 300.0,
                name=str(server.ref),
                on_change=lambda: self.wake(uid),
            )
        return written, Next(result.interval)

    async def _write(
        self, server: Known[MCPServer], parsed: MCPServer, result: reconcile.Result
    ) -> Mapping[str, Any] | None:
        """Patch the status the result calls for; the status as written, or ``None`` (its
        Events are the caller's to announce)."""
        patch = status_patch(
            server.status,
            result.outcome,
            generation=parsed.metadata.generation,
            url=result.url,
            now=self.now(),
        )
        if result.authentication is not None:
            patch["access"] = {"authentication": result.authentication}
        if result.probe_seconds is not None:
            probed = result.outcome.kind == "probed"
            self.metrics.probed(probed, probed_reason(result.outcome), result.probe_seconds)
        return await self.patch(server, patch)
