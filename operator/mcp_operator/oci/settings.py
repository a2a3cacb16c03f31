"""How the operator talks to registries: one frozen group of settings (pure, no I/O)."""

from __future__ import annotations

import platform as _platform
from dataclasses import dataclass, field

_ARCHITECTURES = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


def own_platform() -> tuple[str, str]:
    """The operator's own ``linux/<architecture>``, in the OCI names (``amd64``, ``arm64``)."""
    machine = _platform.machine().lower()
    return "linux", _ARCHITECTURES.get(machine, machine)


@dataclass(frozen=True)
class RegistrySettings:
    """How the operator talks to registries."""

    platform: tuple[str, str] = field(default_factory=own_platform)
    """``os``/``architecture`` picked from a multi-arch index: the operator's own platform,
    which is the nodes' in a cluster of one architecture."""

    insecure_hosts: frozenset[str] = frozenset()
    """``host[:port]`` registries spoken to over plain HTTP (a local test registry)."""

    allowed_hosts: frozenset[str] = frozenset()
    """``host[:port]`` patterns (``*`` globs) of the registries the operator may ask at all;
    empty allows every registry. Others fail with ``ImageRegistryNotAllowed``, unasked."""

    tag_ttl_seconds: float = 300.0
    """How long a tag's answer is trusted before the registry is asked again."""

    timeout_seconds: float = 10.0
    """Each request's connect and read timeout."""

    cache_entries: int = 512
    """Configurations kept (least recently used first out)."""


def host_list(text: str) -> frozenset[str]:
    """``host:port,host2`` (a flag's value) as a set of hosts."""
    return frozenset(part.strip() for part in text.split(",") if part.strip())
