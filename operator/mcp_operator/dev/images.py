"""Our images as ``make images`` built them, and pushing them to a registry.

``hack/build-images.sh`` builds each image of :data:`IMAGES` (the operator's from the
Dockerfile, the data plane's, the MCP servers' and the demo agent's from
``images/<name>/Dockerfile``) into
an OCI archive, ``$MCP_OPERATOR_CACHE/images/<name>.oci.tar``, and records it in
``index.json`` beside them: ``{"<name>": {"archive": "<path>", "tag": "<16 hex>"}}``, the
tag being the hash of the build's inputs (:mod:`mcp_operator.dev.image_inputs`). This module
owns that index: :func:`built` reads it, :func:`push` puts images into a registry with
crane (``make image-tools`` builds it into the cache's ``bin``), and the script records
each build through ``python -m mcp_operator.dev.images record``. Building is the script's.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import re
import subprocess
import tarfile
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp_operator.dev.processes import BIN_DIR, CACHE_DIR

IMAGES = (
    "mcp-operator",
    "mcp-dataplane",
    "server-everything",
    "mcp-server-time",
    "mcp-hello-server",
    "demo-agent",
)
"""Every image ``make images`` builds."""
IMAGES_DIR = CACHE_DIR / "images"
INDEX = IMAGES_DIR / "index.json"
PUSH_TIMEOUT_SECONDS = 300.0
_TAG = re.compile(r"[0-9a-f]{16}")


class ImagesNotBuiltError(RuntimeError):
    """An image is not in the index, or its archive is gone; the message says to run
    ``make images``."""


@dataclass(frozen=True)
class BuiltImage:
    """One image as built: its name, its OCI archive, and its tag (the inputs' hash)."""

    name: str
    archive: Path
    tag: str


def parse_index(document: Any, *, source: str = "index.json") -> dict[str, BuiltImage]:
    """The images an index document names; a malformed entry is an error naming it."""
    if not isinstance(document, dict):
        raise ImagesNotBuiltError(f"{source} is not a JSON object; run `make images`")
    images: dict[str, BuiltImage] = {}
    for name, entry in document.items():
        archive = entry.get("archive") if isinstance(entry, dict) else None
        tag = entry.get("tag") if isinstance(entry, dict) else None
        if not isinstance(archive, str) or not isinstance(tag, str) or not _TAG.fullmatch(tag):
            raise ImagesNotBuiltError(
                f"{source}: entry {name!r} needs an archive path and a 16-hex tag; "
                "run `make images`"
            )
        images[name] = BuiltImage(name, Path(archive), tag)
    return images


def with_entry(document: Mapping[str, Any], image: BuiltImage) -> dict[str, Any]:
    """``document`` with ``image`` recorded in it (other entries kept, names sorted)."""
    updated = dict(document)
    updated[image.name] = {"archive": str(image.archive), "tag": image.tag}
    return dict(sorted(updated.items()))


def _read(index: Path) -> dict[str, BuiltImage]:
    try:
        document = json.loads(index.read_text())
    except FileNotFoundError:
        missing = f"no images built ({index} is missing); run `make images`"
        raise ImagesNotBuiltError(missing) from None
    except json.JSONDecodeError as error:
        raise ImagesNotBuiltError(f"{index} is not JSON ({error}); run `make images`") from None
    return parse_index(document, source=str(index))


def built(names: Iterable[str] = IMAGES, *, index: Path = INDEX) -> dict[str, BuiltImage]:
    """The built images of ``names`` (all of :data:`IMAGES` by default), by name.

    Raises :class:`ImagesNotBuiltError`, naming ``make images``, when one is not in the
    index or its archive is missing.
    """
    recorded = _read(index)
    wanted = list(names)
    absent = [name for name in wanted if name not in recorded]
    present = [recorded[name] for name in wanted if name in recorded]
    gone = [str(image.archive) for image in present if not image.archive.is_file()]
    if absent:
        raise ImagesNotBuiltError(f"not built: {', '.join(absent)} (in {index}); run `make images`")
    if gone:
        raise ImagesNotBuiltError(f"image archives missing: {', '.join(gone)}; run `make images`")
    return {name: recorded[name] for name in wanted}


def plain_http(registry_host: str) -> bool:
    """Whether ``registry_host`` (``host[:port]``) is on loopback, where we speak plain HTTP."""
    host = registry_host.rsplit(":", 1)[0] if not registry_host.endswith("]") else registry_host
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _crane(*args: str, insecure: bool) -> str:
    crane = BIN_DIR / "crane"
    if not os.access(crane, os.X_OK):
        raise ImagesNotBuiltError(f"crane is not built in {BIN_DIR}; run `make image-tools`")
    argv = [str(crane), *(["--insecure"] if insecure else []), *args]
    result = subprocess.run(
        argv, capture_output=True, text=True, check=False, timeout=PUSH_TIMEOUT_SECONDS
    )
    if result.returncode != 0:
        raise RuntimeError(f"crane {' '.join(args)} failed: {result.stderr.strip()}")
    return result.stdout.strip()


def push(
    registry_host: str,
    names: Iterable[str] | None = None,
    *,
    insecure: bool | None = None,
    index: Path = INDEX,
) -> dict[str, str]:
    """Push the built images of ``names`` (default: all) to ``registry_host``.

    Each goes to ``<registry_host>/<name>:<tag>``; the result maps each name to the
    reference that pulls exactly that image, ``<registry_host>/<name>@sha256:…``. Plain HTTP
    when ``insecure``, which by default is whether the registry is on loopback (a local
    cluster's registry on its own bridge address says ``insecure=True``); TLS otherwise.
    """
    images = built(IMAGES if names is None else names, index=index)
    if insecure is None:
        insecure = plain_http(registry_host)
    references: dict[str, str] = {}
    for name, image in images.items():
        with tempfile.TemporaryDirectory(prefix=f"{name}-oci-") as layout:
            with tarfile.open(image.archive) as archive:
                archive.extractall(layout, filter="data")
            target = f"{registry_host}/{name}:{image.tag}"
            _crane("push", layout, target, insecure=insecure)
        digest = _crane("digest", target, insecure=insecure)
        references[name] = f"{registry_host}/{name}@{digest}"
    return references


def record(name: str, archive: Path, tag: str, *, index: Path = INDEX) -> None:
    """Write ``name``'s entry into the index (atomically: a reader sees old or new)."""
    document: dict[str, Any] = {}
    if index.is_file():
        document = json.loads(index.read_text())
    updated = with_entry(document, BuiltImage(name, archive, tag))
    parse_index(updated, source=str(index))
    index.parent.mkdir(parents=True, exist_ok=True)
    temporary = index.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(updated, indent=2) + "\n")
    temporary.replace(index)


def recorded_tag(name: str, *, index: Path = INDEX) -> str | None:
    """The tag recorded for ``name`` when its archive is still there, else ``None``."""
    try:
        images = _read(index)
    except ImagesNotBuiltError:
        return None
    image = images.get(name)
    return image.tag if image is not None and image.archive.is_file() else None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mcp_operator.dev.images",
        description="The index of built images (hack/build-images.sh writes it through this).",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    rec = commands.add_parser("record", help="record a built image in the index")
    rec.add_argument("name")
    rec.add_argument("archive", type=Path)
    rec.add_argument("tag")
    tag = commands.add_parser("tag", help="print the recorded tag of an image (empty if none)")
    tag.add_argument("name")
    pushing = commands.add_parser("push", help="push built images; print name=reference lines")
    pushing.add_argument("registry")
    pushing.add_argument("names", nargs="*")
    pushing.add_argument("--plain-http", action="store_true", help="also off loopback")
    parser.add_argument("--index", type=Path, default=INDEX)
    options = parser.parse_args(argv)
    if options.command == "record":
        record(options.name, options.archive, options.tag, index=options.index)
    elif options.command == "tag":
        print(recorded_tag(options.name, index=options.index) or "")
    else:
        pushed = push(
            options.registry,
            options.names or None,
            insecure=True if options.plain_http else None,
            index=options.index,
        )
        for name, reference in pushed.items():
            print(f"{name}={reference}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
