"""What ``make demo`` applies, and how it reads the run it applied: pure functions only.

Everything the demo puts into the cluster lives in one namespace, :data:`NAMESPACE`, labelled
:data:`DEMO_LABEL` (so an operator of a shared cluster can leave it alone) and allowed private
destinations (its external server is a cluster Service):

- the operator itself, the chart installed as release :data:`RELEASE` watching only this
  namespace (:func:`chart_values`);
- ``everything-external``: server-everything over its own Streamable HTTP as a plain
  Deployment and Service the demo applies itself (:func:`external_server`), and an *external*
  MCPServer that points at it — the operator only probes it;
- ``everything-managed``: a *managed* stdio MCPServer from the server-everything image, which
  the operator runs with its stdio adapter;
- the AgentRun ``hello``: the demo agent (``images/demo-agent``) with ``echo`` from the managed
  server and ``get-sum`` from the external one, under PII mode ``block`` for arguments.

Reading the run back (:func:`phase`, :func:`audit_records`) is here too, so that it is tested
without a cluster. Running kubectl, helm and the waits is :mod:`mcp_operator.dev.demo`'s job.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mcp_operator.controller.render import restricted_container_security, restricted_pod_security

NAMESPACE = "mcp-demo"
RELEASE = "mcp-demo"
"""The chart's release name (in :data:`NAMESPACE`)."""
DEMO_LABEL = ("mcp-operator.dev/demo", "true")
PRIVATE_DESTINATIONS_LABEL = ("mcp-operator.dev/private-destinations", "allowed")
"""The opt-in that lets the operator probe the external server's ClusterIP (docs/security.md)."""

EVERYTHING_ENTRY = "/app/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
"""server-everything in its image (``images/server-everything``: ``ENTRYPOINT node <this>``)."""
EXTERNAL_PORT = 3001
MANAGED = "everything-managed"
EXTERNAL = "everything-external"
RUN = "hello"
MANAGED_TOOLS = ["echo"]
EXTERNAL_TOOLS = ["get-sum"]
EXPECTED_OUTCOMES = ["ok", "ok", "pii_blocked"]
"""The bridge's audit outcomes for the agent's three calls, in order."""

PHASE_BY_READY_REASON = {"PodPending": "PodPending", "Running": "Running"}


def _labels(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    return {DEMO_LABEL[0]: DEMO_LABEL[1], **(extra or {})}


def namespace() -> dict[str, Any]:
    labels = _labels({PRIVATE_DESTINATIONS_LABEL[0]: PRIVATE_DESTINATIONS_LABEL[1]})
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": NAMESPACE, "labels": labels},
    }


def split_reference(reference: str) -> tuple[str, str]:
    """``host/name:tag@sha256:…`` as the chart's (repository, tag).

    The chart writes ``repository:tag``; a tag of ``<tag>@sha256:…`` pins the digest (the
    kubelet pulls by digest, the tag is for people).
    """
    name, at, digest = reference.partition("@")
    slash, colon = name.rfind("/"), name.rfind(":")
    if not at or colon < slash:
        raise ValueError(f"{reference!r} is not name:tag@sha256:…")
    return name[:colon], f"{name[colon + 1 :]}@{digest}"


def chart_values(operator_image: str, dataplane_image: str) -> dict[str, Any]:
    """The chart's values: the operator from ``operator_image``, watching the demo only;
    managed servers' adapters from ``dataplane_image`` (the compiled data plane)."""
    repository, tag = split_reference(operator_image)
    return {
        "image": {"repository": repository, "tag": tag, "pullPolicy": "IfNotPresent"},
        "dataplaneImage": dataplane_image,
        "watchNamespaces": [NAMESPACE],
        "privateDestinations": "labelled",
        "logFormat": "text",
    }


def external_server(image: str) -> list[dict[str, Any]]:
    """server-everything over Streamable HTTP: a Deployment and a Service the demo owns.

    What an external MCPServer stands for: a server someone else runs. The operator does not
    deploy it; it only probes it at the URL the MCPServer gives.
    """
    selector = {"app.kubernetes.io/name": EXTERNAL}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": EXTERNAL, "namespace": NAMESPACE, "labels": _labels(selector)},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": _labels(selector)},
                "spec": {
                    "securityContext": restricted_pod_security(),
                    "automountServiceAccountToken": False,
                    "containers": [
                        {
                            "name": "server",
                            "image": image,
                            "args": ["streamableHttp"],
                            "env": [{"name": "PORT", "value": str(EXTERNAL_PORT)}],
                            "ports": [{"name": "mcp", "containerPort": EXTERNAL_PORT}],
                            "readinessProbe": {
                                "tcpSocket": {"port": "mcp"},
                                "periodSeconds": 1,
                            },
                            "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
                            "securityContext": restricted_container_security(),
                        }
                    ],
                    "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}],
                },
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": EXTERNAL, "namespace": NAMESPACE, "labels": _labels()},
        "spec": {
            "selector": selector,
            "ports": [{"name": "mcp", "port": EXTERNAL_PORT, "targetPort": "mcp"}],
        },
    }
    return [deployment, service]


def external_url(cluster_domain: str = "cluster.local") -> str:
    return f"http://{EXTERNAL}.{NAMESPACE}.svc.{cluster_domain}:{EXTERNAL_PORT}/mcp"


def mcpservers(image: str) -> list[dict[str, Any]]:
    """The managed stdio server (from ``image``) and the external one (:func:`external_url`).

    The managed one names its command (the image's own ``ENTRYPOINT`` and ``CMD``): without
    it the operator would read them from the image's registry, which an operator's Pod may
    not reach (a registry on a developer's loopback, given with ``--registry``).
    """
    common = {"toolsDeny": ["*Long*", "trigger-*", "get-env"], "probe": {"intervalSeconds": 30}}
    managed = {
        "mode": "managed",
        "transport": "stdio",
        "deployment": {"image": image, "command": ["node", EVERYTHING_ENTRY], "args": ["stdio"]},
        "toolsPrefix": "managed",
    }
    external = {"mode": "external", "url": external_url(), "toolsPrefix": "external"}
    return [
        _object("MCPServer", MANAGED, managed | common),
        _object("MCPServer", EXTERNAL, external | common),
    ]


def agentrun(agent_image: str) -> dict[str, Any]:
    """The run: the demo agent, one tool from each server, e-mail addresses blocked."""
    spec = {
        "mcpServers": [
            {"name": MANAGED, "toolsAllow": MANAGED_TOOLS},
            {"name": EXTERNAL, "toolsAllow": EXTERNAL_TOOLS},
        ],
        "agent": {"image": agent_image},
        "bridge": {"policy": {"pii": {"arguments": "block"}}},
        "activeDeadlineSeconds": 300,
    }
    return _object("AgentRun", RUN, spec)


def _object(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """One demo object of ours: in the demo's namespace, with the demo's labels."""
    return {
        "apiVersion": "mcp-operator.dev/v1alpha1",
        "kind": kind,
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": _labels()},
        "spec": spec,
    }


def phase(run: Mapping[str, Any]) -> str:
    """Where the run is, in one word: ``Succeeded``/``Failed`` once it ended, else the
    ``Ready`` reason (``PodPending``, ``Running``, or why it waits)."""
    conditions = {c.get("type"): c for c in (run.get("status") or {}).get("conditions") or ()}
    for ended in ("Succeeded", "Failed"):
        if (conditions.get(ended) or {}).get("status") == "True":
            return ended
    ready = conditions.get("Ready") or {}
    reason = str(ready.get("reason") or "Created")
    return PHASE_BY_READY_REASON.get(reason, reason)


def audit_records(bridge_log: str) -> list[dict[str, Any]]:
    """The audit lines in the bridge container's log (its JSON objects on standard output)."""
    records = []
    for line in bridge_log.splitlines():
        if not line.startswith("{"):
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and "outcome" in record:
            records.append(record)
    return records
