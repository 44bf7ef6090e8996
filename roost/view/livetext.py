"""`roost view`'s live text: under an open transcript, what the job's pi writes right now.

`PartialPane` follows roostd's partials of one job (`follow_partials`, on a thread blocked
on its socket: nothing polls) and shows the message being streamed (its text and thinking,
the tool calls it names) and the tools running, with a marker. It empties when the message
ends: the transcript above then shows it, from the session file.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from rich.text import Text
from textual.message import Message
from textual.widgets import Static

from roost.display.output import field, visible
from roost.wire.client import Client, DaemonUnavailable, connect
from roost.wire.protocol import ProtocolError, RequestError

SHOWN_LINES = 12
"""The last lines of the text being written that the pane shows (the rest: once complete)."""


def partial_text(partial: dict[str, Any] | None, now: float | None = None) -> Text:
    """The pane's text for a partial (empty for none); every agent-written part made visible."""
    out = Text()
    if not partial:
        return out
    for block in (partial.get("message") or {}).get("content") or []:
        kind = block.get("type")
        if kind in ("text", "thinking"):
            body = str(block.get(kind) or "").strip()
            if not body:
                continue
            lines = body.splitlines()[-SHOWN_LINES:]
            out.append("✎ writing…\n" if kind == "text" else "… thinking\n", style="bold cyan")
            out.append(visible("\n".join(lines)) + "\n", style="" if kind == "text" else "dim")
        elif kind == "toolCall":
            out.append(f"⚙ {field(block.get('name'))} ", style="bold")
            out.append(field(block.get("summary", "")) + "\n", style="dim")
    for tool in partial.get("tools") or []:
        took = int((now or time.time()) - float(tool.get("started") or 0))
        out.append(f"● running {field(tool.get('name'))}", style="bold yellow")
        out.append(f" ({took} s) " if took >= 1 else " ")
        out.append(field(tool.get("summary", "")) + "\n", style="dim")
    out.rstrip()
    return out


class PartialArrived(Message):
    def __init__(self, partial: dict[str, Any] | None) -> None:
        super().__init__()
        self.partial = partial


class PartialPane(Static):
    """The live last item of a transcript; hidden while nothing is being written."""

    DEFAULT_CSS = """
    PartialPane { height: auto; max-height: 50%; padding: 0 1; border-top: dashed $accent; }
    PartialPane.idle { display: none; }
    """

    def __init__(self, job: str) -> None:
        super().__init__("", id="partial", classes="idle")
        self.job = job
        self.partial: dict[str, Any] | None = None
        self._client: Client | None = None
        self._stopped = threading.Event()

    def on_mount(self) -> None:
        threading.Thread(target=self._follow, name="roost-view-partials", daemon=True).start()

    def on_unmount(self) -> None:
        self._stopped.set()
        if self._client is not None:
            self._client.interrupt()

    def _follow(self) -> None:
        """Until the pane goes; again after roostd comes back (waiting, not polling)."""
        while not self._stopped.is_set():
            try:
                with connect(autostart=False) as client:
                    self._client = client
                    if self._stopped.is_set():
                        return
                    now = client.request("follow_partials", job=self.job)["partials"]
                    self.post_message(PartialArrived(now.get(self.job)))
                    for event in client.events():
                        if event.get("event") == "partial":
                            self.post_message(PartialArrived(event.get("partial")))
            except RequestError:
                return  # a roostd without live text, or the job is gone
            except (DaemonUnavailable, ProtocolError, OSError, ValueError):
                self.post_message(PartialArrived(None))
            finally:
                self._client = None
            self._stopped.wait(2.0)

    def on_partial_arrived(self, message: PartialArrived) -> None:
        self.show(message.partial)

    def show(self, partial: dict[str, Any] | None) -> None:
        self.partial = partial
        self.set_class(not partial, "idle")
        self.update(partial_text(partial))
