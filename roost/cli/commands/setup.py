"""Setting roost up and checking it: install, doctor, notify, demo."""

from __future__ import annotations

import sys

import click

from roost.cli.common import fail, print_json, usage_error


@click.command()
@click.option("--uninstall", "remove", is_flag=True, help="Remove the installed extension.")
@click.option("--print-path", is_flag=True, help="Print the install directory only.")
def install(remove: bool, print_path: bool) -> None:
    """Install the roost pi extension where pi loads it (<agent dir>/extensions/roost/)."""
    from roost.cli import install as installer

    directory = installer.install_dir()
    if print_path:
        click.echo(directory)
        return
    try:
        if remove:
            removed = installer.uninstall(directory)
            click.echo(f"removed {directory}" if removed else f"not installed ({directory})")
            return
        outcome = installer.install(directory)
    except (installer.InstallError, OSError) as exc:
        fail(str(exc))
    from roost.definitions import store

    store.write_catalog_cache()  # roost_spawn's list of agents in your own pi
    if not outcome.written:
        click.echo(f"up to date: {directory}")
    else:
        verb = "installed" if outcome.created else "updated"
        click.echo(f"{verb} the roost pi extension in {directory} ({', '.join(outcome.written)})")
        click.echo("pi loads it at start-up (in a running pi: /reload)")


@click.command()
@click.option(
    "--enable",
    "action",
    flag_value="enable",
    help="Add notify-send hooks for needs_input, failed and gave_up.",
)
@click.option("--disable", "action", flag_value="disable", help="Remove them.")
@click.option(
    "--send", "action", flag_value="send", help="(the hook) Read one event as JSON on stdin and notify."
)
def notify(action: str | None) -> None:
    """Desktop notifications (notify-send) for jobs that need you."""
    from roost.cli import notify as notifier

    if action is None:
        usage_error("say --enable, --disable or --send")
    try:
        if action == "send":
            sys.exit(notifier.send(sys.stdin.read()))
        click.echo(notifier.enable() if action == "enable" else notifier.disable())
    except notifier.NotifyError as exc:
        fail(str(exc))


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (docs: JSON output).")
@click.option("--model", metavar="P/ID", help="Check this model instead of pi's default.")
@click.option("--agent", metavar="NAME", help="Check this agent definition's model.")
def doctor(as_json: bool, model: str | None, agent: str | None) -> None:
    """Check pi, node, the extension (a real load in your pi), the model pi would use
    (known, with credentials: no network call), roostd and ROOST_HOME.

    Exit 0 when all is well (warnings included), 1 when something is wrong."""
    from roost.cli.doctor.report import render, run_checks

    report = run_checks(model, agent)
    if as_json:
        print_json(report.as_json())
    else:
        from roost.display.output import echo_styled

        # render() made each check's text visible; its marks' colours are roost's own.
        for line in render(report, sys.stdout.isatty()):
            echo_styled(line)
    sys.exit(0 if report.ok else 1)


@click.command()
@click.option(
    "--keep",
    is_flag=True,
    help="Leave a sandbox to play in: its roostd, its jobs "
    "and the scripted model keep running; prints how to use it and end it.",
)
@click.option("--no-scenes", is_flag=True, help="Skip the story: only make the sandbox (implies --keep).")
@click.option(
    "--end",
    "end",
    is_flag=True,
    help="End a kept sandbox (the one ROOST_HOME "
    "names, or DIR): stop its jobs, roostd and model, and delete it.",
)
@click.argument("directory", required=False, metavar="[DIR]")
def demo(keep: bool, no_scenes: bool, end: bool, directory: str | None) -> None:
    """The showcase: real pi against roost's scripted local model, no API key.

    `roost demo --keep` leaves its sandbox running to play in (`--no-scenes`: the sandbox
    alone, at once); `roost demo --end [DIR]` ends it."""
    from roost.cli.demo import end_sandbox, run_demo

    if end:
        if keep or no_scenes:
            usage_error("--end ends a sandbox: not with --keep or --no-scenes")
        sys.exit(end_sandbox(directory))
    if directory is not None:
        usage_error(f"unexpected argument {directory!r} (DIR goes with --end)")
    sys.exit(run_demo(keep=keep or no_scenes, scenes=not no_scenes))


def register(group: click.Group) -> None:
    group.add_command(install)
    group.add_command(doctor)
    group.add_command(notify)
    group.add_command(demo)
