#!/usr/bin/env bash
# Installs the peer of bench/bridge_bench.py, ContextForge (PyPI mcp-contextforge-gateway 1.1.0),
# into the cache (${MCP_OPERATOR_CACHE:-~/.cache/mcp-operator}), never into the project's venv.
# ContextForge needs Python >= 3.12 and this project's machines have 3.11, so a CPython 3.13
# is built first from Debian's source archive (the orig tarball of trixie's python3.13, its
# sha256 checked against the Sources index), with the system's OpenSSL, SQLite and libffi.
# About ten minutes on two cores, once.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${MCP_OPERATOR_CACHE:-$HOME/.cache/mcp-operator}"
PYVER=3.13.5
TARBALL="python3.13_${PYVER}.orig.tar.xz"
SHA256=93e583f243454e6e9e4588ca2c2662206ad961659863277afcdb96801647d640
PYTHON="$CACHE/python3.13/bin/python3.13"
VENV="$CACHE/contextforge-venv"
CONTEXTFORGE="mcp-contextforge-gateway==1.1.0"

if [[ ! -x "$PYTHON" ]]; then
  BUILD="$CACHE/build/python3.13"
  rm -rf "$BUILD" && mkdir -p "$BUILD"
  curl -fsSL -o "$BUILD/$TARBALL" "http://deb.debian.org/debian/pool/main/p/python3.13/$TARBALL"
  echo "$SHA256  $BUILD/$TARBALL" | sha256sum --check --quiet
  tar -xJf "$BUILD/$TARBALL" -C "$BUILD"
  (
    cd "$BUILD/Python-$PYVER"
    ./configure --quiet --prefix="$CACHE/python3.13" --without-ensurepip >/dev/null
    make --quiet -j"$(nproc)" >/dev/null 2>&1
    make --quiet altinstall >/dev/null 2>&1
  )
  "$PYTHON" -c "import ssl, sqlite3, ctypes, lzma, bz2, zlib" # the modules ContextForge's stack needs
  rm -rf "$BUILD"
fi

if [[ ! -x "$VENV/bin/mcpgateway" ]]; then
  "$PYTHON" -m venv --without-pip "$VENV"
  # The venv gets pip from PyPI's wheel (the build has no ensurepip).
  curl -fsSL -o "$CACHE/get-pip.whl" "$(python3 - <<'PY'
import json, urllib.request
data = json.load(urllib.request.urlopen("https://pypi.org/pypi/pip/json"))
print(next(f["url"] for f in data["urls"] if f["filename"].endswith(".whl")))
PY
)"
  "$VENV/bin/python" "$CACHE/get-pip.whl/pip" install --quiet "$CACHE/get-pip.whl" 2>/dev/null \
    || "$VENV/bin/python" -c "import sys, runpy; sys.path.insert(0, '$CACHE/get-pip.whl'); sys.argv=['pip','install','--quiet','$CACHE/get-pip.whl']; runpy.run_module('pip', run_name='__main__')"
  "$VENV/bin/python" -m pip install --quiet "$CONTEXTFORGE"
fi
echo "ContextForge installed: $VENV/bin/mcpgateway ($("$VENV/bin/python" --version))"
