"""A local OCI registry for the tests: crane's, behind a token-auth front of ours.

``crane registry serve`` (go-containerregistry, built by ``make image-tools``) is a
real distribution-API registry, but it has no authentication. :class:`Registry`
puts a small front on loopback before it that does what public registries do:
``/v2/`` answers 401 with a Bearer challenge naming a token endpoint; that endpoint
gives anyone a token for public repositories and demands HTTP Basic credentials
for repositories under ``private/``; requests with a token for the repository are
passed to crane unchanged. Tests push to crane directly (``crane`` with
``--insecure``) and let the operator read through the front; the front counts the
requests it served, so a test can see a cache at work.

:func:`image_argv` reads what an image runs (``ENTRYPOINT`` + ``CMD``) from any plain-HTTP
registry on this machine (the node's, on its bridge address, included).
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import http.server
import json
import re
import socket
import subprocess
import tarfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from mcp_operator.dev.processes import BIN_DIR, stop_process_group
from tests.support.peers import free_port

PRIVATE_PREFIX = "private/"
USER, PASSWORD = "e2e-puller", "pull-secret-password"
FRONT_PORT = free_port()
"""Chosen once per test session: the operator is started with this host as insecure."""
FRONT_HOST = f"127.0.0.1:{FRONT_PORT}"
_REPOSITORY = re.compile(r"^/v2/(.+)/(?:manifests|blobs|tags)/")


@dataclass
class Registry:
    """crane's registry on ``backend`` and our auth front on :data:`FRONT_HOST`."""

    backend: str
    served: list[str] = field(default_factory=list)
    """Paths the front passed to the registry (token requests excluded)."""

    def crane(self, *args: str) -> str:
        result = subprocess.run(
            [str(BIN_DIR / "crane"), "--insecure", *args],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        if result.returncode != 0:
            raise AssertionError(f"crane {' '.join(args)} failed: {result.stderr}")
        return result.stdout.strip()

    def push_image(
        self,
        repository: str,
        tag: str,
        files: dict[str, Path],
        *,
        entrypoint: list[str],
        cmd: list[str],
        user: str,
        workdir: Path,
    ) -> str:
        """Push an image made of ``files`` (path in the image → file here, mode 0755) with
        this configuration; return its manifest digest. Nothing else is in the image."""
        layer = workdir / f"{repository.replace('/', '-')}-{tag}.tar"
        with tarfile.open(layer, "w") as tar:
            for inside, source in files.items():
                info = tar.gettarinfo(str(source), arcname=inside.lstrip("/"))
                info.mode, info.uid, info.gid, info.uname, info.gname = 0o755, 0, 0, "", ""
                with source.open("rb") as handle:
                    tar.addfile(info, handle)
        ref = f"{self.backend}/{repository}:{tag}"
        self.crane("append", "--new_layer", str(layer), "--new_tag", ref)
        mutate = ["mutate", ref, "--set-platform", "linux/amd64", "--user", user, "-t", ref]
        mutate += [f"--entrypoint={','.join(entrypoint)}"] if entrypoint else []
        mutate += [f"--cmd={','.join(cmd)}"] if cmd else []
        self.crane(*mutate)
        return self.crane("digest", ref)

    def index_of(self, repository: str, tag: str, manifest_tag: str) -> str:
        """Make ``repository:tag`` a multi-arch index holding ``repository:manifest_tag``."""
        ref = f"{self.backend}/{repository}"
        self.crane("index", "append", "-t", f"{ref}:{tag}", "-m", f"{ref}:{manifest_tag}")
        return self.crane("digest", f"{ref}:{tag}")

    def extract(self, reference: str, root: Path) -> None:
        """The image's flattened filesystem, as a runtime would lay it out, into ``root``."""
        root.mkdir(parents=True, exist_ok=True)
        exported = subprocess.run(
            [str(BIN_DIR / "crane"), "--insecure", "export", reference, "-"],
            capture_output=True,
            check=True,
            timeout=120,
        )
        subprocess.run(["tar", "-x", "-C", str(root)], input=exported.stdout, check=True)


def image_argv(reference: str) -> list[str]:
    """``ENTRYPOINT`` + ``CMD`` of the image ``reference`` (on a plain-HTTP registry)."""
    result = subprocess.run(
        [str(BIN_DIR / "crane"), "--insecure", "config", reference],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    if result.returncode != 0:
        raise AssertionError(f"crane config {reference} failed: {result.stderr}")
    config = json.loads(result.stdout).get("config", {})
    return [*(config.get("Entrypoint") or []), *(config.get("Cmd") or [])]


def _token_for(repository: str) -> str:
    return base64.urlsafe_b64encode(f"pull:{repository}".encode()).decode()


def _handler(registry: Registry) -> type[http.server.BaseHTTPRequestHandler]:
    class Front(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            if self.path.startswith("/token"):
                self.token()
            else:
                self.forward()

        do_HEAD = do_GET

        def answer(
            self, status: int, body: bytes = b"", headers: dict[str, str] | None = None
        ) -> None:
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def token(self) -> None:
            query = parse_qs(urlsplit(self.path).query)
            scope = (query.get("scope") or [""])[0]
            match = re.fullmatch(r"repository:([^:]+):pull", scope)
            if match is None:
                self.answer(400, b'{"errors":[{"code":"UNSUPPORTED"}]}')
                return
            repository = match.group(1)
            if repository.startswith(PRIVATE_PREFIX):
                expected = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
                if self.headers.get("Authorization") != expected:
                    self.answer(401, b'{"errors":[{"code":"UNAUTHORIZED"}]}')
                    return
            body = f'{{"token": "{_token_for(repository)}"}}'.encode()
            self.answer(200, body, {"Content-Type": "application/json"})

        def forward(self) -> None:
            match = _REPOSITORY.match(self.path)
            repository = match.group(1) if match else ""
            wanted = f"Bearer {_token_for(repository)}"
            if not repository or self.headers.get("Authorization") != wanted:
                challenge = f'Bearer realm="http://{FRONT_HOST}/token",service="e2e-registry"' + (
                    f',scope="repository:{repository}:pull"' if repository else ""
                )
                self.answer(
                    401, b'{"errors":[{"code":"UNAUTHORIZED"}]}', {"WWW-Authenticate": challenge}
                )
                return
            registry.served.append(self.path)
            connection = http.client.HTTPConnection(registry.backend, timeout=30)
            try:
                headers = {"Accept": self.headers.get("Accept", "*/*")}
                connection.request(self.command, self.path, headers=headers)
                reply = connection.getresponse()
                body = reply.read()
                keep = ("Content-Type", "Docker-Content-Digest", "Location")
                passed = {k: v for k, v in reply.getheaders() if k in keep}
                self.answer(reply.status, body, passed)
            finally:
                connection.close()

    return Front


@contextlib.contextmanager
def running(workdir: Path) -> Iterator[Registry]:
    """crane's registry and the front, both on loopback, stopped afterwards."""
    port = free_port()
    backend = f"127.0.0.1:{port}"
    log = (workdir / "registry.log").open("wb")
    process = subprocess.Popen(
        [str(BIN_DIR / "crane"), "registry", "serve", f"--address={backend}"],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while True:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            break
        if time.monotonic() > deadline or process.poll() is not None:
            raise AssertionError(f"crane registry serve did not start: see {log.name}")
        time.sleep(0.1)
    registry = Registry(backend)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", FRONT_PORT), _handler(registry))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield registry
    finally:
        server.shutdown()
        server.server_close()
        stop_process_group(process, grace=5, name="crane registry")
        log.close()
