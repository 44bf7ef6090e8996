"""`roost mcp`: roost as an MCP server (docs/guides/mcp.md), for agents and editors that
call tools over the Model Context Protocol. A client of roostd's socket like the CLI and
the web, with no state of its own: `calls` (roostd's requests, blocking), `safetext` (no
terminal control and no mailbox wire form in anything a client reads), `shapes` (the
tools' JSON Schemas), `tools` (the MCP server: its tools and resources, on the official
SDK), `httpmode` (streamable HTTP behind a bearer token).
"""
