"""Our images as ``make images`` built them: pushed to a real registry, read back, and run.

No control plane. Building again with unchanged inputs builds nothing. The images are pushed
(``mcp_operator.dev.images.push``) to ``crane registry serve`` on loopback, each image's
configuration is read back from it with crane (numeric non-root ``USER``, entrypoint,
labels), and each is run once from what the registry serves, with runc, read-only, as its
``USER`` (:mod:`tests.support.oci_run`): the operator image prints its version, every MCP
server image answers ``initialize`` and ``tools/list`` over stdio, the shell-less ones have no
shell (the data plane's holds its binaries, the C library and CA certificates alone), the demo
agent's has the SDK.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import mcp_operator
from mcp_operator.dev import images
from tests.support import needs, oci_run, registry, wire

pytestmark = [needs.mark(needs.images_missing()), needs.mark(oci_run.runc_missing())]

REPO = Path(__file__).resolve().parents[2]
NONROOT = "65532:65532"
ENTRYPOINTS = {
    "mcp-operator": ["mcp-operator"],
    "mcp-dataplane": ["/usr/local/bin/mcp-dataplane"],
    "server-everything": [
        "node",
        "/app/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
    ],
    "mcp-server-time": ["/opt/mcp-server-time/bin/mcp-server-time"],
    "mcp-hello-server": ["/mcp-hello-server"],
    "demo-agent": ["python", "/app/agent.py"],
}
SERVERS = {
    "server-everything": "echo",
    "mcp-server-time": "get_current_time",
    "mcp-hello-server": "greet",
}


def test_building_again_with_the_same_inputs_builds_nothing() -> None:
    """First here (before anything is pushed): brings the images up to date, then again."""
    if os.geteuid() != 0:
        needs.require("building images needs root (mmdebstrap, buildah); run the tests as root")
    build = ["bash", str(REPO / "hack" / "build-images.sh")]
    first = subprocess.run(build, capture_output=True, text=True, timeout=1800, check=False)
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    again = subprocess.run(build, capture_output=True, text=True, timeout=300, check=False)
    assert again.returncode == 0, again.stderr[-2000:]
    cached = re.findall(r"^Image ([\w-]+):[0-9a-f]{16} already built", again.stdout, re.MULTILINE)
    assert sorted(cached) == sorted(images.IMAGES)
    assert " built in " not in again.stdout
    assert "made in" not in again.stderr


@pytest.fixture(scope="module")
def pushed(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[registry.Registry, dict[str, str]]]:
    """Every built image pushed to a fresh loopback registry: (registry, name -> reference)."""
    with registry.running(tmp_path_factory.mktemp("registry")) as local:
        yield local, images.push(local.backend)


@pytest.fixture(scope="module")
def bundles(
    pushed: tuple[registry.Registry, dict[str, str]], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, oci_run.Bundle]]:
    """Each image's filesystem as the registry serves it (about 700 MB, removed afterwards)."""
    local, references = pushed
    root = tmp_path_factory.mktemp("bundles")
    yield {name: oci_run.bundle(local, ref, root / name) for name, ref in references.items()}
    shutil.rmtree(root, ignore_errors=True)


def test_each_image_is_pushed_under_its_input_tag_and_pulled_by_digest(
    pushed: tuple[registry.Registry, dict[str, str]],
) -> None:
    local, references = pushed
    assert set(references) == set(images.IMAGES)
    for name, reference in references.items():
        assert re.fullmatch(rf"127\.0\.0\.1:\d+/{name}@sha256:[0-9a-f]{{64}}", reference)
        (tag,) = local.crane("ls", f"{local.backend}/{name}").split()
        assert re.fullmatch(r"[0-9a-f]{16}", tag)
        assert local.crane("digest", f"{local.backend}/{name}:{tag}") == reference.split("@")[1]


@pytest.mark.parametrize("name", images.IMAGES)
def test_each_image_runs_as_a_numeric_non_root_user_with_its_entrypoint_and_labels(
    name: str, pushed: tuple[registry.Registry, dict[str, str]]
) -> None:
    local, references = pushed
    config = json.loads(local.crane("config", references[name]))["config"]
    assert config["User"] == NONROOT
    assert config["Entrypoint"] == ENTRYPOINTS[name]
    labels = config["Labels"]
    assert labels["org.opencontainers.image.title"] == name
    assert labels["org.opencontainers.image.base.name"]


def test_the_operator_image_knows_its_version_and_source_revision(
    pushed: tuple[registry.Registry, dict[str, str]],
) -> None:
    local, references = pushed
    labels = json.loads(local.crane("config", references["mcp-operator"]))["config"]["Labels"]
    assert labels["org.opencontainers.image.version"] == mcp_operator.__version__
    assert re.fullmatch(r"[0-9a-f]{40}(-dirty)?", labels["org.opencontainers.image.revision"])


def test_the_operator_image_prints_its_version_with_a_read_only_root(
    bundles: dict[str, oci_run.Bundle],
) -> None:
    operator = bundles["mcp-operator"]
    result = operator.run(["mcp-operator", "--version"])
    assert result.returncode == 0, result.stderr.decode()
    assert mcp_operator.__version__ in result.stdout.decode()
    probe = operator.run(["sh", "-c", "id -u; touch /probe"])
    assert probe.stdout.decode().split() == ["65532"]
    assert b"Read-only file system" in probe.stderr
    helper = operator.run(["/opt/mcp-operator/bin/mcp-stdio-exec", "--install=/tmp"])
    assert helper.returncode == 0, helper.stderr.decode()


def test_the_operator_environment_holds_neither_build_tools_nor_unused_libraries(
    bundles: dict[str, oci_run.Bundle],
) -> None:
    venv = bundles["mcp-operator"].directory / "rootfs/opt/mcp-operator"
    installed = {p.name.lower() for p in (venv / "lib/python3.11/site-packages").iterdir()}
    assert "mcp_operator" in installed
    # kubernetes is kept: its loaders are who the operator is (docs/architecture.md, "The API
    # server's credentials: which client"); the clients weighed against it are not.
    assert "kubernetes" in installed
    assert not {"pip", "setuptools", "wheel", "kubernetes_asyncio", "lightkube", "kr8s"} & installed
    # The package's bytecode names its sources where they are, not where the build put them.
    package = venv / "lib/python3.11/site-packages/mcp_operator"
    compiled = list(package.rglob("*.pyc"))
    assert compiled
    assert not [pyc for pyc in compiled if b"/out/opt/" in pyc.read_bytes()]
    assert all(b"/opt/mcp-operator/lib/" in pyc.read_bytes() for pyc in compiled)


@pytest.mark.parametrize(("name", "tool"), sorted(SERVERS.items()))
def test_each_server_image_answers_initialize_and_lists_its_tools_over_stdio(
    name: str, tool: str, bundles: dict[str, oci_run.Bundle]
) -> None:
    messages = [wire.initialize(id=0), wire.initialized(), wire.request("tools/list", id=1)]
    stdin = b"".join(json.dumps(m).encode() + b"\n" for m in messages)
    result = bundles[name].run(stdin=stdin, until=b'"id":1', timeout=60)
    answers = {}
    for line in result.stdout.decode().splitlines():
        message = json.loads(line)
        answers[message.get("id")] = message
    assert "serverInfo" in answers[0]["result"], result.stderr.decode()
    assert tool in [t["name"] for t in answers[1]["result"]["tools"]]


def test_the_shell_less_image_holds_nothing_but_its_server(
    bundles: dict[str, oci_run.Bundle],
) -> None:
    rootfs = bundles["mcp-hello-server"].directory / "rootfs"
    files = [p.relative_to(rootfs).as_posix() for p in rootfs.rglob("*") if p.is_file()]
    assert files == ["mcp-hello-server"]


DATAPLANE_FILES = {
    "usr/local/bin/mcp-dataplane",
    "usr/local/bin/mcp-stdio-exec",
    "lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
    "lib/x86_64-linux-gnu/libc.so.6",
    "lib/x86_64-linux-gnu/libm.so.6",
    "lib/x86_64-linux-gnu/libgcc_s.so.1",
    "etc/ssl/certs/ca-certificates.crt",
    "usr/share/doc/libc6/copyright",
    "usr/share/doc/gcc-12-base/copyright",
    "usr/share/doc/ca-certificates/copyright",
}
DATAPLANE_MAX_BYTES = 20_000_000
"""The data plane's image, unpacked, stays under 20 MB (the binary is most of it)."""


def test_the_data_plane_image_runs_its_binary_read_only_and_holds_nothing_else(
    bundles: dict[str, oci_run.Bundle],
) -> None:
    dataplane = bundles["mcp-dataplane"]
    result = dataplane.run(["/usr/local/bin/mcp-dataplane", "--version"])
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode().split() == ["mcp-dataplane", mcp_operator.__version__]
    helper = dataplane.run(["/usr/local/bin/mcp-stdio-exec", "--install=/tmp"])
    assert helper.returncode == 0, helper.stderr.decode()
    # `kubectl exec` into the bridge finds no shell: there is none to start.
    for shell in ("sh", "/bin/sh", "bash"):
        assert dataplane.run([shell, "-c", "id"]).returncode != 0
    rootfs = dataplane.directory / "rootfs"
    regular = [p for p in rootfs.rglob("*") if p.is_file() and not p.is_symlink()]
    assert {p.relative_to(rootfs).as_posix() for p in regular} == DATAPLANE_FILES
    links = {
        p.relative_to(rootfs).as_posix(): p.readlink() for p in rootfs.rglob("*") if p.is_symlink()
    }
    assert links == {
        "lib64/ld-linux-x86-64.so.2": Path("/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2")
    }
    size = sum(p.stat().st_size for p in regular)
    assert size <= DATAPLANE_MAX_BYTES, f"{size / 1e6:.1f} MB"
    bundle = (rootfs / "etc/ssl/certs/ca-certificates.crt").read_text()
    assert bundle.count("BEGIN CERTIFICATE") > 100  # Debian's list, whole


def test_the_demo_agent_image_has_the_mcp_sdk_client_and_its_program(
    bundles: dict[str, oci_run.Bundle],
) -> None:
    agent = bundles["demo-agent"]
    result = agent.run(["python", "-c", "import mcp.client.session, sys; print(sys.version)"])
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.startswith(b"3.11")
    assert (agent.directory / "rootfs/app/agent.py").is_file()
