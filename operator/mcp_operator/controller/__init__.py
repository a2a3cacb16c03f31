"""The controllers: kopf handlers (thin), settings, conditions and the per-object worker.

``controller.mcpserver`` reconciles MCPServers; the parts every controller shares
(conditions, the worker schedule, render helpers) live directly in this package.
"""
