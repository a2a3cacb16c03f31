"""The command line's subcommands, one module each (wired by :mod:`mcp_operator.cli`).

``run`` has two groups of flags in modules of their own.

- ``run``          ``mcp-operator run``: the operator itself, in a cluster or from a laptop
- ``run_network``  its NetworkPolicy flags, parsed into settings
- ``run_ha``       its high-availability flags: leader election, shards, metrics, identity
- ``probe``        ``mcp-operator probe URL``: what the operator would write into status
- ``adapter``      ``mcp-operator adapter``: a stdio MCP server over Streamable HTTP
- ``bridge``       ``mcp-operator bridge``: the AgentRun's MCP sidecar
- ``dev``          ``mcp-operator dev``: the local control plane and the demo

Each imports its room inside ``run``, so that one program does not load the others'.
"""
