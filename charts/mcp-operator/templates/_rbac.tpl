{{/*
The rules the operator needs in every namespace it watches: the ClusterRole's
(cluster-scoped mode) and each Role's (namespaceScoped). One list, so that the two
modes cannot drift apart; every rule says why (tests/unit/test_install_manifests.py).
*/}}
{{- define "mcp-operator.namespacedRules" }}
  # kopf watches MCPServers: every change starts a reconcile (and wakes the
  # AgentRuns that reference the server). An AgentRun's reconcile reads each
  # server it references.
  - apiGroups: [mcp-operator.dev]
    resources: [mcpservers]
    verbs: [get, list, watch]
  # kopf watches AgentRuns; ttlSecondsAfterFinished deletes a finished run (its
  # Pod and ConfigMap follow by garbage collection). No other delete is granted.
  - apiGroups: [mcp-operator.dev]
    resources: [agentruns]
    verbs: [list, watch, delete]
  # Status is written by merge patches of the status subresource only; the
  # operator never changes a spec.
  - apiGroups: [mcp-operator.dev]
    resources: [mcpservers/status, agentruns/status]
    verbs: [patch]
  # Managed MCPServers: the Deployment is server-side applied; kopf watches
  # Deployments (labelled app.kubernetes.io/managed-by=mcp-operator; RBAC cannot
  # narrow by label) so that a rollout wakes its MCPServer. Every child is read
  # (get) before it is applied: one of its name that the owner does not control
  # is left alone (NameConflict).
  - apiGroups: [apps]
    resources: [deployments]
    verbs: [get, list, watch, create, patch]
  # Managed MCPServers' Services: read, then server-side applied when free or own.
  - apiGroups: [""]
    resources: [services]
    verbs: [get, create, patch]
  # A managed server's Pods are listed (by label) to explain a rollout in its
  # Deployed condition; the operator reads its own Pod to learn its own image.
  # An AgentRun's Pod is server-side applied once and watched (labelled
  # mcp-operator.dev/agent-run; RBAC cannot narrow by label): its phase is the
  # run's status. No exec, attach or delete.
  - apiGroups: [""]
    resources: [pods]
    verbs: [get, list, watch, create, patch]
  # An AgentRun's bridge configuration: read (is the name free, or the run's
  # own?), then server-side applied on every reconcile. It holds no secret value.
  - apiGroups: [""]
    resources: [configmaps]
    verbs: [get, create, patch]
  # Managed MCPServers' and restricted AgentRuns' NetworkPolicies (docs/security.md,
  # "NetworkPolicies"): read (is the name free, or the owner's own?), then server-side
  # applied; watched (labelled app.kubernetes.io/managed-by=mcp-operator; RBAC cannot
  # narrow by label) so that one deleted or edited by someone else is put back. Deleted
  # only when it is the owner's own and no longer wanted (--network-policies=disabled,
  # a run's egress open); one the operator did not create is never written.
  - apiGroups: [networking.k8s.io]
    resources: [networkpolicies]
    verbs: [get, list, watch, create, patch, delete]
  # Secrets named by spec.headers / spec.deployment.env are read for the probe
  # and the Pod template checksum, and used only when labelled
  # mcp-operator.dev/for-mcp-servers=true; kopf watches only Secrets with that
  # label (a label selector, listed in pages; RBAC cannot narrow by label) so
  # that a rotated token re-probes at once. Header values go to the server's URL.
  # Pull Secrets named by deployment.imagePullSecrets are read (by name) to read a
  # stdio image's ENTRYPOINT from the registry they are for.
  - apiGroups: [""]
    resources: [secrets]
    verbs: [get, list, watch]
  # A ServiceAccount named by a managed server's spec.deployment.serviceAccountName
  # is read to check its opt-in label before Pods run as it.
  - apiGroups: [""]
    resources: [serviceaccounts]
    verbs: [get]
  # Events on transitions (ToolsDiscovered, ProbeFailed, ...), posted by the
  # operator and by kopf for its own warnings and errors (core v1 Events).
  - apiGroups: [""]
    resources: [events]
    verbs: [create]
{{- end }}
