"""`roost view`'s dialogs: the reply box (a reply to the selected job, or the answer to its
open dialog) and the help screen (the keys and the table's symbols).

The reply box returns the text to send as `roost reply` would; roostd and the worker do
the rest (roost.worker.runs.dialog_answer turns a reply into a dialog's answer: a choice's
number or text for `select`, yes/no for `confirm`, the text for `input`).
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static

from roost.display.views import state_text

CONFIRM = ["yes", "no"]

LEGEND = """\
keys
  ↑ ↓        select a job
  enter, o   open its transcript (esc or q: back)
  a          reply to the selected job, or answer its open dialog
  i          the inbox: everything that waits for you, answered in place
  e          the events, live (schedules firing, jobs waiting and unblocked, results)
  /          search every job's conversation; enter on a match opens its transcript
  s t        stop / start the selected job
  x          remove the selected job (asks first: y or n)
  d m        its worktree's diff / merge its branch
  g          group by directory / by state
  r          refresh (and start roostd when it is not running)
  ?          this help
  q          quit

the table
  ↳ NAME     (grouped by directory) a child under its parent
  ? …        SUMMARY / QUESTION: the job waits for your answer (a)
  —          COST: the model has no prices (tokens counted: `— 12kt`)
  META:
  ✉N         N pending mailbox items (replies and agent messages)
  @AGENT     runs as this agent definition (roost agents ls)
  ⎇ BRANCH   works in its own git worktree on this branch
  {…}        has a structured result (roost result ID)
  ↳ NAME     (grouped by state) a child of the job NAME

On a narrow screen the least useful columns are shortened or hidden first
(TREE, META, STATUS, NAME, COST); `roost ls --wide` shows everything."""


def outcome_text(result: dict[str, Any]) -> str:
    """roostd's answer to a reply or an answer, in a word: delivered, queued, ... or who
    answered the question first and when (nothing was sent)."""
    if result.get("status") == "already answered":
        return f"already answered by {result.get('by')} at {result.get('at')}"
    return str(result["status"])


def reply_text(options: list[str], index: int) -> str:
    """The reply that picks choice `index` of a dialog: its number (exact even when two
    choices read alike), or yes/no for a confirm (whose choices are yes and no)."""
    return options[index] if options == CONFIRM else str(index + 1)


class ReplyScreen(ModalScreen[str | None]):
    """Reply to `row`'s job; with an open select or confirm dialog, pick one of its choices
    (or type a reply). Dismissed with the text to send, or None (cancelled)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]
    DEFAULT_CSS = """
    ReplyScreen { align: center middle; }
    #reply-box { width: 90%; max-width: 110; height: auto; max-height: 100%;
                 border: round $accent; background: $surface; padding: 0 1; }
    #reply-question { height: auto; max-height: 8; }
    #reply-options { height: auto; max-height: 8; }
    .reply-hint { color: $text-muted; }
    """

    def __init__(self, row: dict[str, Any]) -> None:
        super().__init__()
        self.row = row  # a display row: its text already escaped (roost.display.views.printable)
        self.options: list[str] = list(row.get("options") or []) if row.get("dialog") else []

    def compose(self) -> ComposeResult:
        row = self.row
        what = "Answer the dialog of" if row.get("dialog") else "Reply to"
        with Vertical(id="reply-box"):
            yield Static(
                Text(f"{what} {row['name']} ({row['id']}, {state_text(row['state'])})", style="bold"),
                id="reply-title",
            )
            if row.get("question"):
                with VerticalScroll(id="reply-question"):
                    yield Static(Text(str(row["question"]), style="yellow"))
            if self.options:
                yield OptionList(
                    *(Text(f"{i}. {option}") for i, option in enumerate(self.options, 1)), id="reply-options"
                )
            yield Input(
                placeholder="your reply" + (", or a choice's number" if self.options else ""), id="reply-text"
            )
            hint = "enter: send · esc: cancel"
            if self.options:
                hint = "↑↓ enter: choose · tab: type instead · " + hint
            yield Static(hint, classes="reply-hint")

    def on_mount(self) -> None:
        if self.options:
            self.query_one(OptionList).focus()
        else:
            self.query_one(Input).focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(reply_text(self.options, event.option_index))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if event.value.strip():  # an empty reply is no answer: keep the box open
            self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)


class HelpScreen(ModalScreen[None]):
    """The keys and the symbols of the table."""

    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("q", "app.pop_screen", "Back"),
        Binding("question_mark", "app.pop_screen", "Back"),
    ]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    #help { width: 84; max-width: 100%; height: auto; max-height: 100%;
            border: round $accent; background: $surface; padding: 0 1; }
    #help > Static { width: 100%; }
    """

    def compose(self) -> ComposeResult:
        from textual.containers import VerticalScroll

        with VerticalScroll(id="help"):  # scrolls (↑ ↓, pgup/pgdn) on a short screen
            yield Static(Text(LEGEND))
