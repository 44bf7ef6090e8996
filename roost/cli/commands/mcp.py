"""`roost mcp`: roost as an MCP server (roost.mcp), over stdio or, with --http, streamable
HTTP. The SDK is imported only here, when the command runs (docs/guides/mcp.md)."""

from __future__ import annotations

import click

from roost.cli.common import fail


@click.command("mcp")
@click.option(
    "--http",
    "http",
    is_flag=True,
    help="Serve streamable HTTP (on 127.0.0.1) instead of stdio; clients send a bearer token (--token-file).",
)
@click.option(
    "--bind",
    default="127.0.0.1",
    show_default=True,
    metavar="ADDR",
    help="With --http: the address to listen on (not loopback: needs TLS).",
)
@click.option(
    "--port",
    default=8478,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="With --http: the TCP port (0: any free one; the URL is printed).",
)
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False),
    metavar="F",
    help="With --http: the bearer token's file, 0600 (default $ROOST_HOME/mcp-token, made on first use).",
)
@click.option(
    "--tls-cert",
    type=click.Path(exists=True, dir_okay=False),
    metavar="F",
    help="With --http: serve HTTPS with this certificate (PEM; with --tls-key).",
)
@click.option(
    "--tls-key",
    type=click.Path(exists=True, dir_okay=False),
    metavar="F",
    help="With --http: the private key of --tls-cert (PEM).",
)
@click.option(
    "--name", metavar="NAME", help="Who send_message's messages are from (default: the client's own name)."
)
def mcp(
    http: bool,
    bind: str,
    port: int,
    token_file: str | None,
    tls_cert: str | None,
    tls_key: str | None,
    name: str | None,
) -> None:
    """Serve roost's jobs to an MCP client (Claude Code, Codex, pi): stdio by default.

    Set it up with `claude mcp add roost -- roost mcp` (docs: MCP). Jobs it starts run
    with its environment."""
    if not http and (token_file or tls_cert or tls_key or bind != "127.0.0.1" or port != 8478):
        fail("--bind, --port, --token-file and --tls-* go with --http", 2)
    try:
        from roost.mcp import tools
    except ImportError as exc:
        fail(f"roost mcp needs the MCP SDK ({exc}): pip install 'roost[mcp]' (scripts/setup installs it)")
    server = tools.build(name)
    if not http:
        import sys

        from roost.display.output import terminal

        sys.stdout = terminal()  # the JSON-RPC wire: the SDK writes it as it is
        server.run("stdio")
        return
    from roost.mcp import httpmode

    try:
        httpmode.serve(server, bind, port, httpmode.token_file(token_file), tls_cert, tls_key)
    except httpmode.Refused as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"could not serve on {bind}:{port}: {exc.strerror or exc}")


def register(group: click.Group) -> None:
    group.add_command(mcp)
