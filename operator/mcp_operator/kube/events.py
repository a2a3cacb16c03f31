"""Events about the operator's objects: what one says, and under which name.

This module owns the body of an Event (type, reason, a message cut to 1024 characters, the
operator as its source, a name that is unique and stays the same across retries). Pure:
posting it, and retrying while the API server is away, is
:meth:`~mcp_operator.kube.client.KubeClient.post_event`'s.
"""

from __future__ import annotations

import datetime
import os
import uuid
from collections.abc import Mapping
from typing import Any

from mcp_operator import FIELD_MANAGER


def event_body(
    involved: Mapping[str, Any], *, type_: str, reason: str, message: str
) -> dict[str, Any]:
    """An Event about ``involved`` (an object body), in its namespace (``default`` when it
    has none)."""
    metadata = involved.get("metadata", {})
    namespace = metadata.get("namespace") or "default"
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    event: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            # Event names are at most 253 characters; the object's name may be too.
            "name": f"{str(metadata.get('name', 'object'))[:236]}.{uuid.uuid4().hex[:16]}",
            "namespace": namespace,
        },
        "involvedObject": {
            "apiVersion": involved.get("apiVersion"),
            "kind": involved.get("kind"),
            "name": metadata.get("name"),
            "namespace": namespace,
            "uid": metadata.get("uid"),
            "resourceVersion": metadata.get("resourceVersion"),
        },
        "type": type_,
        "reason": reason,
        "message": message[:1024],
        "source": {"component": FIELD_MANAGER},
        "reportingComponent": FIELD_MANAGER,
        "reportingInstance": os.environ.get("HOSTNAME", FIELD_MANAGER),
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
    return event
