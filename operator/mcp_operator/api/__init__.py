"""The API of mcp-operator: pydantic models of MCPServer and AgentRun (``mcp-operator.dev``).

``crds/`` holds the schema; the models mirror it. Import the resources' models from here.

- ``mcpserver``       the MCPServer model: spec, status, and what a server reads
- ``auth``            MCPServer ``spec.auth``: the OAuth credentials a server's callers present
- ``access``          MCPServer ``spec.access``: who may use a server, how its endpoint checks them
- ``agentrun``        the AgentRun model: spec and status
- ``common``          what both kinds share: patterns, constrained types, conditions, call policy
- ``network``         ``spec.network`` of both kinds: who may reach a server, where Pods connect
- ``expressions``     authorization rules' CEL expressions, compiled once, checked at admission
- ``bridge``          the bridge's configuration file (``BridgeConfig``): the ConfigMap contract
- ``bridge_policy``   the file's call policy per server, and a run's tightening of it
- ``bridge_filters``  the file's filter layers: which tools, prompts and resources pass
"""

from mcp_operator.api.access import AccessSpec
from mcp_operator.api.agentrun import (
    AgentRun,
    AgentRunSpec,
    AgentRunStatus,
    AgentSpec,
    AuditSpec,
    BridgeSpec,
    ServerBinding,
    ServerRef,
)
from mcp_operator.api.auth import AuthSpec, ClientCredentialsSpec, SecretKeyRef, TokenExchangeSpec
from mcp_operator.api.common import (
    CallPolicySpec,
    Condition,
    EnvVar,
    EnvVarSource,
    KeySelector,
    ObjectFieldSelector,
    ObjectMeta,
    PiiMode,
    PiiPolicySpec,
    ResourceFieldSelector,
    ResourceRequirements,
    RetrySpec,
    TracingSpec,
)
from mcp_operator.api.mcpserver import (
    DeploymentSpec,
    HeaderSpec,
    HeaderValueFrom,
    MCPServer,
    MCPServerSpec,
    MCPServerStatus,
    ProbeSpec,
    SecretUse,
    ServerInfo,
    ToolAnnotations,
    ToolStatus,
    Transport,
)
from mcp_operator.api.network import (
    EgressRule,
    IPBlock,
    LabelSelector,
    NetworkPeer,
    NetworkPort,
    RunNetworkSpec,
    ServerNetworkSpec,
)

__all__ = [
    "AccessSpec",
    "AgentRun",
    "AgentRunSpec",
    "AgentRunStatus",
    "AgentSpec",
    "AuditSpec",
    "AuthSpec",
    "BridgeSpec",
    "CallPolicySpec",
    "ClientCredentialsSpec",
    "Condition",
    "DeploymentSpec",
    "EgressRule",
    "EnvVar",
    "EnvVarSource",
    "HeaderSpec",
    "HeaderValueFrom",
    "IPBlock",
    "KeySelector",
    "LabelSelector",
    "MCPServer",
    "MCPServerSpec",
    "MCPServerStatus",
    "NetworkPeer",
    "NetworkPort",
    "ObjectFieldSelector",
    "ObjectMeta",
    "PiiMode",
    "PiiPolicySpec",
    "ProbeSpec",
    "ResourceFieldSelector",
    "ResourceRequirements",
    "RetrySpec",
    "RunNetworkSpec",
    "SecretKeyRef",
    "SecretUse",
    "ServerBinding",
    "ServerInfo",
    "ServerNetworkSpec",
    "ServerRef",
    "TokenExchangeSpec",
    "ToolAnnotations",
    "ToolStatus",
    "TracingSpec",
    "Transport",
]
