"""The MCPServer controller: wake policy, reconcile, managed children, render and status.

- ``fleet``         every MCPServer this operator watches, each on its own worker
- ``wake``          which change of a Secret or a Deployment wakes which MCPServer
- ``reconcile``     one reconcile of one MCPServer: deploy (managed), resolve headers, probe
- ``managed``       a managed server's Deployment, Service and NetworkPolicy applied, and the truth
- ``render``        a managed server's children: parsed objects in, manifest dicts out (pure)
- ``containers``    the containers of a managed server's Pod: server, adapter or front (pure)
- ``network``       the NetworkPolicy of a managed server's Pods, rendered (pure)
- ``images``        a managed server's image configuration, read from its registry when needed
- ``access``        a managed server's access ConfigMap: callers, keys, revoked Pods
- ``data_path``     the operator's side of authentication on a managed server's data path
- ``isolation``     the Isolation condition: who besides a run's bridge can call a server (pure)
- ``auth``          the probe's OAuth credentials for external servers, kept between probes
- ``destinations``  which egress policy a server's probe gets (pure)
- ``listeners``     ``notifications/tools/list_changed`` listeners, one per server, bounded
- ``pins``          pinned tool definitions: what a probe changed, what bridges enforce (pure)
- ``report``        what a probe writes into status, and the warnings it raises
- ``status``        what an MCPServer's status says after each reconcile (pure)
"""
