"""Every wire message roost speaks, in one place.

Two channels use the same framing (one JSON object per line, split on b"\\n" only,
at most MAX_FRAME bytes a line):

* roostd's socket `$ROOST_HOME/roostd.sock`, spoken by the CLI, workers and
  foreground pi sessions (the extension);
* a worker's extension socket `$ROOST_HOME/jobs/<id>/ext.sock`, spoken by the roost
  extension inside that worker's pi.

Shapes:

    server greeting   {"type": "hello", "server": "roostd", "version": V, "protocol": P}
    request           {"id": ID, "op": OP, ...arguments}
    response          {"type": "response", "id": ID, "ok": true, "result": {...}}
                      {"type": "response", "id": ID, "ok": false,
                       "error": {"code": CODE, "message": TEXT}}
    event (pushed)    {"type": "event", "event": NAME, ...fields}

DAEMON_OPS and EXTENSION_OPS declare every op, its required arguments and the others it
reads; PUSHED_EVENTS every event, who sends it to whom and its fields. tests/unit/test_layout.py
checks the requests and event handlers of roost.ts, and the requests and pushes in roost/,
against them.

The first thing a server sends is its greeting; a client whose PROTOCOL_VERSION differs
must stop (`check_greeting`). "Could not decode" (`bad_frame`), "too large"
(`frame_too_large`) and "valid but unknown op" (`unknown_op`) are distinct errors, and
none of them closes the connection: the rest of an oversize line is read and discarded up
to its newline, so the next frame starts on a frame boundary (jsonlines.read_frame).
"""

from __future__ import annotations

from roost import PROTOCOL_VERSION, __version__
from roost.errors import RoostError
from roost.wire import codec

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a CLI start-up cost)

if TYPE_CHECKING:
    from typing import Any


# -- contracts the extension keeps a copy of (tests/unit/test_layout.py checks roost.ts) --
CUSTOM_TYPE = "pi-roost-agent-message"
"""The customType of an agent message (or report) in a pi session; the extension renders it."""
NOTE_TYPE = "pi-roost-note"
"""The customType of a note from roost itself (a run continued after a crash)."""
RESULT_MAX = 6000
"""The most characters of a run's final text a report carries."""

# The event log's entry types and the fields each adds to seq, time, type, job (README: the
# format). Not the events pushed on a connection: PUSHED_EVENTS below.
EVENT_TYPES: dict[str, tuple[str, ...]] = {
    "job.created": ("kind", "cwd", "parent"),
    "job.state": ("from", "to", "reason"),
    "job.needs_input": ("question", "dialog", "options"),
    "job.report": ("to", "kind", "firstLine", "outcome"),
    "job.failed": ("error",),
    "job.result": ("result", "size", "large"),
    "job.removed": (),
    "job.waiting": ("after", "mode"),
    "job.unblocked": ("ended",),
    "job.save_failed": ("error",),
    "message.sent": ("from", "to", "outcome"),
    "worker.crashed": ("reason", "crashes"),
    "worker.gave_up": ("reason",),
    "daemon.started": ("pid", "version"),
    "daemon.stopped": ("pid",),
    "schedule.fired": ("schedule", "cause", "due", "outcome", "detail", "paths"),
    "approval.requested": ("entry", "tool", "summary", "input", "cwd"),
    "approval.answered": ("entry", "decision", "by", "reason", "rule"),
}


MAX_FRAME = 4 * 1024 * 1024
"""Largest accepted line, in bytes (a transcript-sized `handback` fits easily)."""

# Error codes (the `code` of a failed response).
BAD_FRAME = "bad_frame"
FRAME_TOO_LARGE = "frame_too_large"
UNKNOWN_OP = "unknown_op"
BAD_REQUEST = "bad_request"
NOT_FOUND = "not_found"
REFUSED = "refused"
UNAUTHORIZED = "unauthorized"
INTERNAL = "internal"


class ProtocolError(RoostError):
    """A frame that cannot be decoded or a peer that speaks another protocol version."""


class FrameTooLarge(ProtocolError):
    """A frame over MAX_FRAME bytes (answered `frame_too_large`, not `bad_frame`)."""

    def __init__(self, size: int | None = None) -> None:
        of = f" of {size} bytes" if size is not None else ""
        super().__init__(f"frame{of} exceeds the limit of {MAX_FRAME} bytes")


class RequestError(RoostError):
    """A request that failed; `code` is one of the error codes above."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


_fast: Any = None
"""orjson once `use_fast_json()` ran (roostd, the view, roost web), else None."""


def use_fast_json() -> Any:
    """Encode and decode frames with orjson (~5x json's speed on a 1,000-row `list` of ~1 MB)
    from now on, and return it. roostd, `roost view` and `roost web` call it at their
    start: they live long and read every row again on each change. A one-shot command
    does not: the import (~15 ms, with the datetime, uuid and dataclasses modules it
    loads) costs more than its frames take with json; roostd makes the one large
    document a command prints (`list` with `text`)."""
    global _fast
    if _fast is None:
        import orjson

        _fast = orjson
    return _fast


def fast_json() -> Any:
    """orjson when this process uses it already, else None (roost.text.escapes asks)."""
    return _fast


def _slow_dumps(obj: dict[str, Any]) -> bytes:
    return codec.dumps(obj).encode("utf-8") + b"\n"


def encode(obj: dict[str, Any]) -> bytes:
    """One frame: compact JSON plus the newline. Raises FrameTooLarge."""
    try:
        data = _fast.dumps(obj) + b"\n" if _fast else _slow_dumps(obj)
    except TypeError:  # what orjson refuses (a non-str key, an int past 64 bits): as json
        data = _slow_dumps(obj)
    if len(data) > MAX_FRAME:
        raise FrameTooLarge(len(data))
    return data


def decode(line: bytes) -> dict[str, Any]:
    """Parse one frame (with or without its newline). Raises ProtocolError (FrameTooLarge)."""
    if len(line) > MAX_FRAME:
        raise FrameTooLarge(len(line))
    if _fast is None:
        obj = _decode_slowly(line)
    else:
        try:
            obj = _fast.loads(line.rstrip(b"\r\n"))
        except _fast.JSONDecodeError:  # json reads a lone surrogate's escape too, or says why
            obj = _decode_slowly(line)
    if not isinstance(obj, dict):
        raise ProtocolError("could not decode frame: expected a JSON object")
    return obj


def _decode_slowly(line: bytes) -> Any:
    """json's reading of a frame orjson refused (JSON.stringify writes a lone surrogate of a
    string as its escape, which orjson refuses), or ProtocolError."""
    try:
        return codec.loads(line.rstrip(b"\r\n").decode("utf-8"))
    except ValueError as exc:  # json.JSONDecodeError, UnicodeDecodeError
        raise ProtocolError(f"could not decode frame: {exc}") from None
    except RecursionError:
        # json's C decoder recurses per nesting level: a frame of 100,000 "[" is small
        # enough to read and deep enough to blow the stack. It is a bad frame like any other.
        raise ProtocolError("could not decode frame: nested too deeply") from None


def invalid_text(value: Any) -> str | None:
    """Where `value` (a decoded frame, any nesting) holds a string that is not valid
    Unicode, else None. JSON's `\\ud800` escape decodes to a lone surrogate, which no
    encoder can write back: kept, it would break every answer and file it reaches."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            if not _valid(item):
                return path or "the frame"
        elif isinstance(item, dict):
            for key, sub in item.items():
                if not _valid(key):
                    return f"a key of {path or 'the frame'}"
                shown = key if _plain_key(key) else "?"
                stack.append((f"{path}.{shown}" if path else shown, sub))
        elif isinstance(item, list):
            stack.extend((f"{path}[{i}]", sub) for i, sub in enumerate(item))
    return None


def scrub_text(value: Any) -> Any:
    """`value` with every lone surrogate replaced by U+FFFD, at any depth: for frames that
    must be kept even so (pi's own events, where a model's text was cut mid-pair)."""
    if isinstance(value, str):
        return (
            value if _valid(value) else (value.encode("utf-16", "surrogatepass").decode("utf-16", "replace"))
        )
    if isinstance(value, dict):
        return {scrub_text(k): scrub_text(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub_text(v) for v in value]
    return value


_KEY_CHARACTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def _plain_key(key: str) -> bool:
    """A key a path may name as it is (at most 40 ASCII letters, digits, `_` and `-`)."""
    return 0 < len(key) <= 40 and _KEY_CHARACTERS.issuperset(key)


def _valid(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def greeting(server: str = "roostd") -> dict[str, Any]:
    return {"type": "hello", "server": server, "version": __version__, "protocol": PROTOCOL_VERSION}


def check_greeting(frame: dict[str, Any]) -> None:
    if frame.get("type") != "hello":
        raise ProtocolError(f"expected a hello greeting, got {frame.get('type')!r}")
    if frame.get("protocol") != PROTOCOL_VERSION:
        raise ProtocolError(
            f"{frame.get('server', 'server')} speaks protocol {frame.get('protocol')} "
            f"(version {frame.get('version')}); this client speaks {PROTOCOL_VERSION} "
            f"(version {__version__}): restart the daemon (roost daemon stop)"
        )


def ok(request_id: Any, result: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"type": "response", "id": request_id, "ok": True, "result": result or {}}


def fail(request_id: Any, code: str, message: str) -> dict[str, Any]:
    return {
        "type": "response",
        "id": request_id,
        "ok": False,
        "error": {"code": code, "message": message},
    }


def event(name: str, **fields: Any) -> dict[str, Any]:
    """A pushed event, checked against its declaration in PUSHED_EVENTS (a programming error
    raises ValueError: an undeclared event or field never reaches the wire)."""
    spec = PUSHED_EVENTS.get(name)
    if spec is None:
        raise ValueError(f"undeclared event {name!r}")
    missing = [f for f in spec.fields if f not in fields]
    unknown = [f for f in fields if f not in spec.fields and f not in spec.optional]
    if missing or unknown:
        raise ValueError(f"event {name!r}: missing {missing}, undeclared {unknown}")
    return {"type": "event", "event": name, **fields}


class Op:
    """A documented operation: its name, who may call it, its required arguments and the
    others it reads (`optional`). (A plain class, not a dataclass: every `roost` process
    imports this module, and dataclasses brings inspect, ~6 ms.)"""

    __slots__ = ("name", "caller", "required", "doc", "optional")

    def __init__(
        self,
        name: str,
        caller: str,
        required: tuple[str, ...] = (),
        doc: str = "",
        optional: tuple[str, ...] = (),
    ) -> None:
        self.name = name
        self.caller = caller  # "any", "worker" (bound worker connection), "peer" (worker or fg)
        self.required = required
        self.doc = doc
        self.optional = optional

    def __repr__(self) -> str:
        return f"Op({self.name!r}, {self.caller!r}, {self.required!r})"


# What a new pi job may be given (`run`, and a tool's `spawn`): roostd fills in the rest.
_JOB_ARGS = (
    "cwd",
    "name",
    "model",
    "thinking",
    "agent",
    "defaultModel",
    "defaultThinking",
    "env",
    "budget",
    "budgetTokens",
    "maxTurns",
    "worktree",
    "branch",
    "base",
    "after",
    "afterMode",
    "withResults",
    "output_schema",
    "sandbox",
    "sandboxNetwork",
    "approvals",
    "allow",
    "ask",
    "deny",
    "approvalTimeout",
)

# The daemon's operations (a client, a worker or an extension -> roostd). roostd checks when
# it builds its dispatch table that each name has exactly one handler.
DAEMON_OPS: dict[str, Op] = {
    op.name: op
    for op in (
        Op("status", "any", (), "daemon health: pid, version, job count"),
        Op("shutdown", "any", (), "stop the daemon (workers keep running; `jobs`: stop them too)", ("jobs",)),
        Op(
            "run",
            "any",
            (),
            "start a pi job (`task`), or a shell job (`shell`, `command`); "
            "`env`: the caller's environment, which the job runs with; "
            "`runner`: local or ray, where its worker runs (default: roost.json's)",
            ("task", "shell", "command", "treeBudget", "group", "priority", "runner", *_JOB_ARGS),
        ),
        Op(
            "run_each",
            "any",
            ("tasks",),
            "start many pi jobs in one request: `tasks`, a list "
            "of task strings or objects (`task`, `name`, `group`, "
            "`priority`); the other arguments apply to each",
            ("group", "priority", "treeBudget", *_JOB_ARGS),
        ),
        Op("queue", "any", (), "the queued jobs in order, the limits and the groups"),
        Op("queue_move", "any", ("job",), "a queued job's new `priority`, or `first`", ("priority", "first")),
        Op("group_add", "any", ("name", "parallel"), "add or change a named group's limit"),
        Op("group_ls", "any", (), "the named groups: limit, running, queued"),
        Op("group_rm", "any", ("name",), "remove a named group (its jobs: maxRunning only)"),
        Op(
            "list",
            "any",
            (),
            "all job rows (`jobs`); `tree`: parents first, each with its "
            "`depth` (roost.job.tree); `text`: the rows as one string, as "
            "`roost ls --json` prints them",
            ("tree", "text"),
        ),
        Op("show", "any", ("job",), "one job row with details"),
        Op(
            "reply",
            "any",
            ("job",),
            "a user reply (`text`) into the job's mailbox (`cause`: "
            "reply or cli); a person's (`by`: who) while the job "
            "waits on a question or dialog answers it (`choice` N "
            "of a dialog), written down in the inbox; `question`: "
            "the text of the question answered (already answered: "
            "nothing is sent); `plain`: answers nothing, refused while "
            "the job waits on a dialog (roost mcp)",
            ("text", "cause", "by", "question", "choice", "plain"),
        ),
        Op("wait", "any", ("job",), "resolve when the job's current run has settled", ("timeout",)),
        Op("stop", "any", ("job",), "stop a job; never woken by messages"),
        Op("abort", "any", ("job",), "end the job's run, keep the job (pi `abort`; roost acp)"),
        Op(
            "start",
            "any",
            ("job",),
            "start a stopped/ended job again (`env`: replaces the job's environment)",
            ("env",),
        ),
        Op(
            "rm",
            "any",
            ("job",),
            "stop and remove a job (and its worktree: `force`, `deleteBranch`)",
            ("force", "deleteBranch"),
        ),
        Op("merge", "any", ("job",), "merge a job's worktree branch (`into`, `squash`)", ("into", "squash")),
        Op("gc", "any", (), "remove the worktrees of removed jobs; prune git's records", ("force",)),
        Op(
            "inbox",
            "any",
            (),
            "what waits for a person: open questions and dialogs, budget "
            "stops, given-up workers, failures; each with a stable id",
        ),
        Op(
            "answer",
            "any",
            ("entry",),
            "answer an inbox entry (`text`, or `choice` N for a dialog; `dismiss`); `by`: who answers",
            ("text", "choice", "dismiss", "by"),
        ),
        Op("subscribe", "any", (), "the rows (`jobs`), then a `job` event whenever one changes"),
        Op(
            "events",
            "any",
            (),
            "push the event log's entries after `since` (filtered by "
            "`types`, `job`) as `log` events, then each new one",
            ("since", "types", "job"),
        ),
        Op(
            "wait_jobs",
            "any",
            ("jobs", "until"),
            "resolve when any (or all: `mode`) of `jobs` reach `until`: needs_input|settled|done|failed",
            ("mode", "timeout"),
        ),
        Op("attach", "any", ("job",), "the worker lets go of the session (at a safe point)"),
        Op("detach", "any", ("job",), "the attached foreground pi quit: back to the background"),
        Op("worker_hello", "any", ("job", "token", "pid"), "bind this connection to a worker"),
        Op(
            "worker_update",
            "worker",
            (),
            "the worker's view of its job: state, status, ...",
            ("state", "status", "summary", "question", "dialog", "options", "busy", "usage", "error"),
        ),
        Op(
            "turn",
            "worker",
            (),
            "an idle worker with new work asks for a slot (`go`: run "
            "now; else the job is queued and a `turn` push follows)",
        ),
        Op("worker_exiting", "worker", ("reason",), "the worker is about to exit on purpose", ("fatal",)),
        Op("usage_note", "worker", ("kind",), "a budget warning or stop for the job's parent", ("text",)),
        Op(
            "budget",
            "any",
            ("job",),
            "set a job's budget (or a root's tree budget: `tree`)",
            ("budget", "budgetTokens", "maxTurns", "tree"),
        ),
        # `session` may be null (a --no-session pi): the handler checks it, so not required.
        Op(
            "peer_register",
            "any",
            ("pid",),
            "bind this connection to a fg peer",
            ("session", "peer", "name", "cwd"),
        ),
        Op("peers", "peer", (), "peers the caller may reach"),
        Op("send", "peer", ("to", "message"), "an agent message to a peer"),
        Op(
            "message",
            "any",
            ("job", "message", "from"),
            "a message from an agent outside roost (`from` names it: roost mcp's client) to a "
            "job by its exact id, framed as an external agent's (agentExternalMessages)",
        ),
        Op(
            "spawn",
            "peer",
            ("task",),
            "a background child session (with its parent job's "
            "environment; a foreground pi sends its own as `env`; "
            "`queue`: past the tree caps, queued, not refused)",
            (*_JOB_ARGS, "queue"),
        ),
        Op(
            "handback",
            "worker",
            ("state",),
            "a report for the job's parent (`structured`: `result` is the job's checked JSON result)",
            ("report", "result", "question", "error", "structured"),
        ),
        Op(
            "result",
            "worker",
            (),
            "the job's answer is valid against its output schema: `value`, kept as its result (job.result)",
            ("value",),
        ),
        Op(
            "schedule_add",
            "any",
            ("name", "run"),
            "add a schedule: one of `cron`, `every`, `at`, `onChange` (paths); `run`: the run "
            "request each firing sends (docs: Schedules)",
            ("cron", "every", "at", "onChange", "debounce", "tz", "session", "catchUp", "overlap", "env"),
        ),
        Op("schedule_ls", "any", (), "every schedule's row: next firing, last result"),
        Op("schedule_show", "any", ("name",), "one schedule's row with its run"),
        Op("schedule_rm", "any", ("name",), "remove a schedule (its jobs stay)"),
        Op("schedule_pause", "any", ("name",), "pause a schedule"),
        Op("schedule_resume", "any", ("name",), "resume a paused schedule (from now on)"),
        Op("schedule_run_now", "any", ("name",), "fire a schedule now (cause run-now)"),
        Op(
            "partial",
            "worker",
            (),
            "the assistant message pi is streaming now and the tools "
            "running (`partial`; null: none), coalesced; kept in "
            "memory only and pushed to `follow_partials` clients",
            ("partial",),
        ),
        Op(
            "follow_partials",
            "any",
            (),
            "the jobs' streamed partials now (`partials`, by job "
            "id), then a `partial` event at each change (`job`: "
            "that job's only)",
            ("job",),
        ),
        Op(
            "search",
            "any",
            ("query",),
            "full-text search of every job's conversation "
            '(`query`: FTS5 words, "phrases", `retr*`, AND, OR, '
            "NOT): `results`, best first (docs: Search)",
            ("job", "tree", "kinds", "since", "cwd", "all", "limit"),
        ),
        Op(
            "search_reindex",
            "any",
            (),
            "rebuild the search index from the session files (removed jobs' entries are kept)",
        ),
        Op("approval_request", "worker", ("call", "tool"), "a call needs a person", ("input", "worker")),
        Op("approval_answer", "any", ("entry", "decision"), "a person's answer", ("always", "reason", "by")),
        Op(
            "handoff",
            "peer",
            (),
            "a foreground pi moves its session into a background job "
            "(`env`: the pi's environment, the job's from now on)",
            ("task", "env", "cwd", "name", "model", "thinking"),
        ),
    )
}

# The worker's extension socket operations (extension -> worker). The `peer` ones are
# roostd's: the worker forwards them as they are, on its own connection, as the job.
EXTENSION_OPS: dict[str, Op] = {
    # Checked by SO_PEERCRED: the caller must be the worker's own pi (no token).
    "ext_hello": Op("ext_hello", "any", ("pid",), "bind the extension of this worker's pi"),
    **{name: DAEMON_OPS[name] for name in ("peers", "send", "spawn")},
    "gate": Op("gate", "any", ("call", "tool"), "may this tool call run? (`block`, `reason`)", ("input",)),
}


def missing_arguments(op: Op, request: dict[str, Any]) -> list[str]:
    return [name for name in op.required if request.get(name) in (None, "")]


# -- pushed events: who sends each to whom, and its fields --------------------------------------
ROOSTD = "roostd"
WORKER = "worker"
EXTENSION = "extension"  # the roost extension in a pi: a job's (via its worker) or a foreground one
CLIENT = "client"  # a CLI connection that asked for them (`subscribe`, `events`)


class PushedEvent:
    """A pushed event: `{"type": "event", "event": name, ...fields}` from `sender` to
    `receiver`. Every one of `fields` is present (its value may be null); `optional` ones
    may be left out. (A plain class, as Op.)"""

    __slots__ = ("name", "sender", "receiver", "fields", "optional", "doc")

    def __init__(
        self,
        name: str,
        sender: str,
        receiver: str,
        fields: tuple[str, ...] = (),
        optional: tuple[str, ...] = (),
        doc: str = "",
    ) -> None:
        self.name = name
        self.sender = sender
        self.receiver = receiver
        self.fields = fields
        self.optional = optional
        self.doc = doc

    def __repr__(self) -> str:
        return f"PushedEvent({self.name!r}, {self.direction!r})"

    @property
    def direction(self) -> str:
        return f"{self.sender}->{self.receiver}"


PUSHED_EVENTS: dict[str, PushedEvent] = {
    e.name: e
    for e in (
        PushedEvent("stop", ROOSTD, WORKER, ("reason",), doc="stop pi and exit (`reason`: why)"),
        PushedEvent(
            "budget",
            ROOSTD,
            WORKER,
            ("budget", "budgetTokens", "maxTurns", "treeExhausted"),
            ("treeWarning",),
            "the job's limits changed, or its tree's budget ran out "
            "(`treeExhausted`: why) or runs low (`treeWarning`)",
        ),
        PushedEvent("abort", ROOSTD, WORKER, (), doc="end the run in progress (pi `abort`)"),
        PushedEvent(
            "approval",
            ROOSTD,
            WORKER,
            ("entry", "call", "decision", "reason", "by", "rule"),
            doc="a person's answer to the `call` held for approval (`entry`: its inbox entry)",
        ),
        PushedEvent(
            "turn", ROOSTD, WORKER, (), doc="a slot is free: the queued job's worker may start its next run"
        ),
        PushedEvent(
            "release",
            ROOSTD,
            WORKER,
            ("reason",),
            doc="`roost attach`: let go of the session at the next safe point",
        ),
        PushedEvent("job", ROOSTD, CLIENT, ("row",), doc="a job's row changed (after `subscribe`)"),
        PushedEvent("log", ROOSTD, CLIENT, ("entry",), doc="an event-log entry (after `events`)"),
        PushedEvent(
            "partial",
            ROOSTD,
            CLIENT,
            ("job", "partial"),
            doc="what a job's pi is streaming changed (after `follow_partials`): `partial` "
            "is the message so far and the running tools, or null once it ended",
        ),
        PushedEvent(
            "dropped",
            ROOSTD,
            CLIENT,
            ("reason",),
            doc="the last frame before roostd closes a connection that did not read what "
            "it was sent (a `subscribe` or `events` client resumes on a new one)",
        ),
        PushedEvent(
            "deliver",
            ROOSTD,
            EXTENSION,
            ("content", "details"),
            doc="an agent message or report for a foreground peer, shown and steered in",
        ),
        PushedEvent(
            "inject",
            WORKER,
            EXTENSION,
            ("content", "details"),
            doc="a mailbox item for the job's pi, steered in (details.seq: its item)",
        ),
        PushedEvent(
            "note",
            WORKER,
            EXTENSION,
            ("content",),
            doc="roost's own note (a run continued "
            "after a restart or a raised budget): shown, and starts a run",
        ),
        PushedEvent(
            "budget_note",
            WORKER,
            EXTENSION,
            ("content", "steer"),
            doc="a budget warning: steered into a running turn (`steer`), else only stored",
        ),
        PushedEvent(
            "kick",
            WORKER,
            EXTENSION,
            (),
            doc="a steer was stranded when a run ended: start the run it waits for",
        ),
    )
}


def events_to(receiver: str) -> set[str]:
    """The names of the events `receiver` must handle."""
    return {e.name for e in PUSHED_EVENTS.values() if e.receiver == receiver}
