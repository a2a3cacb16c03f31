# Sourced by hack/build-control-plane.sh and hack/build-node.sh: the one place
# that knows which k8s.io/kubernetes release the local cluster runs, and how a
# command of it is built from the Go module proxy.
#
# Why a wrapper module: k8s.io/kubernetes replaces every k8s.io/<staging> module
# by a path inside its own repository (./staging/src/...), which a consumer of
# the module cannot see. A wrapper go.mod requires k8s.io/kubernetes and
# replaces each staging module by its published v0.<minor>.<patch>; the list of
# staging modules is read from that release's own go.mod, so a version bump
# needs no edit here beyond the pin below.
#
# Needs CACHE set by the caller; defines KUBERNETES_VERSION and
# build_kubernetes_commands BIN_DIR CMD... (CMD: kube-apiserver, kubelet, ...).

KUBERNETES_VERSION="${KUBERNETES_VERSION:-v1.36.3}"

# The wrapper module in $CACHE/build/kubernetes-$KUBERNETES_VERSION, made once
# and shared by every build of this release (under a lock: two builds may run
# at once).
_kubernetes_wrapper() {
  local kdir="$CACHE/build/kubernetes-$KUBERNETES_VERSION"
  mkdir -p "$CACHE/build"
  (
    flock 9
    if [[ -f "$kdir/.complete" ]]; then exit 0; fi
    rm -rf "$kdir" && mkdir -p "$kdir" && cd "$kdir"
    go mod init mcp-operator.dev/build/kubernetes >/dev/null 2>&1
    local kmod staging_version module
    kmod=$(go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
    staging_version="v0.${KUBERNETES_VERSION#v1.}"
    go mod edit -go="$(sed -n 's/^go \(.*\)$/\1/p' "$kmod")" -require="k8s.io/kubernetes@$KUBERNETES_VERSION"
    for module in $(sed -n 's#^[[:space:]]*\(k8s.io/[^[:space:]]*\) => ./staging/.*#\1#p' "$kmod"); do
      go mod edit -replace="$module=$module@$staging_version"
    done
    printf '//go:build tools\n\npackage tools\n' > tools.go
    touch .complete
  ) 9>"$CACHE/build/.kubernetes-$KUBERNETES_VERSION.lock"
  echo "$kdir"
}

build_kubernetes_commands() {
  local bin="$1"; shift
  local kdir git_commit build_date ldflags p command started
  kdir=$(_kubernetes_wrapper)
  git_commit=$(cd "$kdir" && go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | sed -n 's/.*"Hash": "\(.*\)".*/\1/p' | sed -n 1p)
  build_date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  ldflags="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $p.gitVersion=$KUBERNETES_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$(echo "$KUBERNETES_VERSION" | cut -d. -f2)"
    ldflags+=" -X $p.gitTreeState=clean -X $p.buildDate=$build_date -X $p.gitCommit=${git_commit:-unknown}"
  done
  mkdir -p "$bin"
  for command in "$@"; do
    started=$(date +%s)
    (cd "$kdir" && GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0 \
      go build -trimpath -ldflags "$ldflags" -o "$bin/$command" "k8s.io/kubernetes/cmd/$command")
    echo "Built $command $KUBERNETES_VERSION in $(( $(date +%s) - started ))s"
  done
}
