"""roost as an ACP agent: each ACP session is a roost job (docs/guides/editors.md).

`session/new` makes a session whose job starts with the first prompt (roostd's `run`, in
the session's cwd, named after the session id `acp-XXXXXXXX`), or attaches to a named job
(`_meta: {"roost": {"job": ID-or-NAME}}`); `session/list`, `load` (its transcript replayed
as updates) and `resume` open any pi job. A prompt is a `run` or a person's `reply`
(`by: acp`: it answers a question the job waits on); the turn streams what pi streams
(roostd's partials) and what it saves (the session file), and ends when roostd says the
run settled. A dialog the run opens becomes `session/request_permission`, answered into
its inbox entry (`answer`: once, whatever surface answers first). `session/cancel` is
roostd's `abort`: the run ends, the job stays. The job is roost's throughout: closing the
editor leaves it supervised, every surface sees it, messages from other agents show as
they arrive.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from typing import Any

from acp import (
    PROTOCOL_VERSION,
    InitializeResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PromptResponse,
    RequestError,
)
from acp.schema import (
    AgentCapabilities,
    Implementation,
    ListSessionsResponse,
    PermissionOption,
    ResumeSessionResponse,
    SessionCapabilities,
    SessionInfo,
    SessionListCapabilities,
    SessionResumeCapabilities,
    StopReason,
    ToolCallUpdate,
)

from roost import __version__
from roost.acp import links
from roost.acp.updates import KINDS, SessionFile, Shown, safe
from roost.wire.protocol import RequestError as RoostRefused

PREFIX = "acp-"
"""A session made by `session/new` names its job PREFIX + 8 hex digits: its session id."""
WAIT_SECONDS = 25
"""One `wait` request's longest wait (a turn asks again until the run settles)."""
STOPS: dict[str, StopReason] = {"aborted": "cancelled", "length": "max_tokens"}
"""pi's stopReason of a run's last answer as ACP's stop reason (any other: end_turn)."""
APPROVAL_OPTIONS = [
    PermissionOption(option_id="allow-once", name="Allow once", kind="allow_once"),
    PermissionOption(option_id="allow-always", name="Allow always", kind="allow_always"),
    PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
]
"""An approval's answers (`roost approve`, `roost approve --always`, `roost deny`)."""
JOB_OPTIONS = ("agent", "model", "thinking", "worktree", "budget", "approvals")
"""What `_meta.roost` may give a new session's job (as `roost run`'s options)."""


def session_id(row: dict[str, Any]) -> str:
    name = str(row.get("name") or "")
    return name if name.startswith(PREFIX) else str(row["id"])


def prompt_text(blocks: list[Any]) -> str:
    """A prompt's blocks as one message: text as it is, a resource as its URI or text."""
    parts: list[str] = []
    for block in blocks:
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource_link":
            parts.append(f"@{block.uri}")
        elif kind == "resource":
            resource = block.resource
            text = getattr(resource, "text", None)
            parts.append(f"@{resource.uri}" + (f"\n```\n{text}\n```" if text else ""))
    return "\n".join(parts)


class Session:
    """One ACP session of this process: its job, and what its client has been sent."""

    def __init__(self, sid: str, cwd: str, options: dict[str, Any] | None = None) -> None:
        self.sid, self.cwd, self.options = sid, cwd, options or {}
        self.job: str | None = None
        self.file = SessionFile(None)
        self.shown = Shown()
        self.lock = asyncio.Lock()
        self.cancelled = False
        self.last_stop: str | None = None
        self.asked: set[str] = set()
        """The inbox entries (approvals) this session asked its client about."""
        self.turn = False
        self.moved = asyncio.Event()
        """Set when the job's row changes (an open dialog or approval may have closed)."""


class RoostAgent:
    def __init__(self) -> None:
        self.client: Any = None
        self.sessions: dict[str, Session] = {}
        self.feed = links.Feed(self._changed)
        self._fed = False
        self._tasks: set[asyncio.Task[None]] = set()

    def on_connect(self, conn: Any) -> None:
        self.client = conn

    async def initialize(
        self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None, **kwargs: Any
    ) -> InitializeResponse:
        sessions = SessionCapabilities(list=SessionListCapabilities(), resume=SessionResumeCapabilities())
        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=AgentCapabilities(load_session=True, session_capabilities=sessions),
            agent_info=Implementation(name="roost", title="roost", version=__version__),
        )

    # -- sessions ----------------------------------------------------------------------------
    async def new_session(
        self, cwd: str, additional_directories: Any = None, mcp_servers: Any = None, **kwargs: Any
    ) -> NewSessionResponse:
        meta: dict[str, Any] = kwargs["roost"] if isinstance(kwargs.get("roost"), dict) else {}
        if meta.get("job"):
            session = await self._open(str(meta["job"]), cwd, replay=False)
            return NewSessionResponse(session_id=session.sid)
        if not os.path.isabs(cwd) or not os.path.isdir(cwd):
            raise RequestError.invalid_params({"cwd": f"{cwd!r} is not a directory"})
        sid = PREFIX + secrets.token_hex(4)
        options = {k: meta[k] for k in JOB_OPTIONS if meta.get(k) is not None}
        self.sessions[sid] = Session(sid, cwd, options)
        return NewSessionResponse(session_id=sid)

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: Any = None,
        additional_directories: Any = None,
        **kwargs: Any,
    ) -> LoadSessionResponse:
        await self._open(session_id, cwd, replay=True)
        return LoadSessionResponse()

    async def resume_session(
        self,
        session_id: str,
        cwd: str,
        additional_directories: Any = None,
        mcp_servers: Any = None,
        **kwargs: Any,
    ) -> ResumeSessionResponse:
        await self._open(session_id, cwd, replay=False)
        return ResumeSessionResponse()

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> ListSessionsResponse:
        rows = (await links.request("list"))["jobs"]
        found = [
            r
            for r in rows
            if r.get("kind") == "pi"
            and (not cwd or os.path.abspath(str(r.get("cwd"))) == os.path.abspath(cwd))
        ]
        found.sort(key=lambda r: str(r.get("updated") or r.get("created")), reverse=True)
        return ListSessionsResponse(
            sessions=[
                SessionInfo(
                    session_id=session_id(r),
                    cwd=str(r.get("cwd")),
                    title=safe(str(r.get("name") or r.get("summary") or r["id"]))[:120],
                    updated_at=str(r.get("updated") or "") or None,
                    field_meta={"roost": {"job": r["id"], "state": r.get("state")}},
                )
                for r in found
            ]
        )

    async def _row(self, ref: str) -> dict[str, Any]:
        try:
            return dict((await links.request("show", job=ref))["job"])
        except RoostRefused as exc:
            raise RequestError.resource_not_found(ref) from RuntimeError(exc.message)

    async def _open(self, ref: str, cwd: str, replay: bool) -> Session:
        """A session showing job `ref`: its transcript sent (`replay`) or skipped."""
        row = await self._row(ref)
        if row.get("kind") != "pi":
            raise RequestError.invalid_params({"job": f"job {row['id']} is a shell job"})
        session = Session(session_id(row), str(row.get("cwd") or cwd))
        async with session.lock:
            self._attach(session, row)
            entries = session.file.new_entries()
            if replay:
                for entry in entries:
                    await self._send(session, session.shown.entry(entry))
            else:
                for entry in entries:
                    session.shown.entry(entry)  # shown already, elsewhere
        self.sessions[session.sid] = session
        self.sessions.setdefault(str(row["id"]), session)
        return session

    def _attach(self, session: Session, row: dict[str, Any]) -> None:
        session.job = str(row["id"])
        path = row.get("session")
        if isinstance(path, str) and os.path.isabs(path):
            session.file.path = path
        if not self._fed:
            self._fed = True
            self.feed.start()

    # -- what roostd pushes ------------------------------------------------------------------
    def _changed(self, job: str, value: dict[str, Any] | None, streamed: bool) -> None:
        """roostd pushed the job's partial (`streamed`) or its row (`value`)."""
        for session in {id(s): s for s in self.sessions.values() if s.job == job}.values():
            self._spawn(self._refresh(session, value if streamed else None))
            if not streamed:
                session.moved.set()
            if (
                not streamed
                and session.turn
                and value is not None
                and value.get("state") == "needs_input"
                and not value.get("dialog")
            ):
                self._spawn(self._approvals(session))  # a tool call waits for a person

    def _spawn(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _refresh(self, session: Session, partial: dict[str, Any] | None) -> None:
        """Send what the session file holds that was not sent, then the partial's news."""
        async with session.lock:
            if session.file.path is None and session.job is not None:
                self._attach(session, await self._row(session.job))
            for entry in session.file.new_entries():
                message = entry.get("message") or {}
                if entry.get("type") == "message" and message.get("role") == "assistant":
                    session.last_stop = str(message.get("stopReason") or "")
                await self._send(session, session.shown.entry(entry))
            await self._send(session, session.shown.partial(partial))

    async def _send(self, session: Session, updates: list[Any]) -> None:
        for update in updates:
            await self.client.session_update(session_id=session.sid, update=update)

    # -- turns -------------------------------------------------------------------------------
    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        session = self.sessions.get(session_id)
        if session is None:  # an editor that kept the id across its restart: the job by it
            session = await self._open(session_id, os.getcwd(), replay=False)
        text = prompt_text(prompt)
        if not text.strip():
            raise RequestError.invalid_params({"prompt": "the prompt is empty"})
        session.cancelled = False
        session.last_stop = None
        session.shown.prompts.append(text)
        try:
            await self._give(session, text)
        except RoostRefused as exc:
            session.shown.prompts.remove(text)
            raise RequestError.internal_error({"roost": exc.message}) from None
        session.turn = True
        try:
            self._spawn(self._approvals(session))  # one asked before this turn began
            return PromptResponse(stop_reason=await self._settle(session))
        finally:
            session.turn = False

    async def _give(self, session: Session, text: str) -> None:
        if session.job is None:
            from roost.job.env import caller_env

            answer = await links.request(
                "run", task=text, cwd=session.cwd, name=session.sid, env=caller_env(), **session.options
            )
            async with session.lock:
                self._attach(session, await self._row(answer["id"]))
            self.sessions.setdefault(str(answer["id"]), session)
            return
        row = await self._row(session.job)
        await links.request("reply", job=session.job, text=text, cause="reply", by="acp")
        if row.get("state") in ("stopped", "failed"):  # a reply alone never starts it
            await links.request("start", job=session.job)

    async def _settle(self, session: Session) -> StopReason:
        assert session.job is not None
        while True:
            answer = await links.request("wait", WAIT_SECONDS + 30, job=session.job, timeout=WAIT_SECONDS)
            if not answer["settled"]:
                continue
            await self._refresh(session, None)
            row = answer["row"]
            if session.cancelled:
                return "cancelled"
            if row.get("dialog") and row.get("state") == "needs_input":
                if await self._ask(session, row):
                    continue
                return "cancelled"
            return STOPS.get(session.last_stop or "", "end_turn")

    async def _ask(self, session: Session, row: dict[str, Any]) -> bool:
        """The run's open dialog as a permission request, answered into its inbox entry;
        False when the client cancelled it (the dialog stays open for other surfaces)."""
        entries = (await links.request("inbox"))["entries"]
        entry = next(
            (
                e
                for e in entries
                if e.get("kind") == "dialog" and (e.get("job") or {}).get("id") == session.job
            ),
            None,
        )
        if entry is None:
            return True  # answered meanwhile: wait again
        options = [str(o) for o in entry.get("options") or []]
        yes_no = options == ["yes", "no"]
        choices = [
            PermissionOption(
                option_id=f"choice-{n}",
                name=safe(text)[:200],
                kind="reject_once" if yes_no and n == 2 else "allow_once",
            )
            for n, text in enumerate(options, 1)
        ]
        call = ToolCallUpdate(
            tool_call_id=f"dialog-{entry['id']}",
            title=safe(str(entry["text"])),
            kind="other",
            status="pending",
        )
        answer = await self._permission(session, entry["id"], call, choices)
        if answer is None:
            return True  # answered elsewhere first: wait again
        outcome = answer.outcome
        if getattr(outcome, "outcome", None) != "selected":
            return False
        choice = int(str(outcome.option_id).removeprefix("choice-"))
        try:
            await links.request("answer", entry=entry["id"], choice=choice, by="acp")
        except RoostRefused:
            pass  # answered elsewhere first, or closed: the wait says what happens next
        return True

    async def _permission(
        self, session: Session, entry: str, call: ToolCallUpdate, options: list[PermissionOption]
    ) -> Any:
        """The client's answer to a permission request about inbox entry `entry`, or None
        once the entry closed first (another surface answered it, the run ended): the
        request is dropped then, and the turn goes on."""
        asking = asyncio.ensure_future(
            self.client.request_permission(session_id=session.sid, tool_call=call, options=options)
        )
        try:
            while True:
                session.moved.clear()  # before the look: a change after it wakes the wait
                entries = (await links.request("inbox"))["entries"]
                if asking.done():
                    return asking.result()
                if not any(e.get("id") == entry for e in entries):
                    return None
                moved = asyncio.ensure_future(session.moved.wait())
                await asyncio.wait({asking, moved}, return_when=asyncio.FIRST_COMPLETED)
                moved.cancel()
        finally:
            asking.cancel()

    async def _approvals(self, session: Session) -> None:
        """The job's tool calls waiting for a person (inbox entries of kind approval) as
        permission requests, answered with roostd's `approval_answer` (by acp): allow once,
        allow always (the same call from now on), reject. A dismissed request leaves the
        entry to the other surfaces."""
        entries = (await links.request("inbox"))["entries"]
        for entry in entries:
            if (
                entry.get("kind") != "approval"
                or entry["id"] in session.asked
                or (entry.get("job") or {}).get("id") != session.job
            ):
                continue
            session.asked.add(entry["id"])
            tool = str(entry.get("tool") or "tool")
            call = ToolCallUpdate(
                tool_call_id=f"approval-{entry['id']}",
                title=safe(f"{tool}: {entry.get('text') or ''}")[:300],
                kind=KINDS.get(tool, "other"),
                status="pending",
                raw_input=entry.get("input"),
            )
            answer = await self._permission(session, entry["id"], call, APPROVAL_OPTIONS)
            outcome = None if answer is None else answer.outcome
            if getattr(outcome, "outcome", None) != "selected":
                continue
            chosen = str(getattr(outcome, "option_id", ""))
            try:
                await links.request(
                    "approval_answer",
                    entry=entry["id"],
                    by="acp",
                    decision="deny" if chosen == "reject" else "approve",
                    always=chosen == "allow-always",
                )
            except RoostRefused:
                pass  # answered elsewhere first: the run goes on either way

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        session = self.sessions.get(session_id)
        if session is None or session.job is None:
            return
        session.cancelled = True
        try:
            await links.request("abort", job=session.job)
        except RoostRefused:
            pass

    async def close_session(self, session_id: str, **kwargs: Any) -> None:
        """The editor let go: the job goes on, supervised, in the background."""
        session = self.sessions.pop(session_id, None)
        if session is not None:
            for key in [k for k, s in self.sessions.items() if s is session]:
                del self.sessions[key]
