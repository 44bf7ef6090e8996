"""`roost view`'s inbox pane (the `i` key): roostd's attention inbox, the list `roost inbox`
and `roost web` show, answered in place.

Enter on a question or a dialog opens the reply box (a dialog's choices to pick); the
answer goes through roostd's `answer` op, so a second answer from any surface says who
answered first. `d` dismisses a failure or a budget stop. A tool call waiting for approval
(docs/guides/approvals.md) shows its whole input on enter (escaped); `a` approves it, `A`
approves it always (an allow rule for its job), `x` denies it (roostd's `approval_answer`, by
`view`; a second answer says who answered first). The list is read again after each answer
and with `r`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static

from roost.display.views import printable
from roost.view.replybox import ReplyScreen

Request = Callable[[str, dict[str, Any]], dict[str, Any]]
"""One roostd request (op, arguments) -> its result; RequestError or a connection error."""


def entry_line(entry: dict[str, Any]) -> Text:
    job = entry["job"]
    line = Text(f"{entry['id']}  ", style="dim")
    line.append(printable(job.get("name") or job["id"]), style="bold")
    line.append(f"  {entry['kind'].replace('_', ' ')}: ", style="yellow")
    line.append(printable(entry["text"]))
    return line


class InboxScreen(ModalScreen[None]):
    """The inbox; `request` talks to roostd (the view's own connection rule)."""

    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("q", "app.pop_screen", "Back"),
        Binding("d", "dismiss_entry", "Dismiss"),
        Binding("r", "reload", "Reload"),
        Binding("a", "decide('approve')", "Approve"),
        Binding("A", "decide('always')", "Approve always"),
        Binding("x", "decide('deny')", "Deny"),
    ]
    DEFAULT_CSS = """
    InboxScreen { align: center middle; }
    #inbox-box { width: 95%; height: auto; max-height: 100%; border: round $accent;
                 background: $surface; padding: 0 1; }
    #inbox-title { color: $accent; }
    """

    def __init__(self, request: Request) -> None:
        super().__init__()
        self.request = request
        self.entries: list[dict[str, Any]] = []
        self.outcomes: list[str] = []

    def compose(self) -> ComposeResult:
        yield Static(
            "inbox: enter answers (an approval: shows its input), a approves, A always, "
            "x denies, d dismisses, r reloads, esc closes",
            id="inbox-title",
        )
        yield OptionList(id="inbox-box")

    def on_mount(self) -> None:
        self.action_reload()
        self.query_one(OptionList).focus()

    def action_reload(self) -> None:
        try:
            self.entries = self.request("inbox", {})["entries"]
        except Exception as exc:  # roostd away: say so in the pane
            self.entries = []
            self.notify(f"inbox: {exc}", severity="error")
        box = self.query_one(OptionList)
        box.clear_options()
        if not self.entries:
            box.add_option(Text("nothing waits for you", style="dim"))
        for entry in self.entries:
            box.add_option(entry_line(entry))
        box.highlighted = 0

    def _selected(self) -> dict[str, Any] | None:
        index = self.query_one(OptionList).highlighted
        return self.entries[index] if index is not None and index < len(self.entries) else None

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        entry = self._selected()
        if entry is None:
            return
        if entry["kind"] == "approval":  # its whole input, escaped; a, A or x answers it
            from roost.text.escapes import json_text

            self.notify(
                f"{printable(entry['text'])} in {printable(entry['cwd'])}\n"
                f"{printable(json_text(entry['input']))}\na approves, A always, x denies",
                timeout=30,
            )
            return
        if entry["kind"] not in ("question", "dialog"):
            self.notify(
                f"{entry['kind'].replace('_', ' ')}: nothing to reply; d dismisses it", severity="warning"
            )
            return
        # The reply box's display row: its text escaped for the terminal like a view row's.
        row = {
            "id": entry["job"]["id"],
            "name": printable(entry["job"]["name"] or ""),
            "state": "needs_input",
            "question": printable(entry["text"]),
            "dialog": entry["kind"] == "dialog",
            "options": [printable(o) for o in entry.get("options") or []],
        }
        self.app.push_screen(
            ReplyScreen(row), lambda text: self._answer(entry, {"text": text}) if text is not None else None
        )

    def action_dismiss_entry(self) -> None:
        entry = self._selected()
        if entry is not None:
            self._answer(entry, {"dismiss": True})

    def action_decide(self, decision: str) -> None:
        entry = self._selected()
        if entry is None or entry["kind"] != "approval":
            self.notify("not an approval: enter answers it, d dismisses it", severity="warning")
            return
        args = {
            "entry": entry["id"],
            "by": "view",
            "always": decision == "always",
            "decision": "deny" if decision == "deny" else "approve",
        }
        self._answer(entry, args, op="approval_answer")

    def _answer(self, entry: dict[str, Any], how: dict[str, Any], op: str = "answer") -> None:
        try:
            result = self.request(op, {"entry": entry["id"], "by": "roost view", **how})
            outcome = (
                f"already answered by {printable(result.get('by'))} at {result.get('at')}"
                if result["status"] == "already answered"
                else str(result["status"])
            )
        except Exception as exc:  # a refusal or roostd away: one line, as a toast
            outcome = f"not answered: {getattr(exc, 'message', exc)}"
        self.outcomes.append(outcome)
        self.notify(f"{printable(entry['job']['name'] or entry['job']['id'])}: {outcome}")
        self.action_reload()
