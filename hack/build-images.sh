#!/usr/bin/env bash
# Builds our images without pulling anything from a container registry, into
# $MCP_OPERATOR_CACHE/images (default ~/.cache/mcp-operator/images):
#
#   <name>.oci.tar   an OCI archive per image:
#                      mcp-operator        the Dockerfile (operator, adapter, bridge)
#                      server-everything   images/server-everything (Debian's Node 20 + the npm package
#                                          at the version hack/node-tools/package.json pins)
#                      mcp-server-time     images/mcp-server-time (PyPI)
#                      mcp-hello-server    images/mcp-hello-server (the static Go server of
#                                          `make image-tools`, alone: no shell)
#                      demo-agent          images/demo-agent (the demo's agent, MCP Python SDK)
#                      mcp-dataplane       images/mcp-dataplane (`make dataplane`'s binary and the
#                                          stdio helper on the C library and CA certificates
#                                          alone: no shell)
#   index.json       {"<name>": {"archive": "<path>", "tag": "<16 hex>"}}: the tag is the hash of
#                    the build's inputs (mcp_operator/dev/image_inputs.py); an image whose tag is
#                    already recorded is not built again. `mcp_operator.dev.images` reads it.
#
# Base images come from Debian's packages (mmdebstrap), never from Docker Hub, and stand in
# for the Dockerfiles' defaults through their build arguments: python:3.11-slim -> bookworm
# with python3 (3.11) and python-is-python3; golang:1.26 -> bookworm with this machine's Go
# toolchain; node:20-slim -> trixie with nodejs 20 (bookworm's 18 is below what the npm
# packages ask for), plus npm in the build stage's base. Each base is named and cached by the
# hash of its recipe (REFRESH_BASES=1 makes them again, with today's Debian updates).
#
# The builder is `docker build` where a Docker engine answers (`docker info`), else buildah
# (Debian package, hack/install-image-packages.sh); MCP_OPERATOR_BUILDER=buildah|docker picks.
# buildah runs with storage, registries and containers configuration private to the cache
# (nothing under /var/lib/containers: it runs in a private mount namespace in which /var/lib
# is an overlay whose writes land in the cache), and every build with
# --pull=never --network=host --layers --force-rm and the host's CA bundle mounted read-only
# into RUN steps (here TLS to PyPI and npm verifies only with it; it never lands in a layer).
#
# Needs root (mmdebstrap --mode=root, buildah's overlay storage), Debian's apt repositories for
# the bases, PyPI and npm for the RUN steps, and `make venv image-tools dataplane`.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CACHE="${MCP_OPERATOR_CACHE:-$HOME/.cache/mcp-operator}"
OUT="$CACHE/images"
STATE="$OUT/buildah"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
MIRROR="${MIRROR:-http://deb.debian.org}"
PYTHON_SUITE=bookworm
NODE_SUITE=trixie
GOROOT_HOST="${GOROOT_HOST:-$(go env GOROOT 2>/dev/null || echo /usr/local/go)}"
CA_BUNDLE="${CA_BUNDLE-/etc/ssl/certs/ca-certificates.crt}"
MCP_SERVER_TIME_VERSION="${MCP_SERVER_TIME_VERSION:-2026.10.19}"
REFRESH_BASES="${REFRESH_BASES:-0}"

[[ $(id -u) -eq 0 ]] || { echo "build-images.sh needs root (mmdebstrap, buildah storage)" >&2; exit 1; }
[[ -x "$PY" ]] || { echo "no Python environment at $PY; run \`make venv\`" >&2; exit 1; }
[[ -x "$GOROOT_HOST/bin/go" ]] || { echo "no Go toolchain at $GOROOT_HOST (GOROOT_HOST): the Go base copies it" >&2; exit 1; }
[[ -x "$CACHE/bin/mcp-hello-server" ]] || { echo "mcp-hello-server is not built; run \`make image-tools\`" >&2; exit 1; }
DATAPLANE_BIN="${CARGO_TARGET_DIR:-$CACHE/dataplane-target}/release/mcp-dataplane"
[[ -x "$DATAPLANE_BIN" ]] || { echo "mcp-dataplane is not built ($DATAPLANE_BIN); run \`make dataplane\`" >&2; exit 1; }

if [[ -z "${MCP_OPERATOR_BUILDER:-}" ]]; then
  if command -v docker >/dev/null && docker info >/dev/null 2>&1; then MCP_OPERATOR_BUILDER=docker; else MCP_OPERATOR_BUILDER=buildah; fi
fi
BUILDER="$MCP_OPERATOR_BUILDER"
case $BUILDER in
  buildah) need=(buildah mmdebstrap runc unshare) ;;
  docker) need=(docker mmdebstrap) ;;
  *) echo "MCP_OPERATOR_BUILDER must be buildah or docker, not $BUILDER" >&2; exit 2 ;;
esac
for tool in "${need[@]}"; do
  command -v "$tool" >/dev/null || { echo "missing $tool: run \`bash hack/install-image-packages.sh\`" >&2; exit 1; }
done

# One build at a time in this cache (its storage and archives are shared by every checkout
# that uses it), taken before the namespace below, which inherits it.
if [[ -z "${_MCP_IMAGES_NAMESPACE:-}" ]]; then
  mkdir -p "$OUT"
  exec 9>"$OUT/.build.lock"
  flock -w 1800 9 || { echo "another build-images.sh holds $OUT/.build.lock" >&2; exit 1; }
fi

# buildah, then: a private mount namespace whose /var/lib is an overlay onto the cache, so that
# what buildah writes there by itself (its blob-info cache, whatever storage.conf says) stays
# in the cache; nothing mounted in it is seen outside, and it all goes when the script ends.
if [[ $BUILDER == buildah && -z "${_MCP_IMAGES_NAMESPACE:-}" ]]; then
  mkdir -p "$STATE/var-lib/upper" "$STATE/var-lib/work"
  exec unshare --mount --propagation private env _MCP_IMAGES_NAMESPACE=1 bash "$0" "$@"
fi
if [[ $BUILDER == buildah ]]; then
  mount -t overlay overlay \
    -o "lowerdir=/var/lib,upperdir=$STATE/var-lib/upper,workdir=$STATE/var-lib/work" /var/lib
fi

mkdir -p "$OUT/bases" "$STATE"/{conf,logs,run,tmp}
export TMPDIR="$STATE/tmp"
cat >"$STATE/conf/storage.conf" <<EOF
[storage]
driver = "overlay"
graphroot = "$STATE/storage"
runroot = "$STATE/run/storage"
EOF
# No short names, no search registries: a FROM that is not local fails instead of reaching out.
cat >"$STATE/conf/registries.conf" <<'EOF'
unqualified-search-registries = []
short-name-mode = "enforcing"
EOF
cat >"$STATE/conf/containers.conf" <<'EOF'
[engine]
runtime = "runc"
EOF
export CONTAINERS_STORAGE_CONF="$STATE/conf/storage.conf"
export CONTAINERS_REGISTRIES_CONF="$STATE/conf/registries.conf"
export CONTAINERS_CONF="$STATE/conf/containers.conf"

# Working containers left by a build that was killed (--force-rm cannot help then).
if [[ $BUILDER == buildah ]]; then buildah rm --all >/dev/null; fi

total_start=$(date +%s.%N)
seconds_since() { "$PY" -c 'import sys, time; print(f"{time.time() - float(sys.argv[1]):.1f}")' "$1"; }
tag_of() { "$PY" -m mcp_operator.dev.image_inputs "$@"; }

image_id() {
  case $BUILDER in
    buildah) buildah inspect --type image --format '{{.FromImageID}}' "$1" ;;
    docker) docker image inspect --format '{{.Id}}' "$1" ;;
  esac
}

have_image() {
  case $BUILDER in
    buildah) buildah inspect --type image "$1" >/dev/null 2>&1 ;;
    docker) docker image inspect "$1" >/dev/null 2>&1 ;;
  esac
}

# rootfs SUITE DIR PACKAGES HOOK: a minimal Debian (Essential + PACKAGES, no Recommends, no
# docs, man pages or locales but the copyright files, no apt lists) in the folder DIR. HOOK, a
# customize hook, may add to it. bookworm gets a merged /usr from mmdebstrap's hook (else
# init-system-helpers pulls in usrmerge and perl). VARIANT=extract (in the caller's
# environment) unpacks PACKAGES and their dependencies alone, installs nothing and runs no
# maintainer script: HOOK (run after it, since mmdebstrap runs none then) keeps what the
# image needs.
rootfs() {
  local suite=$1 out=$2 include=$3 hook=${4:-true} variant=${VARIANT:-essential} extra=()
  [[ $suite == bookworm && $variant == essential ]] && extra+=(--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr)
  mmdebstrap --quiet --variant="$variant" --mode=root "${extra[@]}" --include="$include" \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/locale/locale.alias' \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --customize-hook="$hook" \
    --customize-hook='rm -rf "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/* "$1"/var/log/*.log "$1"/var/cache/ldconfig/aux-cache' \
    "$suite" "$out.partial" \
    "deb $MIRROR/debian $suite main" "deb $MIRROR/debian $suite-updates main" \
    "deb $MIRROR/debian-security $suite-security main"
  # mmdebstrap runs no customize hook for the extract variant: HOOK runs here, the same way.
  if [[ $variant == extract ]]; then sh -c "$hook" exec "$out.partial"; fi
  mv "$out.partial" "$out"
}

# import_base DIR IMAGE CMD ENV...: the folder as a one-layer image.
import_base() {
  local dir=$1 image=$2 cmd=$3 c; shift 3
  case $BUILDER in
    buildah)
      c=$(buildah from scratch)
      buildah add --quiet "$c" "$dir" /
      local config=(--cmd "$cmd" --label "org.opencontainers.image.description=Debian-made base $image")
      for e in "$@"; do config+=(--env "$e"); done
      buildah config "${config[@]}" "$c"
      buildah commit --quiet --rm "$c" "$image" >/dev/null ;;
    docker)
      local changes=(--change "CMD [\"$cmd\"]")
      for e in "$@"; do changes+=(--change "ENV $e"); done
      tar -C "$dir" -c . | docker import "${changes[@]}" - "$image" >/dev/null ;;
  esac
}

# forget_older REPOSITORY TAG: untag the builder's other tags of REPOSITORY (their layers stay
# while a newer image or the layer cache uses them).
forget_older() {
  local old
  case $BUILDER in
    buildah) for old in $(buildah images --noheading --format '{{.Name}} {{.Tag}}' | awk -v r="$1" '$1 == r {print $2}'); do
               [[ $old == "$2" ]] || buildah rmi "$1:$old" >/dev/null; done ;;
    docker) for old in $(docker images --format '{{.Tag}}' "$1"); do
              [[ $old == "$2" ]] || docker rmi "$1:$old" >/dev/null; done ;;
  esac
}

# base NAME SUITE PACKAGES CMD [HOOK [ENV...]]: the image name of that base, made when missing.
# Its tag hashes the whole recipe, this script's rootfs function included.
base() {
  local name=$1 suite=$2 include=$3 cmd=$4 hook=$5; shift 5
  local env=(LANG=C.UTF-8 "$@") tag image dir log start
  tag=$(tag_of --arg "suite=$suite" --arg "variant=${VARIANT:-essential}" --arg "include=$include" --arg "hook=$hook" \
    --arg "cmd=$cmd" --arg "env=${env[*]}" --arg "rootfs=$(declare -f rootfs import_base)" --arg "builder=$BUILDER")
  image="localhost/mcp-operator-base/$name:$tag"
  dir="$OUT/bases/$name-$tag.rootfs"
  log="$STATE/logs/base-$name.log"
  if [[ $REFRESH_BASES == 1 ]]; then rm -rf "$dir"; fi
  if [[ $REFRESH_BASES != 1 ]] && have_image "$image"; then
    echo "Base $name ($suite: $include) already made: $image" >&2
  else
    start=$(date +%s.%N)
    rm -rf "$dir.partial"
    if [[ ! -d "$dir" ]] && ! rootfs "$suite" "$dir" "$include" "$hook" >"$log" 2>&1; then
      tail -30 "$log" >&2; echo "mmdebstrap failed for base $name (log: $log)" >&2; return 1
    fi
    import_base "$dir" "$image" "$cmd" "${env[@]}" >&2
    forget_older "localhost/mcp-operator-base/$name" "$tag"
    find "$OUT/bases" -maxdepth 1 -name "$name-????????????????.rootfs" ! -name "$name-$tag.rootfs" -exec rm -rf {} +
    echo "Base $name ($suite: $include) made in $(seconds_since "$start")s: $image ($(du -sm "$dir" | cut -f1) MB)" >&2
  fi
  echo "$image"
}

PATH_DEFAULT=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
go_version=$("$GOROOT_HOST/bin/go" env GOVERSION)
python_base=$(base python "$PYTHON_SUITE" python3,python3-venv,python-is-python3,ca-certificates python3 true \
  "PATH=$PATH_DEFAULT")
go_base=$(base go "$PYTHON_SUITE" ca-certificates bash \
  "cp -a $GOROOT_HOST \"\$1/usr/local/go\" # $go_version" \
  "PATH=/go/bin:/usr/local/go/bin:$PATH_DEFAULT" GOPATH=/go GOTOOLCHAIN=local)
node_base=$(base node "$NODE_SUITE" nodejs node true "PATH=$PATH_DEFAULT")
node_build_base=$(base node-build "$NODE_SUITE" nodejs,npm,ca-certificates node true "PATH=$PATH_DEFAULT")

# runtime_only ROOTFS: of an extracted libc6, libgcc-s1 and ca-certificates, keep what a
# dynamically linked Rust program needs (the loader, libc, libm, libgcc_s), Debian's CA bundle
# (ca-certificates' own list, concatenated as its maintainer script would; never the host's
# bundle, which may hold a local CA) and the packages' copyright files. No shell, no package
# manager, no dpkg database. POSIX sh: mmdebstrap runs hooks with sh.
runtime_only() {
  set -e
  r=$1; k="$1.keep"; lib=lib/x86_64-linux-gnu
  rm -rf "$k"; mkdir -p "$k/$lib" "$k/lib64" "$k/etc/ssl/certs" "$k/tmp" "$k/usr/share/doc"
  for f in ld-linux-x86-64.so.2 libc.so.6 libm.so.6 libgcc_s.so.1; do cp -a "$r/$lib/$f" "$k/$lib/"; done
  ln -s "/$lib/ld-linux-x86-64.so.2" "$k/lib64/ld-linux-x86-64.so.2"
  cat "$r"/usr/share/ca-certificates/mozilla/*.crt >"$k/etc/ssl/certs/ca-certificates.crt"
  for p in libc6 gcc-12-base ca-certificates; do
    mkdir -p "$k/usr/share/doc/$p"; cp "$r/usr/share/doc/$p/copyright" "$k/usr/share/doc/$p/"
  done
  chmod 1777 "$k/tmp"
  find "$r" -mindepth 1 -maxdepth 1 -exec rm -rf {} +
  cp -a "$k/." "$r/"; rm -rf "$k"
}
dataplane_base=$(VARIANT=extract base dataplane "$PYTHON_SUITE" libc6,libgcc-s1,ca-certificates \
  /usr/local/bin/mcp-dataplane "$(declare -f runtime_only); runtime_only \"\$1\"" \
  "PATH=/usr/local/bin" SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt)

common=(--pull=never --network=host --force-rm)
case $BUILDER in
  buildah)
    common+=(--layers --format=oci)
    [[ -n "$CA_BUNDLE" && -f "$CA_BUNDLE" ]] && common+=(--volume "$CA_BUNDLE:/etc/ssl/certs/ca-certificates.crt:ro") ;;
  docker) common=(--pull=false --network=host --force-rm) ;;
esac

# The archives are read on this machine (pushed to a loopback registry): the fastest gzip
# level, since buildah's OCI archives always compress and compressing is most of a rebuild.
push_options=(--compression-format=gzip "--compression-level=${ARCHIVE_GZIP_LEVEL:-1}")

# image NAME CONTEXT DOCKERFILE KEY=VALUE...: build unless the inputs' tag is recorded. A base
# among the build arguments counts by its content (image ID) too: REFRESH_BASES=1 remakes a
# base under the same name, and what was built on it is built again.
image() {
  local name=$1 context=$2 dockerfile=$3; shift 3
  local tag args=() hash_args=() ref archive start built
  for kv in "$@"; do
    args+=(--build-arg "$kv"); hash_args+=(--arg "$kv")
    [[ ${kv#*=} != localhost/mcp-operator-base/* ]] || hash_args+=(--arg "${kv%%=*}.id=$(image_id "${kv#*=}")")
  done
  tag=$(tag_of --context "$context" --dockerfile "$dockerfile" --arg "builder=$BUILDER" "${hash_args[@]}")
  archive="$OUT/$name.oci.tar"
  if [[ "$("$PY" -m mcp_operator.dev.images tag "$name")" == "$tag" ]]; then
    echo "Image $name:$tag already built ($archive)"
    return
  fi
  ref="localhost/mcp-operator-images/$name:$tag"
  start=$(date +%s.%N)
  case $BUILDER in
    buildah)
      buildah bud --quiet "${common[@]}" "${args[@]}" -t "$ref" -f "$dockerfile" "$context" >/dev/null
      built=$(seconds_since "$start")
      rm -f "$archive.partial"
      buildah push --quiet "${push_options[@]}" "$ref" "oci-archive:$archive.partial:$name:$tag" ;;
    docker)
      docker build --quiet "${common[@]}" "${args[@]}" -t "$ref" -f "$dockerfile" "$context" >/dev/null
      built=$(seconds_since "$start")
      docker save -o "$archive.partial" "$ref" ;;  # Docker 25 and later write an OCI layout
  esac
  mv "$archive.partial" "$archive"
  "$PY" -m mcp_operator.dev.images record "$name" "$archive" "$tag"
  forget_older "localhost/mcp-operator-images/$name" "$tag"
  echo "Image $name:$tag built in $(seconds_since "$start")s (build ${built}s, then the archive: $(du -m "$archive" | cut -f1) MB)"
}

# The label says which commit the operator's sources come from: the last one that touched them
# (so it changes with the inputs, not with every commit), "-dirty" when they hold edits.
sources=(Dockerfile .dockerignore pyproject.toml README.md operator)
revision=$(git -C "$ROOT" log -1 --format=%H -- "${sources[@]}" 2>/dev/null || echo unknown)
[[ -z "$(git -C "$ROOT" status --porcelain -- "${sources[@]}" 2>/dev/null)" ]] || revision+=-dirty
version=$("$PY" -c 'import mcp_operator; print(mcp_operator.__version__)')

image mcp-operator "$ROOT" "$ROOT/Dockerfile" \
  "PYTHON_IMAGE=$python_base" "GO_IMAGE=$go_base" "VERSION=$version" "REVISION=${revision:-unknown}"

everything_version=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["dependencies"]["@modelcontextprotocol/server-everything"])' \
  "$ROOT/hack/node-tools/package.json")
image server-everything "$ROOT/images/server-everything" "$ROOT/images/server-everything/Dockerfile" \
  "NODE_BUILD_IMAGE=$node_build_base" "NODE_IMAGE=$node_base" "SERVER_EVERYTHING_VERSION=$everything_version"

image mcp-server-time "$ROOT/images/mcp-server-time" "$ROOT/images/mcp-server-time/Dockerfile" \
  "PYTHON_IMAGE=$python_base" "MCP_SERVER_TIME_VERSION=$MCP_SERVER_TIME_VERSION"

# Its context: the Dockerfile and the binary, side by side.
hello="$STATE/contexts/mcp-hello-server"
rm -rf "$hello" && mkdir -p "$hello"
cp "$ROOT/images/mcp-hello-server/Dockerfile" "$CACHE/bin/mcp-hello-server" "$hello/"
image mcp-hello-server "$hello" "$hello/Dockerfile"

# Its context: the Dockerfile, the data plane and the stdio helper, side by side.
dataplane="$STATE/contexts/mcp-dataplane"
rm -rf "$dataplane" && mkdir -p "$dataplane"
cp "$ROOT/images/mcp-dataplane/Dockerfile" "$DATAPLANE_BIN" "$CACHE/bin/mcp-stdio-exec" "$dataplane/"
image mcp-dataplane "$dataplane" "$dataplane/Dockerfile" "BASE_IMAGE=$dataplane_base" \
  "VERSION=$version" "REVISION=${revision:-unknown}"

for f in agent.py requirements.txt; do
  [[ -f "$ROOT/images/demo-agent/$f" ]] || { echo "images/demo-agent/$f is missing (the demo agent's program)" >&2; exit 1; }
done
image demo-agent "$ROOT/images/demo-agent" "$ROOT/images/demo-agent/Dockerfile" "PYTHON_IMAGE=$python_base"

echo "Images ready in $OUT ($(seconds_since "$total_start")s)"
