"""`roost view`'s search (the `/` key): a query box and roostd's ranked matches, the match
bold in each snippet; enter on a match opens that job's transcript.

`SearchKey` gives the view its `/` binding and action (the view's App takes it as a base);
`SearchScreen` asks roostd's `search` op on a connection of its own. Every snippet is
foreign text: shown through the output layer (`printable`) as a rich Text, never markup.
"""

from __future__ import annotations

import re
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.dom import DOMNode
from textual.screen import ModalScreen
from textual.widgets import DataTable, Input, OptionList, Static

from roost.display.views import printable

LIMIT = 50


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def result_line(row: dict[str, Any]) -> Text:
    """One match: when, job, kind, then the snippet with its marked words bold."""
    line = Text(f"{row['when'][:16].replace('T', ' ')}  ", style="dim")
    line.append(printable(row["name"]), style="bold")
    line.append(f" ({row['job']})  {row['kind']}: ", style="cyan")
    text, at = str(row.get("snippet") or ""), 0
    for start, end in row.get("marks") or []:
        line.append(printable(_flat(text[at:start])))
        line.append(printable(_flat(text[start:end])), style="bold reverse")
        at = end
    line.append(printable(_flat(text[at:])))
    return line


class SearchScreen(ModalScreen[str | None]):
    """The query box and its matches; dismissed with the chosen match's job id."""

    BINDINGS = [Binding("escape", "app.pop_screen", "Back")]
    DEFAULT_CSS = """
    SearchScreen { align: center top; }
    #search-query { width: 95%; }
    #search-results { width: 95%; height: auto; max-height: 90%; border: round $accent;
                      background: $surface; padding: 0 1; }
    #search-title { color: $accent; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.results: list[dict[str, Any]] = []

    def compose(self) -> ComposeResult:
        yield Static(
            'search: words, "a phrase", retr*, AND, OR, NOT; enter searches, '
            "then enter opens a match; esc closes",
            id="search-title",
        )
        yield Input(placeholder="search every job's conversation", id="search-query")
        yield OptionList(id="search-results")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        query = event.value.strip()
        if query:
            self.search(query)

    def search(self, query: str) -> None:
        from roost.wire.client import connect

        box = self.query_one(OptionList)
        box.clear_options()
        try:
            client = connect(autostart=False)
            try:
                self.results = client.request("search", query=query, limit=LIMIT, timeout=30)["results"]
            finally:
                client.close()
        except Exception as exc:  # a bad query or roostd away: one line in the pane
            self.results = []
            box.add_option(Text(printable(getattr(exc, "message", None) or str(exc)), style="red"))
            return
        if not self.results:
            box.add_option(Text(f"no matches for {printable(query)}", style="dim"))
        for row in self.results:
            box.add_option(result_line(row))
        box.highlighted = 0
        box.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        index = event.option_index
        if index < len(self.results):
            self.dismiss(str(self.results[index]["job"]))


class SearchKey(DOMNode):
    """The view's `/`: the search screen; a chosen match opens its job's transcript."""

    BINDINGS = [Binding("slash", "search", "Search", key_display="/")]

    def action_search(self) -> None:
        self.app.push_screen(SearchScreen(), self._open_found)

    async def _open_found(self, job: str | None) -> None:
        if job is None:
            return
        table = self.app.query_one("#jobs", DataTable)
        keys = [key.value for key in table.rows]
        if job not in keys:
            self.app.notify(f"job {job} is not in the table", severity="warning")
            return
        table.move_cursor(row=keys.index(job), animate=False)
        await self.app.run_action("open")
