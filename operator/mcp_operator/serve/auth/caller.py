"""The verified caller of a request: what the endpoint knows about who asks, never the token.

A :class:`Caller` is built only from verified claims (``tokens``) or stands for the explicit
absence of authentication (``--auth none``: :data:`ANONYMOUS`). Its :meth:`Caller.describe`
is the one way it is written in logs and refusals; :meth:`Caller.to_dict` in audit lines.
:data:`CURRENT_CALLER` holds the caller of the request being served.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import Literal

CallerKind = Literal["serviceaccount", "oidc", "anonymous"]


@dataclass(frozen=True, slots=True)
class Caller:
    """Who asks: a Kubernetes ServiceAccount (with its Pod when the token is bound to one),
    an OIDC subject, or nobody known (authentication off)."""

    kind: CallerKind
    namespace: str | None = None
    service_account: str | None = None
    pod: str | None = None
    subject: str | None = None
    """The token's ``sub``: ``system:serviceaccount:<ns>:<name>`` or the OIDC subject."""
    pod_uid: str | None = None
    issuer: str | None = None

    def describe(self) -> str:
        """Safe words naming the caller (no token, no claim beyond its identity)."""
        if self.kind == "serviceaccount":
            words = f"system:serviceaccount:{self.namespace}:{self.service_account}"
            return f"{words} (pod {self.pod})" if self.pod else words
        if self.kind == "oidc":
            return f"oidc:{self.issuer}#{self.subject}"
        return "anonymous"

    @property
    def key(self) -> str:
        """The identity sessions are counted by (``serve.sessions.CallerKey``) and
        a legacy session is bound to: the same person in every Pod of theirs counts once."""
        if self.kind == "serviceaccount":
            return f"sa:{self.namespace}/{self.service_account}"
        if self.kind == "oidc":
            return f"oidc:{self.issuer}#{self.subject}"
        return ""

    def to_dict(self) -> dict[str, str]:
        """The caller for an audit line (absent fields left out)."""
        fields = {
            "kind": self.kind,
            "namespace": self.namespace,
            "serviceAccount": self.service_account,
            "pod": self.pod,
            "subject": self.subject if self.kind == "oidc" else None,
        }
        return {name: value for name, value in fields.items() if value is not None}


ANONYMOUS = Caller(kind="anonymous")
"""The caller of every request when authentication is off (``--auth none``)."""


CURRENT_CALLER: ContextVar[Caller] = ContextVar("mcp_operator_caller", default=ANONYMOUS)
"""The verified caller of the request being served: set by the gate in the request's own task,
so that what the request causes there (an audit line, say) knows who asked."""
