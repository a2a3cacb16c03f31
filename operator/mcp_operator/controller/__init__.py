"""The controllers: kopf handlers (thin), and the parts every controller shares.

- ``handlers``          the kopf handlers: login, start-up, clean-up, watch events handed on
- ``login``             kopf's login answers: the same credential taken back, repeats paused
- ``kind``              the controller of one kind: from watch event to status, InvalidSpec
- ``settings``          the operator's settings, grouped, a docstring under every field
- ``parsing``           a body parsed into its model where its event arrives (or why not)
- ``worker``            the per-object schedule: wake, interval, back-off, one global limit
- ``slots``             the worker's global concurrency limit, with its queue counted
- ``shards``            which objects this operator owns, by a label selector (pure)
- ``conditions``        conditions as a reconciler wants them, merged into ``metav1.Condition``
- ``status_writer``     status patches, and the Events of transitions
- ``events``            what an Event says and which object it is about (pure)
- ``render``            pure render helpers: owner references, labels, security contexts
- ``network``           what the NetworkPolicies of both kinds share, rendered (pure)
- ``network_policies``  what applying both kinds' NetworkPolicies shares; probes' origin
- ``opt_in``            the label opt-ins of Secrets and ServiceAccounts, for every kind
- ``admission``         which admission layer guards the tenants' objects, found at start
- ``lease``             leader election's decision of one round (pure)
- ``leader``            leader election's loop, and running the operator only while leading
- ``endpoints``         ``/healthz`` and ``/metrics``, served by leader and followers
- ``metrics``           the operator's Prometheus metrics
- ``mcpserver``         the MCPServer controller (the fleet)
- ``agentrun``          the AgentRun controller (the runs)

``mcpserver`` and ``agentrun`` are the two kinds built on ``kind``: each keeps its reconcile,
its wake index and its status decisions.
"""
