"""Allows ``python -m mcp_operator``."""

from mcp_operator.cli import main

raise SystemExit(main())
