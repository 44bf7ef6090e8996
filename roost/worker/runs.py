"""What the worker knows about pi's runs: state, status, summary, question, dialog.

Fed with pi's RPC events; decides when a run has *settled*. pi from 0.80.4 on says so
itself (`agent_settled`: no retry, compaction or queued message is left). Older pis do not:
after `agent_end` an automatic retry or a compaction may follow; pi decides both
synchronously while handling the end of the run, so their start events are written before
the response to any command sent after `agent_end`, and the worker confirms a settle with a
`get_state` round trip (Worker._confirm_settled). `settled_event` chooses (PiFeatures).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from roost.job.states import DIALOGS, ITEM_CAUSES, JOBS, Dialog, ItemKind, JobState, RunCause, run_cause
from roost.mailbox import Item
from roost.pi.transcript import INPUT_ROLES, content_text

SUMMARY_MAX = 120
QUESTION_MAX = 400
DIALOG_METHODS = frozenset({"select", "confirm", "input", "editor"})
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def first_line(text: str, limit: int = SUMMARY_MAX) -> str:
    for line in text.splitlines():
        line = " ".join(line.split())
        if line:
            return line if len(line) <= limit else line[: limit - 1] + "…"
    return ""


def question_in(text: str) -> str | None:
    """The question a final answer asks the user, if its last paragraph is one."""
    paragraphs = [p.strip() for p in text.strip().split("\n\n") if p.strip()]
    if not paragraphs or not paragraphs[-1].rstrip("*_` ").endswith("?"):
        return None
    last = " ".join(paragraphs[-1].split())
    sentences = _SENTENCE_END.split(last)
    question = sentences[-1] if len(last) > QUESTION_MAX else last
    return question[:QUESTION_MAX]


def open_question(entries: list[dict[str, Any]]) -> str | None:
    """The question a session's last answer left open (`question_in` of the last final
    answer, with no input after it), so a worker started again (`roost start` after a stop,
    a restart) waits on it as the run that asked it did."""
    for entry in reversed(entries):
        kind = entry.get("type")
        if kind == "custom_message":
            return None
        if kind == "message":
            message = entry.get("message") or {}
            role = message.get("role")
            if role == "assistant":
                if message.get("stopReason") != "stop":
                    return None
                return question_in(content_text(message.get("content")))
            if role in INPUT_ROLES:
                return None
    return None


def dialog_question(request: dict[str, Any]) -> str:
    title = str(request.get("title") or request.get("message") or "").strip()
    method = request.get("method")
    if method == "select":
        options = [str(o) for o in request.get("options") or []]
        listing = " | ".join(f"{i}. {o}" for i, o in enumerate(options, 1))
        return f"{title} [{listing}]" if listing else title
    if method == "confirm":
        message = str(request.get("message") or "")
        text = f"{title}: {message}" if message and message != title else title
        return f"{text} [yes/no]"
    return title or f"({method})"


def dialog_options(request: dict[str, Any]) -> list[str] | None:
    """The choices of a dialog, for the job.needs_input event."""
    method = request.get("method")
    if method == "select":
        return [str(o) for o in request.get("options") or []]
    if method == "confirm":
        return ["yes", "no"]
    return None


def dialog_answer(request: dict[str, Any], reply: str) -> dict[str, Any]:
    """The extension_ui_response that answers `request` with a user's reply text."""
    method = request.get("method")
    answer: dict[str, Any] = {"type": "extension_ui_response", "id": request.get("id")}
    text = reply.strip()
    if method == "confirm":
        answer["confirmed"] = text.lower() in {"y", "yes", "true", "ok", "confirm", "1"}
    elif method == "select":
        options = [str(o) for o in request.get("options") or []]
        chosen = next((o for o in options if o.strip().lower() == text.lower()), None)
        if chosen is None and text.isdigit() and 1 <= int(text) <= len(options):
            chosen = options[int(text) - 1]
        answer["value"] = chosen if chosen is not None else text
    else:
        answer["value"] = reply
    return answer


def item_cause(item: Item) -> RunCause:
    """The cause of the run an item starts (or joins)."""
    if item.kind == ItemKind.REPLY:
        # roostd checked the cause it accepted (a client's: reply or cli; its own: task).
        try:
            return run_cause(item.extra.get("cause", "reply"), ITEM_CAUSES)
        except ValueError:
            return RunCause.REPLY
    relation = (item.sender or {}).get("relation")
    return RunCause.PARENT_MESSAGE if relation == "parent" else RunCause.AGENT_MESSAGE


@dataclass
class Run:
    cause: RunCause
    sources: set[str] = field(default_factory=set)  # causes of every item the run took
    final_text: str = ""
    stop_reason: str | None = None
    error: str | None = None


@dataclass
class RunTracker:
    state: JobState = JobState.STARTING
    status: str = "starting"
    summary: str = ""
    question: str | None = None
    dialog_state: Dialog = field(default=Dialog.CLOSED, init=False)  # moved by `_dialog_to`
    streaming: bool = False  # between agent_start and a settled agent_end
    compacting: bool = False
    ended: bool = False  # agent_end seen, settle not yet confirmed
    run: Run | None = None
    next_cause: RunCause | None = None  # what the next agent_start was caused by
    last_assistant: str = ""
    settled_event: bool = False  # pi announces agent_settled (else: probe after agent_end)
    _dialog_request: dict[str, Any] | None = field(default=None, init=False, repr=False)

    def enter(self, state: JobState) -> None:
        """The worker's one state setter (checked against the job's table, logged)."""
        self.state = JOBS.move(self.state, state, "worker")

    # -- the dialog --------------------------------------------------------------------
    @property
    def dialog_open(self) -> bool:
        return self.dialog_state is Dialog.OPEN

    @property
    def dialog(self) -> dict[str, Any] | None:
        """The open dialog's request (its answer is built from it); None unless one is open."""
        return self._dialog_request if self.dialog_open else None

    def _dialog_to(self, target: Dialog, request: dict[str, Any] | None = None) -> None:
        """The dialog's one setter: its state (checked by DIALOGS) and, while it is open,
        the request it answers, so neither can tell a different story."""
        self.dialog_state = DIALOGS.move(self.dialog_state, target, "worker")
        self._dialog_request = request if target is Dialog.OPEN else None

    def snapshot(self) -> dict[str, Any]:
        return {
            "state": self.state.value,
            "status": self.status,
            "summary": self.summary,
            "question": self.question,
            "dialog": self.dialog_open,
            "options": dialog_options(self.dialog) if self.dialog is not None else None,
        }

    # -- events ------------------------------------------------------------------------
    def on_event(self, event: dict[str, Any]) -> str | None:
        """Apply one pi event; returns 'ended' when a settle check is due (older pis), or
        'settled' when pi said the run settled."""
        kind = event.get("type")
        if kind == "agent_start":
            self.streaming, self.ended = True, False
            if self.run is None:  # a retry continues the same run
                self.run = Run(self.next_cause or RunCause.RESTORE)
                self.next_cause = None
            self.enter(JobState.RUNNING)
            self.status, self.question = "thinking", None
        elif kind == "message_update":
            if not self.status.startswith("running "):
                delta = str((event.get("assistantMessageEvent") or {}).get("type") or "")
                self.status = "thinking" if delta.startswith("thinking") else "writing"
        elif kind == "tool_execution_start":
            self.status = f"running {event.get('toolName', 'a tool')}"
        elif kind == "tool_execution_end":
            self.status = "thinking"
        elif kind == "message_end":
            message = event.get("message") or {}
            if message.get("role") == "assistant":
                text = content_text(message.get("content")).strip()
                if self.run is not None:
                    self.run.final_text = text or self.run.final_text
                    self.run.stop_reason = message.get("stopReason")
                    self.run.error = message.get("errorMessage")
                if text:
                    self.last_assistant = text
        elif kind == "agent_end":
            self.ended = True
            return None if self.settled_event else "ended"
        elif kind == "agent_settled":
            if self.settled_event:  # authoritative: nothing automatic is left
                self.ended, self.compacting = True, False
                return "settled"
        elif kind == "auto_retry_start":
            self.ended = False
            self.status = f"retrying (attempt {event.get('attempt', '?')})"
        elif kind == "compaction_start":
            self.compacting = True
            self.status = "compacting"
        elif kind == "compaction_end":
            self.compacting = False
            if self.ended and not self.settled_event:
                return "ended"
        elif kind == "extension_ui_request" and event.get("method") in DIALOG_METHODS:
            self._dialog_to(Dialog.OPEN, event)
            self.enter(JobState.NEEDS_INPUT)
            self.question = dialog_question(event)
            self.status = "waiting on a dialog"
        return None

    def dialog_answered(self) -> None:
        self._dialog_to(Dialog.ANSWERED)
        self.question = None
        if self.streaming:
            self.enter(JobState.RUNNING)
            self.status = "thinking"

    def settle(self) -> Run | None:
        """Close the current run: derive state, summary and question from its end."""
        run, self.run = self.run, None
        self.streaming = self.ended = False
        self._dialog_to(Dialog.CLOSED)
        if run is None:
            return None
        if run.stop_reason == "error":
            self.enter(JobState.FAILED)
            self.status = "model error"
            self.question = None
            if run.error:
                self.summary = first_line(f"error: {run.error}")
        elif run.stop_reason == "aborted":
            self.enter(JobState.DONE)
            self.status, self.question = "aborted", None
        else:
            self.question = question_in(run.final_text)
            self.enter(JobState.NEEDS_INPUT if self.question else JobState.DONE)
            self.status = ""
            if run.final_text:
                self.summary = first_line(run.final_text)
        return run
