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
    ./configure --quiet --prefix="$CACHE/python3.13" >/dev/null
    make --quiet -j"$(nproc)" >/dev/null 2>&1
    make --quiet altinstall >/dev/null 2>&1
  )
  "$PYTHON" -c "import ssl, sqlite3, ctypes, lzma, bz2, zlib" # the modules ContextForge's stack needs
  rm -rf "$BUILD"
fi

if [[ ! -x "$VENV/bin/mcpgateway" ]]; then
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV" # pip from the build's own ensurepip wheel
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
  "$VENV/bin/python" -m pip install --quiet "$CONTEXTFORGE"
fi
echo "ContextForge installed: $VENV/bin/mcpgateway ($("$VENV/bin/python" --version))"
