"""Client capabilities as our servers route by them: the names kept, what each request needs.

Shared by the adapter and the bridge, both of which forward a server's requests (sampling,
elicitation, roots) to the client that caused them, and only to a client that declared the
capability. Owns:

- ``declared_capabilities``: the handful of names routing needs, from a client's
  ``initialize`` capabilities or a 2026-07-28 request's envelope (never the client's own
  objects, which any client could make megabytes large);
- ``CAPABILITY_FOR_METHOD``: which capability a server→client request needs;
- ``capabilities_object``: the capabilities object that declares such names again (what
  the bridge tells a 2026-07-28 server its agent declared).

Pure: no I/O.
"""

from __future__ import annotations

import functools
from typing import Any, Final

ROUTED_CAPABILITIES: Final[dict[str, tuple[str, ...]]] = {
    "sampling": ("context", "tools"),
    "elicitation": ("form", "url"),
    "roots": ("listChanged",),
    "tasks": (),
}
"""Client capabilities worth remembering, with the sub-capabilities kept as ``name.sub``."""

CAPABILITY_FOR_METHOD: Final[dict[str, str]] = {
    "sampling/createMessage": "sampling",
    "elicitation/create": "elicitation",
    "roots/list": "roots",
}
"""Server→client request → the client capability it needs."""


def declared_capabilities(capabilities: object) -> frozenset[str]:
    """The routed capabilities a client declared: a handful of names.

    ``{"sampling": {"tools": {}}, "roots": {}}`` -> ``{"sampling", "sampling.tools", "roots"}``.
    A capability counts when its value is an object; a sub-capability when it is an
    object or ``true``. Anything else in the client's capabilities is dropped.
    """
    if not isinstance(capabilities, dict):
        return frozenset()
    names: list[str] = []
    for name, subs in ROUTED_CAPABILITIES.items():
        value = capabilities.get(name)
        if not isinstance(value, dict):
            continue
        names.append(name)
        names.extend(
            f"{name}.{sub}"
            for sub in subs
            if isinstance(value.get(sub), dict) or value.get(sub) is True
        )
    return frozenset(names)


@functools.lru_cache(maxsize=128)
def capabilities_object(names: frozenset[str]) -> dict[str, Any]:
    """The capabilities object that declares ``names`` (``declared_capabilities``' inverse, up
    to the objects' contents): ``{"sampling", "roots.listChanged"}`` ->
    ``{"sampling": {}, "roots": {"listChanged": True}}``. Made once per set (it is sent with
    every 2026-07-28 call the bridge relays): the object is shared, never to be changed."""
    declared: dict[str, Any] = {}
    for name in sorted(n for n in names if "." not in n and n in ROUTED_CAPABILITIES):
        value: dict[str, Any] = {}
        for sub in ROUTED_CAPABILITIES[name]:
            if f"{name}.{sub}" in names:
                value[sub] = True if sub == "listChanged" else {}
        declared[name] = value
    return declared


def required_capability(method: str, params: Any, names: frozenset[str]) -> str | None:
    """The capability a server→client request needs and ``names`` lack, else None (also
    None for a method that needs none).

    ``elicitation/create`` in URL mode needs ``elicitation.url``; in form mode a bare
    ``elicitation`` counts (the only shape before modes existed), one that names only
    ``url`` does not (the SDK's rule).
    """
    capability = CAPABILITY_FOR_METHOD.get(method)
    if capability is None:
        return None
    if capability not in names:
        return capability
    if capability == "elicitation":
        mode = params.get("mode") if isinstance(params, dict) else None
        if mode == "url":
            return None if "elicitation.url" in names else "elicitation.url"
        if "elicitation.url" in names and "elicitation.form" not in names:
            return "elicitation.form"
    return None
