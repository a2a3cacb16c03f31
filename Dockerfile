# syntax=docker/dockerfile:1
# The mcp-operator image: the operator (`mcp-operator run`), and also the image of
# the stdio->HTTP adapter sidecar and the AgentRun bridge sidecar (`mcp-operator
# adapter`, `mcp-operator bridge`), which the operator puts into Pods it renders.
#
#   docker build -t ghcr.io/mcp-operator/mcp-operator:0.1.0 .
#
# Without a Docker engine, or where python:3.11-slim and golang:1.26 cannot be pulled,
# `make images` builds this same file with buildah on bases made from Debian's packages
# (PYTHON_IMAGE, GO_IMAGE; hack/build-images.sh, docs/install.md).
#
# Four stages: one builds the static mcp-stdio-exec helper from operator/stdio-exec,
# one installs the dependencies into a virtual environment, one the package, the last
# copies only those onto a clean base (dependencies and package as separate layers).
# The result runs as UID 65532 with a read-only root filesystem: nothing is written
# at run time (bytecode is compiled at build time; HOME and the temporary directory
# point at /tmp, which the Deployment mounts as an emptyDir).

ARG PYTHON_IMAGE=python:3.11-slim
ARG GO_IMAGE=golang:1.26

# mcp-stdio-exec: the static helper a managed stdio server's container runs
# through (operator/stdio-exec; docs/managed-mode.md). Static, so that it runs in
# any server image, distroless and scratch included.
FROM ${GO_IMAGE} AS stdio-exec
WORKDIR /src
COPY operator/stdio-exec ./
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/mcp-stdio-exec . \
    && /out/mcp-stdio-exec --install=/tmp && test -x /tmp/mcp-stdio-exec

# The dependencies in a layer of their own, from pyproject.toml alone: editing a module
# rebuilds only the small package layer below. pip (and setuptools, to build the package)
# live in a build-only environment and install into the image's with `pip --python`, so the
# image carries neither.
FROM ${PYTHON_IMAGE} AS deps
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/build-tools \
    && /opt/build-tools/bin/pip install --quiet "setuptools>=77" \
    && python -m venv --without-pip /opt/mcp-operator
WORKDIR /src
COPY pyproject.toml ./
RUN python -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))' \
        > /tmp/requirements.txt \
    && /opt/build-tools/bin/pip --python /opt/mcp-operator/bin/python install -r /tmp/requirements.txt

# The package alone, installed under /out as if at / (the entry point's interpreter is the
# image's environment), then checked in place.
FROM deps AS build
# Only what the build needs (see .dockerignore); README.md is the package's readme.
COPY README.md ./
COPY operator ./operator
RUN /opt/build-tools/bin/pip wheel --quiet --no-deps --no-build-isolation --wheel-dir /tmp/wheel . \
    && /opt/build-tools/bin/pip --python /opt/mcp-operator/bin/python install --no-deps \
        --no-compile --no-warn-script-location --root /out /tmp/wheel/*.whl \
    && /opt/mcp-operator/bin/python -m compileall -q -s /out -p / /out/opt/mcp-operator \
    && cp -a /out/opt/mcp-operator/. /opt/mcp-operator/ \
    && /opt/mcp-operator/bin/mcp-operator --version

FROM ${PYTHON_IMAGE}
COPY --from=deps /opt/mcp-operator /opt/mcp-operator
COPY --from=build /out/opt/mcp-operator /opt/mcp-operator
COPY --from=stdio-exec /out/mcp-stdio-exec /opt/mcp-operator/bin/mcp-stdio-exec
ENV PATH=/opt/mcp-operator/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    TMPDIR=/tmp
# A numeric UID/GID (the conventional "nonroot" 65532), so that Kubernetes can
# verify runAsNonRoot without an /etc/passwd entry.
USER 65532:65532
WORKDIR /tmp
# The operator's liveness endpoint (`mcp-operator run --liveness=http://0.0.0.0:8080/healthz`)
# and the adapter's default port.
EXPOSE 8080
ENTRYPOINT ["mcp-operator"]
CMD ["run"]
# Last, so that a new revision changes only the image's configuration, no layer. PYTHON_IMAGE
# is declared again: an ARG declared before the first FROM is not visible in a stage.
ARG PYTHON_IMAGE
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG SOURCE=https://github.com/mcp-operator/mcp-operator
LABEL org.opencontainers.image.title="mcp-operator" \
      org.opencontainers.image.description="Kubernetes operator that runs and governs Model Context Protocol servers; also the MCP adapter and bridge" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="${PYTHON_IMAGE}"
