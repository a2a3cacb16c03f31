"""Resolve an AgentRun's server references: pure, from the MCPServers as the API server has them.

The reconciler reads each referenced MCPServer and hands them here; this module
decides, without I/O, what each reference amounts to and whether the run may
start:

- **found and permitted**: a server in another namespace is usable only when its
  ``spec.access.namespaces`` lists the run's namespace (or ``*``); one whose
  headers come from Secrets is never usable across namespaces, because the
  bridge reads Secret values from volumes of the run's own namespace; and in the
  run's namespace only when every such Secret is opted in for MCP servers
  (labelled ``mcp-operator.dev/for-mcp-servers=true``, the rule the MCPServer
  controller follows too: the run's Pod mounts them);
- **Ready**: the server's ``Ready`` condition is True for its current generation
  and it has a ``status.url``;
- **tools**: the server's ``status.tools`` narrowed by the run's own filters
  (which apply to original names and can only remove tools), so that name
  collisions between the run's servers are found before a Pod exists.

A required reference that is not usable blocks the run (``ServerNotFound``,
``ServerNotReady``, ``NotPermitted``, ``SecretNotShareable``); an optional one is
skipped and reported. Two usable servers exposing the same tool name block the
run too (``ToolNameCollision``): the bridge would have to drop one silently.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field

from mcp_operator import OPT_IN_LABEL, OPT_IN_VALUE
from mcp_operator.api import AgentRun, MCPServer, ServerRef, ToolStatus
from mcp_operator.mcp.naming import matches

RESOLVED = "Resolved"
SERVER_NOT_FOUND = "ServerNotFound"
SERVER_NOT_READY = "ServerNotReady"
NOT_PERMITTED = "NotPermitted"
SECRET_NOT_SHAREABLE = "SecretNotShareable"
TOOL_NAME_COLLISION = "ToolNameCollision"

ServerKey = tuple[str, str]
"""``(namespace, name)`` of an MCPServer."""


@dataclass(frozen=True)
class Binding:
    """What one ``spec.mcpServers`` entry resolved to."""

    ref: ServerRef
    namespace: str
    server: MCPServer | None
    reason: str
    """``Resolved`` when usable, else why not (a CamelCase reason)."""
    message: str
    tools: tuple[ToolStatus, ...] = ()
    """The server's listed tools that pass the run's filters (exposed names)."""

    @property
    def usable(self) -> bool:
        return self.reason == RESOLVED

    @property
    def name(self) -> str:
        return self.ref.name

    def resolved_server(self) -> MCPServer:
        """The server this reference resolved to (a ValueError when it resolved to none)."""
        if self.server is None:
            raise ValueError(f"reference {self.name} resolved to no server")
        return self.server

    @property
    def tool_count(self) -> int:
        """Tools exposed to the run: the server's count, or the filtered list's when narrowed."""
        if self.server is None or not self.usable:
            return 0
        status = self.server.status
        narrowed = bool(self.ref.tools_allow or self.ref.tools_deny)
        if not narrowed and status is not None and status.tool_count is not None:
            return status.tool_count
        return len(self.tools)


@dataclass(frozen=True)
class Resolution:
    """Every binding of a run, and what (if anything) keeps the run from starting."""

    bindings: tuple[Binding, ...]
    collisions: tuple[str, ...] = field(default=())
    """One sentence per exposed name offered by two servers."""

    @property
    def blocking(self) -> tuple[Binding, ...]:
        """Required references that are not usable."""
        return tuple(b for b in self.bindings if not b.usable and not b.ref.optional)

    @property
    def skipped(self) -> tuple[Binding, ...]:
        """Optional references left out of this run."""
        return tuple(b for b in self.bindings if not b.usable and b.ref.optional)

    @property
    def usable(self) -> tuple[Binding, ...]:
        return tuple(b for b in self.bindings if b.usable)

    @property
    def ready(self) -> bool:
        """Whether the run may start: nothing blocks and no names collide."""
        return not self.blocking and not self.collisions

    @property
    def tool_count(self) -> int:
        return sum(b.tool_count for b in self.usable)


def keys(run: AgentRun) -> list[ServerKey]:
    """The ``(namespace, name)`` of every server the run references, in spec order."""
    return [(run.server_namespace(ref), ref.name) for ref in run.spec.mcp_servers]


def header_secrets(servers: Mapping[ServerKey, MCPServer | None]) -> set[ServerKey]:
    """``(namespace, name)`` of every Secret the bridge reads for the servers (their headers'
    and their ``spec.auth`` client secrets)."""
    return {
        (namespace, name)
        for (namespace, _), server in servers.items()
        if server is not None
        for name in bridge_secrets(server)
    }


def bridge_secrets(server: MCPServer) -> list[str]:
    """The Secrets the bridge mounts for ``server``: its headers', then its client secret's."""
    names = [
        header.value_from.secret_key_ref.name
        for header in server.spec.headers or ()
        if header.value_from is not None
    ]
    ref = server.spec.auth.client_secret_ref if server.spec.auth is not None else None
    return names + ([ref.name] if ref is not None else [])


def resolve(
    run: AgentRun,
    servers: Mapping[ServerKey, MCPServer | None],
    opted_in_secrets: Set[ServerKey] | None = None,
) -> Resolution:
    """Resolve every reference of ``run``; ``servers`` holds what the API server returned,
    ``opted_in_secrets`` the header Secrets (of :func:`header_secrets`) that carry the
    opt-in label (``None``: all of them, for callers that checked it themselves)."""
    bindings = tuple(
        _bind(run, ref, servers.get((run.server_namespace(ref), ref.name)), opted_in_secrets)
        for ref in run.spec.mcp_servers
    )
    return Resolution(bindings, tuple(_collisions([b for b in bindings if b.usable])))


def _bind(
    run: AgentRun, ref: ServerRef, server: MCPServer | None, opted_in: Set[ServerKey] | None
) -> Binding:
    namespace = run.server_namespace(ref)
    where = f"MCPServer {namespace}/{ref.name}"
    if server is None:
        return Binding(ref, namespace, None, SERVER_NOT_FOUND, f"{where} does not exist")
    run_namespace = run.metadata.namespace or namespace
    if namespace != run_namespace:
        access = server.spec.access
        if access is None or not access.permits(run_namespace, namespace):
            return Binding(
                ref,
                namespace,
                server,
                NOT_PERMITTED,
                f"{where} does not permit runs from namespace {run_namespace} "
                "(its spec.access.namespaces)",
            )
        if bridge_secrets(server):
            return Binding(
                ref,
                namespace,
                server,
                SECRET_NOT_SHAREABLE,
                f"{where} sends Secret-backed headers or a client secret, which cannot be used "
                f"from namespace {run_namespace}",
            )
    callers = server.spec.access.service_account_names(namespace) if server.spec.access else None
    caller = f"{run_namespace}/{run.spec.agent.service_account_name or 'default'}"
    if server.spec.mode == "managed" and callers is not None and caller not in callers:
        return Binding(
            ref,
            namespace,
            server,
            NOT_PERMITTED,
            f"{where} does not permit the ServiceAccount {caller} "
            "(its spec.access.serviceAccounts)",
        )
    secrets = sorted(set(bridge_secrets(server)))
    missing = [
        name for name in secrets if opted_in is not None and (namespace, name) not in opted_in
    ]
    if missing:
        return Binding(
            ref,
            namespace,
            server,
            SECRET_NOT_SHAREABLE,
            f"{where} sends headers or a client secret from Secret {', '.join(missing)}, "
            "which is not labelled "
            f"{OPT_IN_LABEL}={OPT_IN_VALUE}",
        )
    ready, why = _readiness(server)
    if not ready:
        return Binding(ref, namespace, server, SERVER_NOT_READY, f"{where} is not Ready: {why}")
    tools = tuple(
        tool
        for tool in (server.status.tools if server.status else None) or ()
        if _passes(ref, tool.original_name)
    )
    return Binding(ref, namespace, server, RESOLVED, f"{where} is Ready", tools)


def _readiness(server: MCPServer) -> tuple[bool, str]:
    status = server.status
    if status is None:
        return False, "it has no status yet"
    ready = next((c for c in status.conditions or () if c.type == "Ready"), None)
    if ready is None:
        return False, "it has no Ready condition yet"
    if ready.status != "True":
        return False, f"{ready.reason}: {ready.message}"[:512]
    if status.observed_generation != server.metadata.generation:
        return False, "its status is from an older generation of its spec"
    if not status.url:
        return False, "it has no status.url"
    return True, ""


def _passes(ref: ServerRef, original_name: str) -> bool:
    allow: Sequence[str] = ref.tools_allow or ()
    if allow and not matches(allow, original_name):
        return False
    return not matches(ref.tools_deny or (), original_name)


def _collisions(bindings: Sequence[Binding]) -> list[str]:
    owners: dict[str, list[str]] = {}
    for binding in bindings:
        for tool in binding.tools:
            owners.setdefault(tool.name, []).append(f"{binding.namespace}/{binding.name}")
    return [
        f"tool {name} is offered by {' and '.join(servers)}"
        for name, servers in sorted(owners.items())
        if len(servers) > 1
    ]
