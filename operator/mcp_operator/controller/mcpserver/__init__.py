"""The MCPServer controller: wake policy, reconcile, managed children, render and status."""
