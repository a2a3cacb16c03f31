#!/usr/bin/env bash
# Installs the Debian packages that `make images` (hack/build-images.sh) builds with, when
# one is missing: buildah (the daemonless image builder; it brings uidmap and the containers
# configuration), runc (the runtime buildah runs RUN steps with) and mmdebstrap (base images
# from Debian's packages). No Docker engine is needed; where one answers, the build uses it
# and these stay unused. Needs root and Debian's apt repositories.
set -euo pipefail

PACKAGES=(buildah runc mmdebstrap)
missing=()
for package in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$package")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "Image packages (${PACKAGES[*]}) already installed"
  exit 0
fi
[[ $(id -u) -eq 0 ]] || { echo "installing ${missing[*]} needs root (apt-get)" >&2; exit 1; }
echo "Installing ${missing[*]}"
apt-get update -q
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
buildah --version
mmdebstrap --version
