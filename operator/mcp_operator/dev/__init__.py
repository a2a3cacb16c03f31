"""Local development: a real cluster on this machine, and the demo that runs on it.

- ``cluster``             the control plane: etcd, kube-apiserver, kube-controller-manager
- ``node``                the one real node: containerd, the kubelet, kube-proxy, a registry
- ``node_lock``           the machine-wide node lock: one node per machine, and who holds it
- ``node_needs``          what a node needs on this machine, and the command that supplies each
- ``node_registry``       the node's image registry: its sandbox image, its KEP-1755 ConfigMap
- ``node_config``         the node's configuration files, rendered from its layout (pure)
- ``node_host``           what the node changes on the host, recorded, and taken back
- ``addon``               what the node and its add-ons agree on: ``AddOn``, ``NodeError``
- ``node_addons``         the node's add-ons: cluster DNS and the NetworkPolicy enforcer
- ``node_addons_config``  what the add-ons read and apply, rendered (pure)
- ``processes``           where the binaries (and kubectl) are, how a process starts and stops
- ``pki``                 the cluster's CA, and the certificates it signs
- ``images``              our images as ``make images`` built them, pushed to a registry
- ``image_inputs``        the inputs of an image build, and the hash that names it
- ``demo``                ``make demo``: an agent's tool calls governed and audited
- ``demo_cluster``        the cluster the demo runs on, what the demo needs, kubectl against it
- ``demo_objects``        what the demo applies, and how it reads the run (pure)
"""
