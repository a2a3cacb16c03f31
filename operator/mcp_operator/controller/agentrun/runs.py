"""The AgentRun controller: every AgentRun this operator watches, each on its own worker.

What every kind shares (observing events, parsing once per generation, the worker, the
metrics, the status writer, ``InvalidSpec``, the end of an object) is
:class:`~mcp_operator.controller.kind.KindController`'s. What is the AgentRun's own:

- :mod:`~mcp_operator.controller.agentrun.reconcile`: what one pass does, and when the
  run is over (``ttlSecondsAfterFinished``: the controller deletes it, and its worker
  ends by the pass's return value);
- :mod:`~mcp_operator.controller.agentrun.status`: what status says (pure);
- the wake index here: which runs a change of an MCPServer (its creation, its
  status, its access list) or of a run's Pod wakes.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from mcp_operator.api import AgentRun
from mcp_operator.controller.agentrun import reconcile, resolve
from mcp_operator.controller.agentrun.status import events
from mcp_operator.controller.kind import KindController, Known, Reconciled
from mcp_operator.controller.metrics import OperatorMetrics
from mcp_operator.controller.parsing import InvalidSpec, parse
from mcp_operator.controller.render import metrics_access
from mcp_operator.controller.settings import AgentRunSettings
from mcp_operator.controller.worker import Clock, Next
from mcp_operator.kube import AGENTRUNS, Kube
from mcp_operator.kube.credentials import CredentialError
from mcp_operator.kube.identity import IssuerKeys

logger = logging.getLogger(__name__)


class Runs(KindController[AgentRun]):
    """Every AgentRun this operator watches, each with its own worker."""

    def __init__(
        self,
        kube: Kube,
        settings: AgentRunSettings | None = None,
        *,
        clock: Clock | None = None,
        metrics: OperatorMetrics | None = None,
        issuer: IssuerKeys | None = None,
    ) -> None:
        """``issuer``: the cluster's ServiceAccount issuer keys, with which each bridge checks
        who may read its ``/metrics``; without them a bridge's ``/metrics`` is not guarded
        (tests that render runs alone)."""
        self.settings = settings or AgentRunSettings()
        self.issuer = issuer
        super().__init__(
            kube,
            kind="AgentRun",
            resource=AGENTRUNS,
            transitions=events,
            schedule=self.settings.schedule,
            clock=clock,
            metrics=metrics,
            stamp={"admission": self.settings.admission},
        )
        self._servers: dict[str, frozenset[resolve.ServerKey]] = {}
        """Run uid → the MCPServers it references (a change of one wakes the run)."""

    # -- kopf side -------------------------------------------------------------------

    def server_changed(self, namespace: str, name: str) -> None:
        """Reconcile now every run that references MCPServer ``namespace/name``."""
        for uid, servers in list(self._servers.items()):
            if (namespace, name) in servers:
                self.wake(uid, changed=True)

    def pod_changed(self, body: Mapping[str, Any]) -> None:
        """Reconcile the run that owns this Pod (its phase decides the run's status)."""
        for owner in (body.get("metadata") or {}).get("ownerReferences") or ():
            if owner.get("kind") == "AgentRun" and owner.get("controller"):
                self.wake(str(owner.get("uid")))

    # -- what the kind controller asks of an AgentRun ---------------------------------

    def parse(self, body: Mapping[str, Any]) -> AgentRun | InvalidSpec:
        return parse(AgentRun, body)

    def track(self, uid: str, parsed: AgentRun | InvalidSpec, *, new: bool) -> None:
        """Remember which MCPServers the run references (an invalid run references none)."""
        keys = resolve.keys(parsed) if isinstance(parsed, AgentRun) else []
        self._servers[uid] = frozenset(keys)

    def ended(self, uid: str) -> None:
        self._servers.pop(uid, None)

    # -- one run -----------------------------------------------------------------------

    async def _metrics_access(self) -> dict[str, Any] | None:
        """Who may read the bridges' ``/metrics``: the issuer's keys (fetched every few
        minutes, :class:`~mcp_operator.kube.identity.IssuerKeys`) and the scrapers; keys that
        cannot be read leave a file that refuses every scrape."""
        if self.issuer is None:
            return None
        try:
            found = await self.issuer.current()
        except CredentialError as error:
            logger.warning("Bridges refuse every scrape of /metrics: %s", error)
            return metrics_access(None, None, self.settings.metrics_scrapers)
        return metrics_access(found.issuer, found.jwks, self.settings.metrics_scrapers)

    async def reconcile_object(self, run: Known[AgentRun], parsed: AgentRun) -> Reconciled:
        done = await reconcile.reconcile(
            self.kube,
            parsed,
            dict(run.status or {}),
            self.settings.render,
            now=self.clock.now(),
            network_settings=self.settings.network,
            refused_endpoints=self.settings.refused_endpoints,
            metrics_access=await self._metrics_access(),
        )
        written = await self.write(run, done.patch)
        if written is None:
            return None, Next(None, failed=True)
        if done.delete:
            return written, await self.delete(run, "finished more than ttlSecondsAfterFinished ago")
        return written, Next(done.delay)
