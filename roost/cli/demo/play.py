"""`roost demo`'s play mode: the sandbox kept after the story (`keep_sandbox`: its scripted
model moved to a process of its own, its file, the lines to use it), the environment that
reaches it (`sandbox_env`) and its end (`end_sandbox`, `roost demo --end`)."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

from roost.fakellm.sandbox import Sandbox

SANDBOX_FILE = "roost-demo.json"
"""In a kept sandbox's root: what `roost demo --end` needs (and the mark that it is one)."""
SOCKET_ROOM = 60
"""The longest TMPDIR a sandbox goes under: a job's ext.sock, ROOT/rh/jobs/ID/ext.sock, must
fit a Unix socket path (107 bytes); a longer TMPDIR falls back to /tmp."""


def say(line: str = "") -> None:
    print(line, flush=True)


# -- play mode: a kept sandbox ----------------------------------------------------------------
def keep_sandbox(box: Sandbox) -> bool:
    """Hand the model over to a process of its own (on the same port, so pi's models.json
    stays true) and leave the sandbox: its file, then the lines to use it and end it."""
    port, url = box.llm.port, box.llm.base_url
    box.llm.stop()
    log = open(box.root / "model.log", "ab")  # noqa: SIM115 - the child's, from here on
    with log:
        model = subprocess.Popen(
            [sys.executable, "-m", "roost.cli.demo.model", str(box.root), str(port)],
            env=box.env,
            cwd=box.root,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    from roost.host import procid

    start, ticks, boot = procid.identity(model.pid)
    try:
        _connectable(port, model)
    except OSError as exc:
        say(f"roost demo: the scripted model did not start ({exc}); see {box.root / 'model.log'}")
        with contextlib.suppress(ProcessLookupError):
            model.kill()
        return False
    (box.root / SANDBOX_FILE).write_text(
        json.dumps(
            {
                "roostHome": str(box.roost_home),
                "agentDir": str(box.agent_dir),
                "model": {"pid": model.pid, "start": start, "ticks": ticks, "boot": boot, "port": port},
            }
        )
        + "\n"
    )
    exports = " ".join(f"{key}={shlex.quote(value)}" for key, value in sandbox_env(box).items())
    say()
    say(
        "━━ the sandbox keeps running: its roostd, its jobs and the scripted model (pid "
        f"{model.pid}, {url}). To use it, in a shell:"
    )
    say(f"  export {exports}")
    say("  roost view")
    say(
        "new jobs and replies there (roost run '…', roost reply JOB '…') get the scripted "
        "model's answers; no API key, nothing leaves 127.0.0.1. End it (its jobs, roostd, the "
        "model, and the directory) with:"
    )
    say(f"  roost demo --end          (or: roost demo --end {shlex.quote(str(box.root))})")
    return True


def sandbox_env(box: Sandbox) -> dict[str, str]:
    """What a shell needs to use a kept sandbox: its ROOST_HOME, its pi agent dir (the
    scripted model's models.json, the demo's roost.json), pi offline."""
    return {
        "ROOST_HOME": str(box.roost_home),
        "PI_CODING_AGENT_DIR": str(box.agent_dir),
        "PI_OFFLINE": "1",
        "PI_SKIP_VERSION_CHECK": "1",
    }


def _connectable(port: int, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
            return
        except OSError:
            if proc.poll() is not None:
                raise OSError(f"it exited with {proc.returncode}") from None
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)  # start-up only


def end_sandbox(directory: str | None) -> int:
    """`roost demo --end [DIR]`: stop a kept sandbox's jobs, roostd and model, and delete it.
    DIR is the sandbox or its ROOST_HOME (default: ROOST_HOME); a directory without the
    sandbox file is refused, never deleted."""
    from roost.cli.commands.daemon import live_workers, stop_workers
    from roost.host.procid import alive, same_process, stop_exact
    from roost.wire.client import DaemonUnavailable, connect

    given = directory or os.environ.get("ROOST_HOME")
    if not given:
        say(
            "roost demo --end: no sandbox named: give its DIR, or set ROOST_HOME to its "
            "ROOST_HOME (the export line `roost demo --keep` printed)"
        )
        return 2
    path = Path(given).expanduser().absolute()
    root = next((p for p in (path, path.parent) if (p / SANDBOX_FILE).is_file()), None)
    if root is None:
        say(
            f"roost demo --end: {path} is not a sandbox of `roost demo --keep` (no "
            f"{SANDBOX_FILE}); nothing done"
        )
        return 1
    try:
        info = json.loads((root / SANDBOX_FILE).read_text())
        home = Path(info["roostHome"])
        model = info["model"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        say(f"roost demo --end: {root / SANDBOX_FILE} is unreadable ({exc}); nothing done")
        return 1
    if home.parent != root:
        say(f"roost demo --end: {root / SANDBOX_FILE} names a ROOST_HOME outside it; nothing done")
        return 1
    os.environ["ROOST_HOME"] = str(home)
    os.environ["PI_CODING_AGENT_DIR"] = str(info.get("agentDir") or os.environ.get("PI_CODING_AGENT_DIR", ""))
    try:
        client = connect(autostart=False)
    except DaemonUnavailable:
        client = None
    if client is not None:
        with client:
            pid = client.request("status")["pid"]
            client.request("shutdown", timeout=120, jobs=True)
        deadline = time.monotonic() + 20
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
    stop_workers(live_workers())  # a worker roostd did not know of, or no roostd
    ticks, boot = model.get("ticks"), model.get("boot")  # None in a sandbox of an older roost
    ticks, boot = (ticks if type(ticks) is int else None), (boot if isinstance(boot, str) else None)
    if same_process(model.get("pid"), model.get("start"), ticks, boot):
        stop_exact(model["pid"], model["start"], 5.0, ticks, boot)
    shutil.rmtree(root, ignore_errors=True)
    if root.exists():
        say(f"roost demo --end: could not delete all of {root}")
        return 1
    say(f"sandbox {root} ended: its jobs, roostd and scripted model stopped, and deleted")
    return 0
