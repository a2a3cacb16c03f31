"""The adapter's inbound authentication, built from its configuration.

Owns the step from ``--auth`` and ``--access-config`` to the gate every request of the HTTP
front passes (``serve.auth.gate``): the access file read at start (a missing or bad file is
an error then), the OIDC key fetcher when the configuration names a ``jwksURL``, refusals
counted in the adapter's metrics, the mode on its gauge, and ``--auth none`` logged as a
warning.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, cast

from mcp_operator.serve.auth.access import AccessFile
from mcp_operator.serve.auth.gate import AuthGate, AuthMode
from mcp_operator.serve.auth.jwks import JwksFetcher

if TYPE_CHECKING:
    from mcp_operator.adapter.config import AdapterConfig
    from mcp_operator.adapter.metrics import AdapterMetrics

logger = logging.getLogger("mcp_operator.adapter")


def build_gate(config: AdapterConfig, metrics: AdapterMetrics) -> AuthGate:
    """The gate of ``config``, counting into ``metrics``. Raises ``ValueError`` (an
    ``AccessConfigError`` for the file) with a message for the command line."""
    mode = cast(AuthMode, config.auth)
    metrics.auth_mode.labels(mode).set(1)
    if mode == "none":
        logger.warning(
            "Serving without authentication (--auth none): every caller that reaches the "
            "port may call every tool"
        )
        return AuthGate("none", None)
    if config.access_config is None:
        raise ValueError(
            f"--auth {mode} needs --access-config PATH (or --auth none to serve every caller "
            "unauthenticated)"
        )
    access = AccessFile(config.access_config, clock=time.monotonic)
    jwks = None
    oidc = access.config.oidc
    if mode == "oidc" and oidc is not None and oidc.jwks is None and oidc.jwks_url:
        jwks = JwksFetcher(oidc.jwks_url, clock=time.monotonic)
    logger.info("Authenticating callers (--auth %s, %s)", mode, config.access_config)
    return AuthGate(mode, access, count=metrics.refused, jwks=jwks)
