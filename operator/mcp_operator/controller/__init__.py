"""The controllers: kopf handlers (thin), and the parts every controller shares.

- ``handlers``       the kopf handlers: login, start-up, clean-up, watch events handed on
- ``kind``           the controller of one kind: observe, parse once per generation,
                     worker, metrics, status writer, InvalidSpec, the end of an object
- ``settings``       the operator's settings, grouped, a docstring under every field
- ``parsing``        a body parsed into its model where its event arrives (or why not)
- ``worker``         the per-object schedule: wake, interval, back-off, one global limit
- ``conditions``     conditions as a reconciler wants them, merged into ``metav1.Condition``
- ``status_writer``  status patches, and the Events of transitions (``events``)
- ``render``         pure render helpers: owner references, labels, security contexts
- ``lease``          leader election's decision of one round (pure)
- ``leader``         leader election's loop, and running the operator only while leading
- ``endpoints``      ``/healthz`` and ``/metrics``, served by leader and followers
- ``metrics``        the operator's Prometheus metrics
- ``slots``          the worker's global concurrency limit, with its queue counted

``controller.mcpserver`` (the fleet) and ``controller.agentrun`` (the runs) are the two
kinds built on ``kind``: each keeps its reconcile, its wake index and its status decisions.
"""
