"""`roost notify`: desktop notifications through hooks and notify-send.

`--enable` writes a hook for NOTIFY_TYPES into the user-level roost.json (other keys
kept) whose command is `env PATH=… DISPLAY=… roost notify --send` (the desktop variables of
the enabling command: DESKTOP_VARIABLES); that reads the event JSON on stdin and
calls notify-send with a title naming the job and a body with the question or error (a
call held for approval: its one line and the entry's id, from `approval.requested`).
An event identical to one notified within RATE_WINDOW seconds (same type, job and body)
is skipped, so a crash loop does not flood the desktop; the times live in
`$ROOST_HOME/notify-state.json` (under an flock: hooks run concurrently).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from roost.config import user_config_path
from roost.host import paths

# Not worker.gave_up: job.failed always follows it (with the same reason), and one failure
# is one notification.
NOTIFY_TYPES = ("job.needs_input", "job.failed", "approval.requested")
RATE_WINDOW = 5.0
BODY_MAX = 300


class NotifyError(Exception):
    """roost notify cannot do what was asked (the message says why)."""


DESKTOP_VARIABLES = ("PATH", "DISPLAY", "WAYLAND_DISPLAY", "DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR")
"""What notify-send needs from the environment of `roost notify --enable`: where it is, and
the desktop session to talk to. Hooks run with roostd's environment, which may be older
than the person's shell or come from a service manager without a desktop."""


def send_command(environ: dict[str, str] | None = None) -> list[str]:
    """The hook's command: this roost, by the interpreter it runs on, under `env` with the
    desktop variables of the command that enabled it (no secret among them)."""
    source = os.environ if environ is None else environ
    settings = [f"{name}={source[name]}" for name in DESKTOP_VARIABLES if source.get(name)]
    return [
        shutil.which("env") or "/usr/bin/env",
        *settings,
        sys.executable,
        "-m",
        "roost.cli.main",
        "notify",
        "--send",
    ]


def is_ours(command: Any) -> bool:
    return isinstance(command, list) and command[-2:] == ["notify", "--send"]


def _load_config(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise NotifyError(f"cannot read {path}: {exc}") from None
    if not isinstance(data, dict):
        raise NotifyError(f"{path} is not a JSON object")
    return data


def _write_config(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def enable() -> str:
    if shutil.which("notify-send") is None:
        raise NotifyError(
            "notify-send was not found on PATH (Debian/Ubuntu: apt install "
            "libnotify-bin); nothing was written"
        )
    path = user_config_path()
    data = _load_config(path)
    found = data.get("hooks")
    hooks: dict[str, Any] = found if isinstance(found, dict) else {}
    taken = [t for t in NOTIFY_TYPES if t in hooks and not is_ours(hooks[t])]
    if taken:
        raise NotifyError(
            f"{path} already has hooks for {', '.join(taken)}; remove them first (nothing was written)"
        )
    for kind in NOTIFY_TYPES:
        hooks[kind] = send_command()
    data["hooks"] = hooks
    _write_config(path, data)
    return f"desktop notifications on for {', '.join(NOTIFY_TYPES)} ({path})"


def disable() -> str:
    path = user_config_path()
    data = _load_config(path)
    hooks = data.get("hooks")
    if not isinstance(hooks, dict) or not any(is_ours(c) for c in hooks.values()):
        return "desktop notifications were not on"
    data["hooks"] = {k: c for k, c in hooks.items() if not is_ours(c)}
    if not data["hooks"]:
        del data["hooks"]
    _write_config(path, data)
    return f"desktop notifications off ({path})"


def message(event: dict[str, Any]) -> tuple[str, str, str]:
    """(urgency, title, body) for an event."""
    job = event.get("job") or {}
    name = job.get("name") or job.get("id") or "roost"
    kind = event.get("type")
    if kind == "job.needs_input":
        options = event.get("options")
        body = str(event.get("question") or "waiting for a reply")
        if options:
            body += " [" + " | ".join(str(o) for o in options) + "]"
        return "normal", f"roost: {name} needs input", body
    if kind == "job.failed":
        return "critical", f"roost: {name} failed", str(event.get("error") or "")
    if kind == "approval.requested":  # each call held for approval (docs: Approvals)
        return (
            "normal",
            f"roost: {name} asks for approval",
            (
                f"{event.get('summary')} (roost approve {event.get('entry')} | roost deny "
                f"{event.get('entry')})"
            ),
        )
    if kind == "worker.gave_up":
        return "critical", f"roost: gave up on {name}", str(event.get("reason") or "")
    return "normal", f"roost: {name}: {kind}", ""


def notice_text(text: str) -> str:
    """A notification's text: controls shown as escapes (roost.display.output), and the markup
    that notification servers read in a body (`<a href>`, `<img>`, `&amp;`) shown as text."""
    import html

    from roost.display.output import field

    return html.escape(field(text), quote=False)


def rate_limited(event: dict[str, Any], title: str, body: str, now: float) -> bool:
    """True when an identical notification went out within RATE_WINDOW (and records
    this one otherwise)."""
    key = hashlib.sha256(json.dumps([event.get("type"), title, body]).encode()).hexdigest()[:16]
    state_path = paths.ensure_dir(paths.roost_home()) / "notify-state.json"
    with open(state_path.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        state: dict[str, float] = {}
        with contextlib.suppress(OSError, ValueError):
            loaded = json.loads(state_path.read_text())
            if isinstance(loaded, dict):
                state = {
                    k: float(v)
                    for k, v in loaded.items()
                    if isinstance(v, int | float) and now - float(v) < RATE_WINDOW
                }
        if key in state:
            return True
        state[key] = now
        tmp = state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state))
        os.replace(tmp, state_path)
    return False


def send(raw: str) -> int:
    """The hook: one event's JSON -> one desktop notification. Its exit code."""
    try:
        event = json.loads(raw)
        if not isinstance(event, dict):
            raise ValueError("not an object")
    except ValueError as exc:
        raise NotifyError(f"expected one event as JSON on stdin: {exc}") from None
    if event.get("type") == "job.needs_input" and not event.get("question") and not event.get("dialog"):
        return 0  # a call held for approval: its approval.requested says which
    urgency, title, body = message(event)
    # The title is plain text to notification servers; the body may hold markup.
    from roost.display.output import field

    title, body = field(title), notice_text(body[:BODY_MAX])
    if rate_limited(event, title, body, time.time()):
        print(f"rate-limited: {title}", file=sys.stderr)
        return 0
    notify_send = shutil.which("notify-send")
    if notify_send is None:
        raise NotifyError(
            f"notify-send was not found on PATH ({os.environ.get('PATH', '')}); "
            "run `roost notify --enable` again where it is"
        )
    return subprocess.call([notify_send, "-a", "roost", "-u", urgency, title, body])
