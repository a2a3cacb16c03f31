"""What the operator needs from an image's configuration, and how a Pod combines it.

Pure: parsed JSON in, frozen values out. :func:`parse_config` reads an OCI or Docker
image configuration blob; :func:`pick_platform` chooses a manifest from a multi-arch
index; :func:`container_argv` combines ``ENTRYPOINT``/``CMD`` with a Pod's ``command``
and ``args`` exactly as Kubernetes does; :func:`numeric_user` says which UID/GID the
image's ``USER`` names, when a number does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


class ImageConfigError(ValueError):
    """The registry answered, but what it holds cannot be run as asked (no guess is made)."""


@dataclass(frozen=True)
class ImageConfig:
    """An image's ``ENTRYPOINT``, ``CMD`` and ``USER``, and the manifest digest they came from."""

    digest: str
    """``sha256:...`` of the image manifest (the platform's, not the index's)."""
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    user: str = ""
    index_digest: str = ""
    """``sha256:...`` of the multi-arch index the manifest was picked from, if any: the digest
    a ``repository@digest`` reference names, so that every platform's node pulls the same."""

    @property
    def pinned_digest(self) -> str:
        """The digest to pin the Pod's image to (the index's when there is one)."""
        return self.index_digest or self.digest


def parse_config(blob: Mapping[str, Any], digest: str) -> ImageConfig:
    """The runtime part of an image configuration blob (``config.Entrypoint`` and friends)."""
    runtime = blob.get("config") or {}
    if not isinstance(runtime, Mapping):
        raise ImageConfigError("the image configuration's config is not an object")
    return ImageConfig(
        digest=digest,
        entrypoint=_strings(runtime.get("Entrypoint"), "Entrypoint"),
        cmd=_strings(runtime.get("Cmd"), "Cmd"),
        user=_string(runtime.get("User"), "User"),
    )


def pick_platform(index: Mapping[str, Any], os: str, architecture: str) -> Mapping[str, Any]:
    """The manifest descriptor for ``os``/``architecture`` in an index (variant ignored, the
    first match wins, as runtimes do for a plain architecture)."""
    offered = []
    for descriptor in index.get("manifests") or ():
        platform = descriptor.get("platform") or {}
        offered.append(f"{platform.get('os')}/{platform.get('architecture')}")
        if platform.get("os") == os and platform.get("architecture") == architecture:
            return dict(descriptor)
    raise ImageConfigError(
        f"the image has no {os}/{architecture} variant (it offers: "
        f"{', '.join(sorted(set(offered))) or 'none'})"
    )


def container_argv(
    config: ImageConfig, command: Sequence[str] | None, args: Sequence[str] | None
) -> list[str]:
    """The process a container runtime starts, by the Pod's rules: ``command`` replaces
    ``ENTRYPOINT`` and ``CMD``; ``args`` alone replaces ``CMD``; neither keeps both."""
    if command:
        argv = [*command, *(args or ())]
    elif args:
        argv = [*config.entrypoint, *args]
    else:
        argv = [*config.entrypoint, *config.cmd]
    if not argv:
        raise ImageConfigError("the image has neither ENTRYPOINT nor CMD: set deployment.command")
    return argv


_NUMERIC_USER = re.compile(r"^(\d+)(?::(\d+))?$")


def numeric_user(user: str) -> tuple[int, int | None] | None:
    """UID and GID of a ``USER`` written as numbers (``1000`` or ``1000:1000``), else None:
    a name needs the image's ``/etc/passwd``, which the registry's configuration lacks."""
    match = _NUMERIC_USER.match(user.strip())
    if match is None:
        return None
    gid = match.group(2)
    return int(match.group(1)), int(gid) if gid is not None else None


def _strings(value: Any, field: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ImageConfigError(f"the image configuration's {field} is not a list of strings")
    return tuple(value)


def _string(value: Any, field: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ImageConfigError(f"the image configuration's {field} is not a string")
    return value
