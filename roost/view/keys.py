"""`roost view`'s keys on the selected job: stop (s), start (t), remove (x, after a yes),
diff (d) and merge (m), in the footer and the command palette; and where an outcome is
said: in the header's subtitle for a few seconds (a toast would cover the table's last
rows). A mixin of ViewApp: it uses the app's `selected_row`, `_request` and `sub_title`."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.dom import DOMNode
from textual.screen import ModalScreen, Screen
from textual.widgets import Static

from roost.display.output import visible

SAID_SECONDS = 8.0
"""How long an outcome stays in the header."""
KEYS = (
    ("stop_job", "Stop", "stop the selected job"),
    ("start_job", "Start", "start the selected job again"),
    ("remove_job", "Remove", "remove the selected job (asks first)"),
    ("diff_job", "Diff", "the selected job's worktree diff"),
    ("merge_job", "Merge", "merge the selected job's worktree branch"),
)


class ConfirmScreen(ModalScreen[bool]):
    """A yes/no question: y or enter says yes, n or esc no."""

    BINDINGS = [
        Binding("y", "answer(True)", "Yes"),
        Binding("enter", "answer(True)", "Yes", show=False),
        Binding("n", "answer(False)", "No"),
        Binding("escape", "answer(False)", "No", show=False),
    ]
    DEFAULT_CSS = """
    ConfirmScreen { align: center middle; }
    #confirm { width: auto; max-width: 90%; height: auto; border: round $error; background: $surface;
               padding: 0 1; }
    """

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        yield Static(Text(f"{self.question}\n\ny: yes   n: no"), id="confirm")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class DiffScreen(Screen[None]):
    """A worktree job's diff against its base, scrollable (esc or q: back)."""

    BINDINGS = [Binding("escape", "app.pop_screen", "Back"), Binding("q", "app.pop_screen", "Back")]

    def __init__(self, title: str, text: str) -> None:
        super().__init__()
        self.title_text, self.text = title, text

    def compose(self) -> ComposeResult:
        from rich.syntax import Syntax

        with VerticalScroll(id="diff"):
            yield Static(Text(self.title_text, style="bold"))
            yield Static(Syntax(self.text, "diff", word_wrap=True) if self.text else Text("no changes"))


def job_diff(row: dict[str, Any]) -> tuple[str, str]:
    """The job's diff (as `roost diff` shows it) or why there is none."""
    import os

    from roost.worktrees import git

    worktree = row.get("worktree")
    if not worktree:
        return "", "this job has no worktree"
    if not os.path.isdir(str(worktree.get("path"))):
        return "", "its worktree is gone"
    try:
        return git.diff(worktree["path"], worktree["base"]), ""
    except git.GitError as exc:
        return "", str(exc)


class JobKeys(DOMNode):
    """The keys; mixed into ViewApp (a DOMNode: textual merges the BINDINGS of those)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("s", "stop_job", "Stop"),
        Binding("t", "start_job", "Start"),
        Binding("x", "remove_job", "Remove"),
        Binding("d", "diff_job", "Diff"),
        Binding("m", "merge_job", "Merge"),
    ]
    said: list[str]

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)  # type: ignore[misc]
        for action, title, help_text in KEYS:
            yield SystemCommand(f"{title} job", help_text, getattr(self, f"action_{action}"))

    # -- saying an outcome --------------------------------------------------------------------
    def say(self, text: str, failed: bool = False) -> None:
        """An outcome in the header for SAID_SECONDS (never over a row; `failed`: marked)."""
        app: Any = self
        text = f"✗ {text}" if failed else text
        if not hasattr(self, "said"):
            self.said = []
        self.said.append(text)
        base = app.sub_title.split("  ·  ")[0]
        app.sub_title = f"{base}  ·  {visible(text)}"

        def restore() -> None:
            if app.sub_title.endswith(visible(text)):
                app.sub_title = base

        app.set_timer(SAID_SECONDS, restore)

    def _job(self) -> dict[str, Any] | None:
        app: Any = self
        screen_row = getattr(app.screen, "row", None)
        row = screen_row if isinstance(screen_row, dict) else app.selected_row()
        if row is None:
            self.say("select a job first")
        return row

    def _op(self, op: str, row: dict[str, Any], done: Callable[[dict[str, Any]], str]) -> None:
        app: Any = self

        def work() -> None:
            try:
                text = done(app._request(op, {"job": row["id"]}))
            except Exception as exc:  # roostd's refusal or a lost connection: said, not raised
                text = f"{row['name']}: {getattr(exc, 'message', None) or exc}"
            app.call_from_thread(self.say, text)

        app.run_worker(work, thread=True, name=f"roost-{op}", group="roost")

    # -- the keys -----------------------------------------------------------------------------
    def action_stop_job(self) -> None:
        row = self._job()
        if row is not None:
            self._op("stop", row, lambda _: f"{row['name']}: stopped")

    def action_start_job(self) -> None:
        row = self._job()
        if row is not None:
            self._op("start", row, lambda _: f"{row['name']}: started")

    def action_remove_job(self) -> None:
        row = self._job()
        if row is None:
            return
        app: Any = self

        def answered(yes: bool | None) -> None:
            if yes:
                self._op("rm", row, lambda _: f"removed {row['name']} ({row['id']})")
            else:
                self.say(f"{row['name']}: kept")

        app.push_screen(ConfirmScreen(f"Remove {row['name']} ({row['id']}, {row['state']})?"), answered)

    def action_diff_job(self) -> None:
        row = self._job()
        if row is None:
            return
        text, why = job_diff(row)
        if why:
            self.say(f"{row['name']}: {why}")
            return
        branch = (row.get("worktree") or {}).get("branch")
        app: Any = self
        app.push_screen(DiffScreen(f"{row['name']} ({row['id']}): {branch}  (esc: back)", text))

    def action_merge_job(self) -> None:
        row = self._job()
        if row is None:
            return
        if not row.get("worktree"):
            self.say(f"{row['name']}: this job has no worktree")
            return

        def merged(result: dict[str, Any]) -> str:
            if result.get("merged"):
                return f"{result['branch']} merged into {result['into']}"
            return f"{result.get('branch')}: {result.get('outcome')}"

        self._op("merge", row, merged)
