"""The controllers: kopf handlers (thin), and the parts every controller shares.

- ``handlers``       the kopf handlers: start-up, clean-up, watch events handed on
- ``settings``       the operator's settings, grouped, a docstring under every field
- ``parsing``        a body parsed into its model where its event arrives (or why not)
- ``worker``         the per-object schedule: wake, interval, back-off, one global limit
- ``conditions``     conditions as a reconciler wants them, merged into ``metav1.Condition``
- ``status_writer``  status patches, and the Events of transitions (``events``)
- ``render``         pure render helpers: owner references, labels, security contexts

``controller.mcpserver`` reconciles MCPServers with these parts.
"""
