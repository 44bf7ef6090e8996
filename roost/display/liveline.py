"""`roost logs -f`'s live line: on a terminal, the text a job's pi is writing right now.

A thread follows roostd's partials of the job (`follow_partials`) and keeps one last line
on the terminal, rewritten in place: the end of the text being streamed, or the tool that
runs. Entries are printed only once complete, from the session file (print_logs), so the
line is wiped before each and drawn again after: nothing is printed twice. To a pipe
`roost logs -f` prints only complete entries (no live line).
"""

from __future__ import annotations

import shutil
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from roost.display import output

ERASE = "\r\x1b[K"


def line_of(partial: dict[str, Any] | None, now: float | None = None) -> str:
    """The one line a partial shows as: the end of its last text, or its running tool."""
    if not partial:
        return ""
    tools = partial.get("tools") or []
    if tools:
        tool = tools[-1]
        took = int((now or time.time()) - float(tool.get("started") or 0))
        return f"⚙ running {tool.get('name')}: {tool.get('summary', '')}" + (
            f" ({took} s)" if took >= 1 else ""
        )
    blocks = ((partial.get("message") or {}).get("content")) or []
    if not blocks:
        return ""
    last = blocks[-1]
    if last.get("type") == "toolCall":
        return f"⚙ {last.get('name')}: {last.get('summary', '')}"
    text = str(last.get("text") or last.get("thinking") or "")
    tail = text.rstrip().rsplit("\n", 1)[-1]
    mark = "… thinking: " if last.get("type") == "thinking" else "… "
    return mark + tail


class LiveLine:
    def __init__(self, job: str) -> None:
        self.job = job
        self._lock = threading.Lock()
        self._partial: dict[str, Any] | None = None
        self._drawn = False
        self._client: Any = None
        self._stopped = False

    def start(self) -> None:
        threading.Thread(target=self._follow, name="roost-logs-live", daemon=True).start()

    def stop(self) -> None:
        self._stopped = True
        client = self._client
        if client is not None:
            client.interrupt()
        with self._lock:
            self._erase()

    def _follow(self) -> None:
        from roost.wire.client import DaemonUnavailable, connect
        from roost.wire.protocol import ProtocolError, RequestError

        try:
            with connect(autostart=False) as client:
                self._client = client
                if self._stopped:
                    return
                now = client.request("follow_partials", job=self.job)["partials"]
                self.show(now.get(self.job))
                for event in client.events():
                    if event.get("event") == "partial":
                        self.show(event.get("partial"))
        except (DaemonUnavailable, ProtocolError, RequestError, OSError, ValueError):
            return  # no live line: complete entries still print

    def show(self, partial: dict[str, Any] | None) -> None:
        with self._lock:
            self._partial = partial
            self._draw()

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Print complete entries meanwhile: the line is wiped, and drawn again after."""
        with self._lock:
            self._erase()
            try:
                yield
            finally:
                self._draw()

    def _erase(self) -> None:
        if self._drawn:
            out = output.terminal()
            out.write(ERASE)
            out.flush()
            self._drawn = False

    def _draw(self) -> None:
        line = output.field(line_of(self._partial))
        width = max(10, shutil.get_terminal_size().columns - 1)
        if len(line) > width:
            line = "…" + line[-(width - 1) :]
        out = output.terminal()
        if line:
            out.write(ERASE + line)
            out.flush()
            self._drawn = True
        else:
            self._erase()


def wanted(follow: bool, raw: bool) -> bool:
    """A live line only when following, to a terminal, not raw."""
    return follow and not raw and sys.stdout.isatty()
