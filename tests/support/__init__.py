"""Helpers shared by the tests: real MCP peers and a hostile MCP server."""
