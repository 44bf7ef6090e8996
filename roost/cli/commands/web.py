"""`roost web`: the browser surface (roost.web), and its devices: `pair`, `devices`, `revoke`."""

from __future__ import annotations

import click

from roost.cli.common import fail, print_json


class WebGroup(click.Group):
    """`roost web [OPTIONS]` serves; `roost web pair|devices|revoke` manage it."""


@click.group(cls=WebGroup, invoke_without_command=True)
@click.option(
    "--bind",
    default="127.0.0.1",
    show_default=True,
    metavar="ADDR",
    help="The address to listen on (not loopback: needs --tls-cert/--tls-key or --insecure-http).",
)
@click.option(
    "--port",
    default=8477,
    show_default=True,
    type=click.IntRange(1, 65535),
    help="The TCP port to listen on.",
)
@click.option("--read-only", is_flag=True, help="Serve views only: every action is refused.")
@click.option(
    "--tls-cert",
    type=click.Path(exists=True, dir_okay=False),
    metavar="F",
    help="Serve HTTPS with this certificate (PEM; with --tls-key).",
)
@click.option(
    "--tls-key",
    type=click.Path(exists=True, dir_okay=False),
    metavar="F",
    help="The private key of --tls-cert (PEM).",
)
@click.option(
    "--insecure-http", is_flag=True, help="Allow plain HTTP on a non-loopback address (prints a warning)."
)
@click.option(
    "--host",
    "names",
    multiple=True,
    metavar="NAME",
    help="Another name the browser reaches this server by (a tailnet or tunnel "
    "name); the Host header must be one of them (repeatable).",
)
@click.pass_context
def web(
    ctx: click.Context,
    bind: str,
    port: int,
    read_only: bool,
    tls_cert: str | None,
    tls_key: str | None,
    insecure_http: bool,
    names: tuple[str, ...],
) -> None:
    """Serve roost in a browser (foreground); prints a one-time pairing link on stdout."""
    if ctx.invoked_subcommand is not None:
        return
    from roost.web.serve import Refused, check, run

    try:
        check(bind, tls_cert, tls_key, insecure_http)
    except Refused as exc:
        fail(str(exc))
    import os

    from roost.wire.client import daemon_running, start_daemon_background

    if not daemon_running() and not os.environ.get("ROOST_NO_AUTOSTART"):
        start_daemon_background()  # as every command does; the web follows it when it is up
    try:
        run(bind, port, read_only, tls_cert, tls_key, insecure_http, names)
    except Refused as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"could not serve on {bind}:{port}: {exc.strerror or exc}")


@web.command()
def pair() -> None:
    """Print a new one-time pairing link for the running `roost web` (5 minutes, one use)."""
    from roost.web.devices import Store
    from roost.web.serve import pairing_link

    store = Store()
    url = store.running_url()
    if url is None:
        fail("no `roost web` is running on this ROOST_HOME (start it with `roost web`)")
    click.echo(pairing_link(url, store))


@web.command()
@click.option("--json", "as_json", is_flag=True, help="A JSON list of devices.")
def devices(as_json: bool) -> None:
    """The paired devices: id, name, when paired."""
    from roost.web.devices import Store

    found = [d.public() for d in Store().devices()]
    if as_json:
        print_json(found)
        return
    if not found:
        click.echo("no paired devices")
    for device in found:
        click.echo(
            f"{device['id']}  paired {device['paired']}  seen {device['lastSeen'] or '-'}  {device['name']}"
        )


@web.command()
@click.argument("device", required=False)
@click.option("--all", "everything", is_flag=True, help="Revoke every device.")
def revoke(device: str | None, everything: bool) -> None:
    """Revoke a device (its cookie stops working at once), or --all."""
    from roost.web.devices import Store

    if bool(device) == everything:
        fail("give a device id or --all (see roost web devices)", 2)
    gone = Store().revoke(None if everything else device)
    if not gone and device:
        fail(f"no device {device} (see roost web devices)", 2)
    click.echo(f"revoked {len(gone)} device{'s' if len(gone) != 1 else ''}")


def register(group: click.Group) -> None:
    group.add_command(web)
