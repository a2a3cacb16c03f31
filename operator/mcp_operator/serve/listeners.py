"""2026-07-28 ``subscriptions/listen`` streams: what each one asked to hear, and the tagging.

Owns the record of one open listen stream and the two pure rules about it, for every
server side (the adapter and the bridge): which of the requested notification types the
server can honor (those its capabilities advertise — the adapter's child's, the bridge's own:
``listChanged`` per list, ``subscribe`` for resource updates), and whether a notification
belongs on the stream (its type was requested; for ``resources/updated``, its URI was named).
Every message on a stream carries the listen request's id under
``_meta["io.modelcontextprotocol/subscriptionId"]``. Leaves the HTTP stream and the fan-out
to the programs (``adapter.front_modern`` and ``adapter.router``, ``bridge.front`` and
``bridge.core``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from mcp_operator.serve.jsonrpc import RequestId
from mcp_operator.serve.sessions import StreamSink

SUBSCRIPTION_ID_META: Final = "io.modelcontextprotocol/subscriptionId"
ACKNOWLEDGED: Final = "notifications/subscriptions/acknowledged"
_LIST_CHANGED: Final = {
    "toolsListChanged": ("tools", "notifications/tools/list_changed"),
    "promptsListChanged": ("prompts", "notifications/prompts/list_changed"),
    "resourcesListChanged": ("resources", "notifications/resources/list_changed"),
}


def honored(requested: dict[str, Any], capabilities: dict[str, Any]) -> dict[str, Any]:
    """The subset of a ``subscriptions/listen`` filter that the child's capabilities support."""
    agreed: dict[str, Any] = {}
    for key, (capability, _method) in _LIST_CHANGED.items():
        offered = capabilities.get(capability)
        if requested.get(key) is True and isinstance(offered, dict) and offered.get("listChanged"):
            agreed[key] = True
    uris = requested.get("resourceSubscriptions")
    resources = capabilities.get("resources")
    if isinstance(uris, list) and isinstance(resources, dict) and resources.get("subscribe"):
        agreed["resourceSubscriptions"] = [uri for uri in uris if isinstance(uri, str)]
    return agreed


@dataclass(eq=False, slots=True)
class Listener:
    """One open ``subscriptions/listen`` stream."""

    subscription_id: RequestId
    stream: StreamSink
    methods: frozenset[str]
    """The list-changed notifications this stream agreed to carry."""
    uris: frozenset[str] = field(default_factory=frozenset)
    """The resources whose ``notifications/resources/updated`` it carries."""

    @classmethod
    def for_filter(
        cls, subscription_id: RequestId, stream: StreamSink, agreed: dict[str, Any]
    ) -> Listener:
        methods = frozenset(method for key, (_c, method) in _LIST_CHANGED.items() if key in agreed)
        return cls(
            subscription_id, stream, methods, frozenset(agreed.get("resourceSubscriptions", ()))
        )

    def wants(self, method: str, params: dict[str, Any]) -> bool:
        if method == "notifications/resources/updated":
            return params.get("uri") in self.uris
        return method in self.methods

    def tagged(self, message: dict[str, Any]) -> dict[str, Any]:
        """``message`` with this stream's subscription id in ``params._meta``."""
        params = message.get("params")
        params = dict(params) if isinstance(params, dict) else {}
        meta = params.get("_meta")
        params["_meta"] = {
            **(meta if isinstance(meta, dict) else {}),
            SUBSCRIPTION_ID_META: self.subscription_id,
        }
        return {**message, "params": params}

    def acknowledgement(self, agreed: dict[str, Any]) -> dict[str, Any]:
        """The first message on the stream."""
        return self.tagged(
            {"jsonrpc": "2.0", "method": ACKNOWLEDGED, "params": {"notifications": agreed}}
        )
