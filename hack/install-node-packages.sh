#!/usr/bin/env bash
# Installs the Debian packages the local cluster's node needs (see
# operator/mcp_operator/dev/node_needs.py): runc (the OCI runtime containerd's shim
# starts; Debian's 1.1.5 runs our Pods under cgroup v1 here), nftables (`nft`:
# the node's traffic guard, kube-proxy's nftables mode, the cleanup of both),
# iptables and ipset (what the NetworkPolicy enforcer and the CNI portmap
# plugin program), conntrack (kube-proxy clears stale UDP entries with it) and
# iproute2 (`ip`: the cluster bridge and the Service route); busybox-static
# (one static binary: the e2e tests make a small image with a shell from it).
# Skipped when every package is installed; needs root (the node needs it too),
# and without root only says what it would install (fails under CI=true).
set -euo pipefail
PACKAGES=(runc nftables iptables ipset conntrack iproute2 busybox-static)

missing=()
for package in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "Node packages already installed: ${PACKAGES[*]}"
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  # Without root there is no node either: its tests skip locally (and fail under CI=true).
  echo "Not installing ${missing[*]}: that needs root (so does the local cluster's node)" >&2
  [[ "${CI:-}" == "true" ]] && exit 1
  exit 0
fi
start=$(date +%s)
export DEBIAN_FRONTEND=noninteractive
# Another apt run (a second install script) may hold the lock: wait for it, not fail.
apt-get -o DPkg::Lock::Timeout=600 update -qq
apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "Installed ${missing[*]} in $(( $(date +%s) - start ))s"
