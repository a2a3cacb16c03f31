"""Where the bridge container finds its secrets and tokens: one directory per Secret or server.

Pure. This module owns the layout of the files the bridge reads besides its configuration:
the directory of each Secret whose keys it sends (servers' headers, OAuth client secrets, the
run's approval webhook key), of each projected ServiceAccount token it presents to a managed
server that checks Kubernetes tokens (its audience names that server), and of each subject
token it exchanges (RFC 8693). The configuration names these files
(:mod:`.configmap`); the Pod mounts them into the bridge container only (:mod:`.render`).
"""

from __future__ import annotations

from mcp_operator.api import AgentRun, MCPServer
from mcp_operator.api.agentrun import ApprovalWebhookSpec
from mcp_operator.controller.agentrun.resolve import Binding, Resolution
from mcp_operator.controller.mcpserver.render import authentication as server_authentication

SECRETS_DIR = "/var/run/mcp-bridge/secrets"
TOKENS_DIR = "/var/run/mcp-bridge/tokens"
EXCHANGE_DIR = "/var/run/mcp-bridge/exchange"
"""Where the run's projected tokens for token exchanges are mounted (bridge container only)."""
TOKEN_FILE = "token"


def secret_mounts(resolution: Resolution, run: AgentRun | None = None) -> dict[str, str]:
    """Secret name → the directory the bridge reads its keys from (usable servers' headers
    and OAuth client secrets, and the run's approval webhook key)."""
    names = {
        header.value_from.secret_key_ref.name
        for binding in resolution.usable
        for header in binding.resolved_server().spec.headers or ()
        if header.value_from is not None
    } | {name for binding in resolution.usable if (name := _auth_secret(binding.resolved_server()))}
    webhook = approval_webhook(run) if run is not None else None
    if webhook is not None:
        names.add(webhook.secret_ref.name)
    return {name: f"{SECRETS_DIR}/{name}" for name in sorted(names)}


def approval_webhook(run: AgentRun) -> ApprovalWebhookSpec | None:
    """The run's approval webhook, when the bridge runs and has one."""
    approval = run.spec.bridge.approval
    return approval.webhook if approval is not None else None


def _auth_secret(server: MCPServer) -> str | None:
    """The Secret of the client secret the bridge sends to ``spec.auth``'s token endpoint."""
    ref = server.spec.auth.client_secret_ref if server.spec.auth is not None else None
    return ref.name if ref is not None else None


def exchange_mounts(resolution: Resolution) -> dict[tuple[str, str], tuple[str, str]]:
    """``(namespace, name)`` of each usable server whose ``spec.auth`` is a token exchange →
    the directory of the run's projected token that the bridge exchanges for it (the subject
    token) and that token's audience (what the authorization server expects)."""
    mounts: dict[tuple[str, str], tuple[str, str]] = {}
    for binding in resolution.usable:
        server = binding.resolved_server()
        directory = exchange_mount(binding)
        if directory is not None and server.spec.auth and server.spec.auth.token_exchange:
            audience = server.spec.auth.token_exchange.effective_subject_token_audience
            mounts[(binding.namespace, server.metadata.name)] = (directory, audience)
    return mounts


def exchange_mount(binding: Binding) -> str | None:
    """The directory of the subject token of ``binding``'s token exchange, if it has one."""
    server = binding.resolved_server()
    if server.spec.auth is None or server.spec.auth.token_exchange is None:
        return None
    return f"{EXCHANGE_DIR}/{binding.namespace}/{server.metadata.name}"


def token_mounts(resolution: Resolution) -> dict[tuple[str, str], str]:
    """``(namespace, name)`` of each usable server that authenticates with Kubernetes tokens
    → the directory of the bridge's projected token for it."""
    return {
        (binding.namespace, server.metadata.name): (
            f"{TOKENS_DIR}/{binding.namespace}/{server.metadata.name}"
        )
        for binding in resolution.usable
        if _authenticates(server := binding.resolved_server())
    }


def _authenticates(server: MCPServer) -> bool:
    """Whether the server's endpoint checks Kubernetes tokens (so the bridge needs one)."""
    return server.spec.mode == "managed" and server_authentication(server) == "kubernetes"
