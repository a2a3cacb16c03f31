"""Image references, read as a container runtime reads them (pure).

``node:22`` is ``docker.io/library/node:22``; the first path component names a registry
only when it has a ``.`` or a ``:`` or is ``localhost``; a reference without tag or digest
means ``latest``; ``name:tag@sha256:...`` is pinned by its digest (the tag is only a label).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DOCKER_HUB = "docker.io"
DOCKER_HUB_API = "registry-1.docker.io"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REPOSITORY = re.compile(rf"^{_COMPONENT}(?:/{_COMPONENT})*$")
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_HOST = re.compile(r"^(?:[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*|\[[0-9A-Fa-f:]+\])(?::[0-9]{1,5})?$")


class InvalidReference(ValueError):
    """The image is not a reference a runtime could pull."""


@dataclass(frozen=True)
class Reference:
    """A normalised image reference."""

    registry: str
    """``host[:port]``; ``docker.io`` for Docker Hub."""
    repository: str
    tag: str | None
    digest: str | None

    @property
    def api_host(self) -> str:
        """Where the distribution API of the registry answers."""
        return DOCKER_HUB_API if self.registry == DOCKER_HUB else self.registry

    @property
    def manifest_reference(self) -> str:
        """What ``/v2/<repository>/manifests/<reference>`` asks for: the digest, else the tag."""
        return self.digest or self.tag or "latest"

    def __str__(self) -> str:
        text = f"{self.registry}/{self.repository}"
        if self.tag:
            text += f":{self.tag}"
        if self.digest:
            text += f"@{self.digest}"
        return text


def parse_reference(image: str) -> Reference:
    """Normalise ``image``; :class:`InvalidReference` when a runtime would refuse it."""
    rest, _, digest = image.partition("@")
    if digest and not _DIGEST.match(digest):
        raise InvalidReference(f"{image!r}: only sha256 digests of 64 hex digits are supported")
    first, slash, path = rest.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        registry, remainder = first, path
        if not _HOST.match(registry):
            raise InvalidReference(f"{image!r}: {registry!r} is not a registry host")
    else:
        registry, remainder = DOCKER_HUB, rest
    name, colon, tag = remainder.rpartition(":") if ":" in remainder else (remainder, "", "")
    if not colon:
        name, tag = remainder, ""
    if registry in (DOCKER_HUB, "index.docker.io"):
        registry = DOCKER_HUB
        if "/" not in name:
            name = f"library/{name}"
    if not _REPOSITORY.match(name):
        raise InvalidReference(f"{image!r}: {name!r} is not a repository name")
    if tag and not _TAG.match(tag):
        raise InvalidReference(f"{image!r}: {tag!r} is not a tag")
    return Reference(
        registry=registry,
        repository=name,
        tag=tag or (None if digest else "latest"),
        digest=digest or None,
    )
