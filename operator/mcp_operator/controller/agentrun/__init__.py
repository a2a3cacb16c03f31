"""The AgentRun controller: resolve references, reconcile, render (ConfigMap + Pod), status.

- ``runs``       every AgentRun this operator watches, each on its own worker
- ``reconcile``  one reconcile of one AgentRun: servers, resolve, ConfigMap and Pod, status
- ``resolve``    an AgentRun's server references resolved, from the MCPServers (pure)
- ``render``     the bridge configuration, its ConfigMap and the agent Pod (pure)
- ``network``    the egress NetworkPolicy of an AgentRun's Pod, rendered (pure)
- ``egress``     that policy applied, its external servers' names resolved
- ``status``     what an AgentRun's status says after each reconcile (pure)
"""
