"""`roost view`'s events pane (the `e` key): the event log as `roost events --follow` shows it
(the last EVENTS_SHOWN events, then each new one, live: roostd pushes them on a connection of
the pane's own, so nothing polls), one readable line each. Schedules' firings, dependencies
(`job.waiting`, `job.unblocked`), structured results (`job.result`) and every other event
appear here as they happen."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import ModalScreen
from textual.widgets import RichLog, Static

from roost.display.events import pane_line
from roost.display.views import printable
from roost.events import log as eventlog
from roost.host import paths

EVENTS_SHOWN = 200

Opener = Callable[[], Any]
"""A connection to roostd (a roost.wire.client.Client), by the view's own rule."""
Closer = Callable[[Any], None]


class EventsScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape", "app.pop_screen", "Back"), Binding("q", "app.pop_screen", "Back")]
    DEFAULT_CSS = """
    EventsScreen { align: center middle; }
    #events-log { width: 95%; height: 90%; border: round $accent; background: $surface; }
    #events-title { color: $accent; }
    """

    def __init__(self, open_client: Opener, close_client: Closer) -> None:
        super().__init__()
        self.open_client = open_client
        self.close_client = close_client
        self.shown: list[str] = []  # the lines, as drawn (tests read them)
        self._client: Any = None
        self._ended = threading.Event()

    def compose(self) -> ComposeResult:
        yield Static("events: the newest last, live; esc closes", id="events-title")
        yield RichLog(id="events-log", wrap=False, markup=False, max_lines=2000)

    def on_mount(self) -> None:
        home = paths.roost_home()
        recent = list(eventlog.read_events(home))[-EVENTS_SHOWN:]
        for event in recent:
            self.add(event)
        last = recent[-1]["seq"] if recent else eventlog.last_seq(home)
        threading.Thread(target=self._follow, args=(last,), daemon=True, name="roost-view-events").start()

    def add(self, event: dict[str, Any]) -> None:
        text = printable(pane_line(event))  # agent-written text shown inert (the output layer's rule)
        self.shown.append(text)
        self.query_one(RichLog).write(Text(text))

    def _follow(self, since: int) -> None:
        """New events, pushed by roostd, until the pane closes (its connection shut)."""
        try:
            client = self.open_client()
        except Exception as exc:  # roostd away: the history stays, said once
            with contextlib.suppress(RuntimeError):
                self.app.call_from_thread(self.notify, f"events: {exc}", severity="error", markup=False)
            return
        self._client = client
        try:
            if self._ended.is_set():  # closed while it connected
                return
            for event in client.follow({"since": since}):
                if self._ended.is_set():
                    return
                if event["seq"] > since:
                    since = event["seq"]
                    self.app.call_from_thread(self.add, event)
        except Exception:  # shut by on_unmount, or roostd went away: the pane keeps its lines
            return
        finally:
            self.close_client(client)

    def on_unmount(self) -> None:
        self._ended.set()
        if self._client is not None:  # wakes the thread's read; it closes the connection
            self._client.interrupt()
