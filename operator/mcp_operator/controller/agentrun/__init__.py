"""The AgentRun controller: resolve references, reconcile, render (ConfigMap + Pod), status."""
