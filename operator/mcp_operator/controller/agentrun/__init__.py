"""The AgentRun controller: resolve references, reconcile, render (ConfigMap + Pod), status.

- ``runs``       every AgentRun this operator watches, each on its own worker
- ``reconcile``  one reconcile of one AgentRun: servers, resolve, ConfigMap and Pod, status
- ``resolve``    an AgentRun's server references resolved, from the MCPServers (pure)
- ``render``     the agent Pod, and the names, labels and paths of a run's children (pure)
- ``configmap``  the bridge's configuration file for a run, and its ConfigMap (pure)
- ``mounts``     where the bridge finds its secrets and tokens: a directory each (pure)
- ``network``    the egress NetworkPolicy of an AgentRun's Pod, rendered (pure)
- ``egress``     that policy applied, its external servers' names resolved
- ``status``     what an AgentRun's status says after each reconcile (pure)
"""
