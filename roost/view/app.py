"""`roost view`: the live agent view (a textual app).

A table of every job, grouped by directory with children under their parent (`↳`), or by
state (the meta column then names the parent: `↳ parent-name`). Enter or `o` opens the
selected job's transcript (pi jobs: the session file rendered like `roost logs`; shell jobs:
their output.log), refreshed while it is open.

Liveness: one thread holds a `subscribe` connection to roostd and only notes that something
changed; a second thread answers each burst of changes with a `list` request on its own
connection (at most REFRESH_PER_SECOND times a second) and hands the rows to the UI. `list`
is the truth, so a removed job (whose last event looks like any other change) disappears.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual import events
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.screen import ModalScreen, Screen
from textual.widgets import DataTable, Footer, Header, RichLog, Static

from roost.display.output import visible
from roost.display.views import STATE_ORDER, STATE_STYLE, display_row, shown_line
from roost.host import paths
from roost.pi.transcript import render
from roost.text.rows import state_text
from roost.view.keys import JobKeys  # s t x d m
from roost.view.livetext import PartialPane
from roost.view.replybox import HelpScreen, ReplyScreen, outcome_text
from roost.view.search import SearchKey  # `/`
from roost.view.table import GROUP_PREFIX, fitted_rows, table_rows
from roost.wire import protocol
from roost.wire.client import Client, DaemonUnavailable, connect
from roost.wire.protocol import ProtocolError, RequestError

Row = dict[str, Any]
REFRESH_PER_SECOND = 10
RECONNECT_SECONDS = 2.0
POLL_SECONDS = 0.5  # an open transcript checks its file this often (shell output moves no row)
CONNECTION_ERRORS = (DaemonUnavailable, ProtocolError, RequestError, OSError, ValueError)


# -- transcripts ----------------------------------------------------------------------------
class TranscriptSource:
    """Reads a job's transcript file incrementally: new lines since the last `poll()`.

    pi jobs: the session file, rendered entry by entry (`roost.pi.transcript.render`); a last
    line still being written waits for its newline. Shell jobs: output.log as text.
    """

    def __init__(self, row: Row) -> None:
        self.kind = row.get("kind", "pi")
        if self.kind == "shell":
            self.path: Path | None = paths.job_dir(row["id"]) / "output.log"
        else:
            self.path = Path(row["session"]) if row.get("session") else None
        self.offset, self.partial = 0, b""

    def poll(self) -> tuple[bool, list[str]]:
        """(reset, lines): `reset` when the file shrank (the view must start over); the
        lines' control characters shown as escapes (a model's or a command's text)."""
        if self.path is None:
            return False, []
        try:
            size = self.path.stat().st_size
        except OSError:
            return False, []
        reset = size < self.offset
        if reset:
            self.offset, self.partial = 0, b""
        if size == self.offset:
            return reset, []
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self.offset)
                data = handle.read(size - self.offset)
        except OSError:
            return reset, []
        self.offset += len(data)
        *complete, self.partial = (self.partial + data).split(b"\n")
        if self.kind == "shell":
            return reset, [visible(line.decode("utf-8", "replace").rstrip("\r")) for line in complete]
        entries = []
        for line in complete:
            with contextlib.suppress(ValueError):
                entry = json.loads(line)
                if isinstance(entry, dict):
                    entries.append(entry)
        return reset, [visible(line) for line in render(entries)]


class TranscriptScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("q", "app.pop_screen", "Back"),
        Binding("r", "reload", "Reload"),
    ]

    def __init__(self, row: Row) -> None:
        super().__init__()
        self.row = row
        self.source = TranscriptSource(row)
        self.lines: list[str] = []  # everything shown so far (tests read it)

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(self._title(), id="transcript-title")
        yield RichLog(id="transcript", wrap=True, markup=False, highlight=False, max_lines=20_000)
        yield PartialPane(self.row["id"])  # what its pi writes right now (live text)
        yield Footer()

    def _title(self) -> Text:
        row = self.row
        title = Text(f"{row['id']}  {row['name']}  ", style="bold")
        title.append(state_text(row["state"]), style=STATE_STYLE.get(row["state"], ""))
        if row.get("agent"):
            title.append(f"  @{row['agent']}", style="cyan")
        if row.get("status"):
            title.append(f"  {row['status']}")
        if row.get("removed"):
            title.append("  (removed)", style="bold red")
        title.append(f"\n{self.source.path or '(no session file yet)'}", style="dim")
        return title

    def on_mount(self) -> None:
        self.sub_title = f"{self.row['name']} ({self.row['kind']})"
        self.refresh_log()
        self.set_interval(POLL_SECONDS, self.refresh_log)

    def refresh_log(self) -> None:
        log = self.query_one(RichLog)
        reset, lines = self.source.poll()
        if reset:
            log.clear()
            self.lines.clear()
        for line in lines:
            log.write(shown_line(line))  # the assistant's Markdown rendered
        self.lines.extend(lines)

    def update_row(self, row: Row | None) -> None:
        """A new version of the job's row (None: the job was removed)."""
        if row is None:
            row = {**self.row, "removed": True}
        changed = row.get("updated") != self.row.get("updated") or row.get("removed")
        moved = row.get("session") != self.row.get("session")
        self.row = row
        if not self.is_mounted:  # pushed, not composed yet (rows came first): compose shows it
            self.source = TranscriptSource(row) if moved else self.source
            return
        if moved:
            self.action_reload()  # the new session's transcript, from its start
        self.query_one("#transcript-title", Static).update(self._title())
        if changed:
            self.refresh_log()

    def action_reload(self) -> None:
        self.source = TranscriptSource(self.row)
        self.query_one(RichLog).clear()
        self.lines.clear()
        self.refresh_log()


# -- the app --------------------------------------------------------------------------------
class RowsArrived(Message):
    def __init__(self, rows: list[Row]) -> None:
        super().__init__()
        self.rows = rows


class ConnectionChanged(Message):
    def __init__(self, text: str, ok: bool) -> None:
        super().__init__()
        self.text = text
        self.ok = ok


class ViewApp(JobKeys, SearchKey, App[None]):
    TITLE = "roost"
    CSS = """
    #status { height: 1; padding: 0 1; color: $text-muted; }
    #empty { padding: 1 2; }
    #jobs { height: 1fr; }
    #transcript-title { height: auto; padding: 0 1; }
    #transcript { height: 1fr; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("o", "open", "Open", key_display="enter/o"),
        Binding("a", "reply", "Reply"),
        Binding("i", "inbox", "Inbox"),
        Binding("e", "events", "Events"),
        Binding("g", "toggle_group", "Group dir/state"),
        Binding("r", "refresh", "Refresh"),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, connector: Callable[..., Client] = connect) -> None:
        super().__init__()
        # Long-lived, reading every row again on each change (1,000 jobs: ~0.7 MB a time):
        # orjson's import (~15 ms) pays here, unlike in a one-shot command.
        protocol.use_fast_json()
        self.connector = connector
        self.rows: list[Row] = []
        self.loaded = False  # the first rows have arrived
        self.group = "dir"
        self.columns: list[tuple[str, str, int]] = []  # the table's columns as last fitted
        self._width = 0  # the screen's width, as the last resize said
        self.replies: list[tuple[str, str]] = []  # (job id, roostd's answer or the error)
        self.connected = False
        self.connection_text = "connecting to roostd…"
        self._stop = threading.Event()
        self._changed = threading.Event()
        self._wake = threading.Event()  # the subscriber: reconnect now (starts roostd)
        self._clients: set[Client] = set()  # open connections, interrupted at the end
        self._lock = threading.Lock()

    # -- layout ------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("connecting to roostd…", id="status")
        yield Static("", id="empty")
        yield DataTable(id="jobs", cursor_type="row", zebra_stripes=False)
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = "grouped by directory"
        table = self.query_one(DataTable)
        self.query_one("#empty", Static).display = False
        table.focus()
        self.run_worker(self._subscriber, thread=True, name="roost-subscribe", group="roost")
        self.run_worker(self._refresher, thread=True, name="roost-list", group="roost")

    def on_unmount(self) -> None:
        self._shutdown_threads()

    def _shutdown_threads(self) -> None:
        self._stop.set()
        self._changed.set()
        self._wake.set()
        with self._lock:
            for client in self._clients:
                client.interrupt()

    # -- threads -----------------------------------------------------------------------------
    def _post(self, message: Message) -> None:
        if self._stop.is_set():
            return
        with contextlib.suppress(RuntimeError):  # the loop is closing
            self.post_message(message)

    def _open(self, autostart: bool) -> Client:
        client = self.connector(autostart=autostart)
        with self._lock:
            self._clients.add(client)
        if self._stop.is_set():
            self._close(client)
            raise DaemonUnavailable("closing")
        return client

    def _close(self, client: Client) -> None:
        with self._lock:
            self._clients.discard(client)
        client.close()

    def _subscriber(self) -> None:
        """Hold a `subscribe` connection; every pushed event marks the rows stale."""
        autostart = True  # like every CLI command; after a loss only `r` starts roostd again
        while not self._stop.is_set():
            self._wake.clear()
            try:
                client = self._open(autostart)
            except CONNECTION_ERRORS as exc:
                if self._stop.is_set():
                    return
                self._post(ConnectionChanged(f"roostd unavailable: {exc} (r: start it)", False))
                self._wake.wait(RECONNECT_SECONDS)
                autostart = self._wake.is_set()
                continue
            try:
                rows = client.request("subscribe", timeout=30)["jobs"]
                self._post(ConnectionChanged(f"live: roostd at {paths.socket_path()}", True))
                self._post(RowsArrived(rows))
                for frame in client.events():
                    if frame.get("event") == "job":
                        self._changed.set()
            except CONNECTION_ERRORS:
                pass
            finally:
                self._close(client)
            if self._stop.is_set():
                return
            self._post(ConnectionChanged("lost roostd; reconnecting (r: start it)", False))
            autostart = False
            self._wake.wait(RECONNECT_SECONDS)
            autostart = self._wake.is_set()

    def _refresher(self) -> None:
        """Answer each burst of changes with one `list` (throttled)."""
        client: Client | None = None
        last = 0.0
        while True:
            self._changed.wait()
            if self._stop.is_set():
                break
            pause = last + 1.0 / REFRESH_PER_SECOND - time.monotonic()
            if pause > 0:
                self._stop.wait(pause)
            self._changed.clear()
            if self._stop.is_set():
                break
            last = time.monotonic()
            try:
                if client is None:
                    client = self._open(autostart=False)
                rows = client.request("list", timeout=30)["jobs"]
            except CONNECTION_ERRORS:
                if client is not None:
                    self._close(client)
                client = None
                continue  # the subscriber reports the loss and reconnects
            self._post(RowsArrived(rows))
        if client is not None:
            self._close(client)

    # -- messages ----------------------------------------------------------------------------
    def on_rows_arrived(self, message: RowsArrived) -> None:
        self.rows = [display_row(row) for row in message.rows]  # agent text: no raw ESC
        self.loaded = True
        self._render_table()
        self._render_status()
        by_id = {row["id"]: row for row in self.rows}
        for screen in self.screen_stack:
            if isinstance(screen, TranscriptScreen):
                screen.update_row(by_id.get(screen.row["id"]))

    def on_connection_changed(self, message: ConnectionChanged) -> None:
        self.connected = message.ok
        self.connection_text = message.text
        self._render_status()

    def _render_status(self) -> None:
        status = Text(self.connection_text, style="" if self.connected else "bold red")
        if self.connected and self.loaded:
            counts: dict[str, int] = {}
            for row in self.rows:
                counts[row["state"]] = counts.get(row["state"], 0) + 1
            status.append(f"  ·  {len(self.rows)} jobs")
            for state in STATE_ORDER:
                if counts.get(state):
                    status.append("  ")
                    status.append(f"{counts[state]} {state_text(state)}", style=STATE_STYLE.get(state, ""))
        self.query_one("#status", Static).update(status)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The table's keys do nothing over a transcript (a reply goes to its job), and none
        works over the reply box or the help (q there must not quit the view): hide them."""
        if isinstance(self.screen, ModalScreen):
            return action not in ("open", "reply", "toggle_group", "refresh", "help", "quit")
        over_transcript = isinstance(self.screen, TranscriptScreen)
        return not (over_transcript and action in ("open", "toggle_group"))

    # -- the table ---------------------------------------------------------------------------
    def on_resize(self, event: events.Resize) -> None:
        self._width = event.size.width  # self.size follows a moment later
        self._render_table()

    def _render_table(self) -> None:
        table = self.query_one(DataTable)
        # The cells' padding (1 each side of the table) and a vertical scrollbar (2).
        width = self._width or self.size.width
        columns, wanted = fitted_rows(table_rows(self.rows, self.group), width - 4)
        empty = self.query_one("#empty", Static)
        empty.display = not self.rows
        if not self.rows:
            empty.update("no jobs (start one with: roost run TASK, or roost run --shell -- CMD)")
        selected = self.selected_key()
        current = [(key.value, row.height) for key, row in table.rows.items()]
        if columns == self.columns and current == [(key, h) for key, _, h in wanted]:
            for key, cells, _ in wanted:
                old = table.get_row(key)
                for (column, _, _), old_cell, cell in zip(columns, old, cells, strict=True):
                    if old_cell != cell:
                        table.update_cell(key, column, cell)
            return
        table.clear(columns=columns != self.columns)
        if columns != self.columns:
            for key, header, width in columns:
                table.add_column(header, key=key, width=width)
            self.columns = columns
        for key, cells, height in wanted:
            table.add_row(*cells, key=key, height=height)
        keys = [key for key, _, _ in wanted]
        if selected in keys:
            table.move_cursor(row=keys.index(selected), animate=False)
        else:
            first_job = next((i for i, key in enumerate(keys) if not key.startswith(GROUP_PREFIX)), 0)
            table.move_cursor(row=first_job, animate=False)

    def selected_key(self) -> str | None:
        table = self.query_one(DataTable)
        if not table.row_count:
            return None
        try:
            key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        except Exception:  # no valid cursor
            return None
        return key

    def selected_row(self) -> Row | None:
        key = self.selected_key()
        return next((row for row in self.rows if row["id"] == key), None)

    # -- actions -----------------------------------------------------------------------------
    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_open()

    def action_open(self) -> None:
        if isinstance(self.screen, TranscriptScreen):
            return
        row = self.selected_row()
        if row is not None:
            self.push_screen(TranscriptScreen(row))

    def action_reply(self) -> None:
        """The reply box for the selected job (over a transcript: its job)."""
        row = self.screen.row if isinstance(self.screen, TranscriptScreen) else self.selected_row()
        if row is None:
            self.notify("select a job first", severity="warning")
            return
        self.push_screen(ReplyScreen(row), lambda text: self._send_reply(row, text))

    def _send_reply(self, row: Row, text: str | None) -> None:
        if text is not None:
            self.run_worker(lambda: self._reply(row, text), thread=True, name="roost-reply", group="roost")

    def _reply(self, row: Row, text: str) -> None:
        """Thread: `roost reply` over a connection of its own; the outcome as a toast."""
        try:
            client = self._open(autostart=False)
        except CONNECTION_ERRORS as exc:
            outcome, ok = f"not sent: {exc}", False
        else:
            try:
                result = client.request("reply", job=row["id"], text=text, by="roost view", timeout=30)
                outcome, ok = outcome_text(result), True
                if outcome == "stopped":
                    outcome, ok = f"not sent: the job is stopped (roost start {row['id']} first)", False
            except CONNECTION_ERRORS as exc:
                outcome, ok = f"not sent: {exc}", False
            finally:
                self._close(client)
        self.replies.append((row["id"], outcome))
        with contextlib.suppress(RuntimeError):  # the app is closing; in the header, no toast over rows
            self.call_from_thread(self.say, f"{row['name']}: {outcome}", not ok)

    def action_inbox(self) -> None:
        from roost.view.inbox import InboxScreen

        self.push_screen(InboxScreen(self._request))

    def action_events(self) -> None:
        from roost.view.events import EventsScreen

        self.push_screen(EventsScreen(lambda: self._open(autostart=False), self._close))

    def _request(self, op: str, args: dict[str, Any]) -> dict[str, Any]:
        """One roostd request on a connection of its own (the inbox pane's)."""
        client = self._open(autostart=False)
        try:
            return client.call(op, args, timeout=30)
        finally:
            self._close(client)

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_toggle_group(self) -> None:
        self.group = "state" if self.group == "dir" else "dir"
        self.sub_title = "grouped by state" if self.group == "state" else "grouped by directory"
        self._render_table()

    def action_refresh(self) -> None:
        self._changed.set()
        if not self.connected:
            self._wake.set()  # reconnect now, starting roostd


def run_view() -> None:
    ViewApp().run()
