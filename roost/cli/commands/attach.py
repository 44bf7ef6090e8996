"""`roost attach`: a job's session in the interactive pi, then back to the background."""

from __future__ import annotations

import os
import sys

import click

from roost.cli.common import daemon, fail
from roost.display import views


@click.command()
@click.argument("job")
def attach(job: str) -> None:
    """Open the job's session in the interactive pi; back to the background on quit."""
    import signal
    import subprocess

    from roost.display.answerpaths import job_dir, session_file
    from roost.host import paths

    with daemon() as client:
        row = client.request("show", job=job)["job"]
        if row["kind"] != "pi":
            fail(f"job {row['id']} is a shell job: nothing to attach to")
        directory = job_dir(row["id"])  # its prompt file and session.seen are written there
        if row["status"] not in ("", "attached") or row["state"] in ("running", "starting"):
            name = views.printable(row["name"])
            click.echo(f"waiting for the current run of {row['id']} ({name}) to settle…", err=True)
        attached = client.request("attach", job=row["id"])
    try:  # pi writes the session: inside ROOST_HOME, or the job's handed-off session
        session_file(row["id"], attached.get("session"))
    except SystemExit:
        _detach(row["id"])
        raise
    try:
        from roost.pi.locate import find_pi

        argv = find_pi().argv + ["--session", attached["session"], "-e", str(paths.extension_path())]
        # The job's agent definition holds in the foreground too (same tools and prompt).
        definition = row.get("agentDefinition") or {}
        if definition.get("tools") is not None:
            argv += ["--tools", ",".join(definition["tools"])]
        if definition.get("prompt"):
            from roost.worker.launch import prompt_file

            argv += ["--append-system-prompt", str(prompt_file(row, definition["prompt"]))]
    except FileNotFoundError as exc:  # PiNotFound
        _detach(row["id"])
        fail(str(exc))
    env = dict(os.environ, ROOST_ATTACH_JOB=row["id"])
    cwd = attached["cwd"] if os.path.isdir(attached["cwd"]) else None
    # Ctrl+C belongs to pi while it runs: the job must not go back to the background
    # under a pi that still holds the session (a no-op handler, unlike SIG_IGN, is not
    # inherited by pi).
    signal.signal(signal.SIGINT, lambda signum, frame: None)
    try:
        code = subprocess.call(argv, env=env, cwd=cwd)
    finally:
        from roost.locks import writers

        # What this pi wrote is roost's: not a sign of another writer (roost.locks.writers).
        writers.remember(attached["session"], str(directory))
        outcome = _detach(row["id"])
    click.echo(f"{row['id']} is back in the background ({outcome})", err=True)
    sys.exit(code)


def _detach(job_id: str) -> str:
    with daemon() as client:
        return str(client.request("detach", job=job_id)["outcome"])


def register(group: click.Group) -> None:
    group.add_command(attach)
