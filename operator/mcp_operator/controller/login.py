"""What kopf's login handler answers: the operator's credential as a ``ConnectionInfo`` kopf
accepts again, and the pause before a repeated login.

kopf asks for credentials again when a request got a 401 *or* when its HTTP session broke
(an SSL stream an API server closed as it went down, a session already closed). Either way
it discards the ``ConnectionInfo`` it was using and refuses a login answer *equal* to one
it discarded: with nothing left it raises "Ran out of valid credentials" into every watch,
a failed watch stops kopf's orchestrator, and the operator stops reconciling (kopf's exit
then hangs on the watches it orphaned). A static token or client certificate that merely
lost its connection is still good, so every answer is made distinct (``priority``, which
orders several login handlers' answers and means nothing with our one) and kopf takes the
same credential back. A credential the API server really refuses is then asked for again
with a growing pause (none for the first repeat, then 1 s doubling to 30 s; a quiet
minute starts over), not in a loop of 401s as fast as the API server answers.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import kopf

from mcp_operator.kube.credentials import Credential

FIRST_PAUSE_SECONDS = 1.0
MAX_PAUSE_SECONDS = 30.0
QUIET_SECONDS = 60.0
"""A login this long after the previous one is a fresh start: no pause."""


class Logins:
    """Decides the pause before each of kopf's logins and makes each answer distinct (pure
    but for the clock)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._last: float | None = None
        self._repeats = 0
        self.count = 0
        """Answers given so far (the last one's ``priority``)."""

    def pause(self) -> float:
        """Seconds to wait before this login: none for the first, for the first repeat, or
        after :data:`QUIET_SECONDS` of quiet; 1 s for the next repeat, doubling to 30 s."""
        now = self._clock()
        quiet = self._last is None or now - self._last >= QUIET_SECONDS
        self._repeats = 0 if quiet else self._repeats + 1
        pause = (
            0.0
            if self._repeats <= 1
            else min(MAX_PAUSE_SECONDS, FIRST_PAUSE_SECONDS * 2 ** min(self._repeats - 2, 5))
        )
        self._last = now + pause
        return pause

    def connection_info(self, credential: Credential) -> kopf.ConnectionInfo:
        """``credential`` as kopf's ``ConnectionInfo``, distinct from every earlier answer."""
        self.count += 1
        return kopf.ConnectionInfo(
            server=credential.server,
            ca_data=credential.ca_pem,
            insecure=credential.insecure or None,
            token=credential.token,
            scheme="Bearer" if credential.token else None,
            certificate_data=(
                credential.certificate.certificate_pem if credential.certificate else None
            ),
            private_key_data=credential.certificate.key_pem if credential.certificate else None,
            proxy_url=credential.proxy,
            expiration=credential.expires_at,
            priority=self.count,
        )
