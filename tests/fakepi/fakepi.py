"""A fake `pi --mode rpc` for roost's integration tests: deterministic, fast, no model.

    ROOST_PI="<python> tests/fakepi/fakepi.py"   # the worker appends:
        --mode rpc --session FILE -e EXT [--model M] [--thinking T]

It speaks the subset of pi's RPC protocol that roost's worker uses (one JSON object per
line on stdin/stdout): commands `get_state`, `prompt {message, streamingBehavior}`,
`abort`, `extension_ui_response`; events `agent_start`, `turn_start/end`,
`message_start/end`, `tool_execution_start/end`, `extension_ui_request`, `agent_end`.

It plays the job-mode part of the roost extension (roost/extension/roost.ts) too: takes
ROOST_EXT_SOCK out of its environment, takes the session writer lock (exit 3 when held),
says `ext_hello` (no token: the worker checks SO_PEERCRED) on ROOST_EXT_SOCK and injects
pushed `inject` events as custom messages (a steer while a run is active, else a new run),
with the details roost built (seq, from, relation, kind, title, body).
The session file is written like pi's (see Session) and read back on start.

The "model" reads the text of the message that triggered the call:
    [[sleep N]]              a tool call `sleep` that takes N seconds; steers queued
                             meanwhile are applied when it ends (pi's tool boundary)
    [[hold NAME]]            a tool call `hold` that lasts until the file NAME exists in
                             the working directory (a gate the test opens: no timing)
    [[think NAME]]           the model call itself lasts until the file NAME exists (no
                             event meanwhile: for a new session nothing is on disk yet)
    [[dialog select A,B]]    a `select` dialog (extension_ui_request); answers `chose: X`
    [[ask]]                  answers `echo: ...` then a last paragraph that is a question
    [[env NAME ...]]         answers `env NAME=sha256:<first 16 hex of its value's sha256>`
                             (`env NAME unset`) per name, joined by "; ": what pi's
                             environment holds, never the value
    [[spawn TASK]]           calls roost_spawn (the extension's `spawn`) with TASK, in which
                             {{ and }} stand for [[ and ]]; answers `spawn sent`
    [[crash]]                exits 1 as the message is applied (before it is stored or
                             acknowledged by message_end), so a resend crashes again
    [[kill-worker-before-ack]]  stores the user message in the session, then SIGKILLs its
                             parent (the worker) and exits before printing message_end:
                             the worker dies between delivery and ack, deterministically
    [[answers A ;; B ...]]   answers A now (`;;` with a space either side separates them);
                             each later model call that holds no directive
                             (roost's note on an invalid structured result, say) answers the
                             next one, B, ...; then as usual
    [[spawn-args JSON]]      calls roost_spawn with the JSON object's arguments (`task`,
                             `output_schema`, ...); the task may hold directives
    [[stream N MS [GATE]]]   streams its answer `streamed: w1 w2 ... wN` as pi does: a
                             message_update per word (a text_delta), MS milliseconds apart;
                             with GATE, the message ends only once the file GATE exists
    [[cut-emoji]]            answers `cut: ` and the first half of an emoji's surrogate pair
                             (a lone surrogate, written as a \\ud83d escape as node does)
    anything else            answers `echo: <text>`
After a tool result with no steer the answer is `echo: <text that asked for the tool>`.
Environment: FAKEPI_KILL_ON_NOTE=1: a note from roost (a continued run) is handled like
[[kill-worker-before-ack]]. FAKEPI_TERM_LINGER=S: when told to exit (SIGTERM, stdin closed) it exits only
once S seconds pass without another SIGTERM (a slow pi that keeps its session lock).
FAKEPI_QUEUED=FILE: each prompt queued as a steer or follow-up appends its text and a
newline to FILE (a test waits for it before it lets the run's tool end).
A steer or injected message that arrives while the model "answers" starts another turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import re
import signal
import sys
import time
import uuid
from datetime import UTC, datetime
from typing import Any

CUSTOM_TYPE = "pi-roost-agent-message"


def to_json(value: Any) -> str:
    """As pi writes JSON: UTF-8, except a lone surrogate, which JSON.stringify escapes."""
    text = json.dumps(value, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value)
    return text


NOTE_TYPE = "pi-roost-note"
EXIT_FATAL = 3
STEP_DELAY = 0.01  # a "model call" takes this long, so steers can race a run's end


def iso_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def millis() -> int:
    return int(time.time() * 1000)


def text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(p.get("text", "") for p in content or [] if p.get("type") == "text")


def parse_args(argv: list[str]) -> dict[str, str]:
    """`--mode rpc --session F -e EXT --offline` as {"mode": "rpc", ..., "offline": ""}."""
    args: dict[str, str] = {}
    key = None
    for arg in argv:
        if arg.startswith("-"):
            key = arg.lstrip("-")
            args[key] = ""
        elif key is not None:
            args[key], key = arg, None
    return args


class Session:
    """The session JSONL file, written like pi's SessionManager: nothing reaches the disk
    until the first assistant message exists; then everything so far is written, and each
    later entry is appended as it comes. So a new job's first prompt lives only in memory
    until the model's first answer (a worker must not count it as durable before that)."""

    def __init__(self, path: str, cwd: str) -> None:
        self.path = path
        self.last_id: str | None = None
        self.message_count = 0
        self.unwritten: list[dict[str, Any]] = []
        self.flushed = False  # the file holds an assistant message: append as we go
        if os.path.exists(path) and os.path.getsize(path) > 0:  # empty: new, as pi does
            with open(path, "rb") as handle:
                for line in handle:
                    try:
                        entry = json.loads(line)
                    except json.JSONDecodeError:
                        continue  # a torn last line (we were killed mid-write)
                    self.last_id = entry.get("id", self.last_id)
                    if entry.get("type") in ("message", "custom_message"):
                        self.message_count += 1
                    if (entry.get("message") or {}).get("role") == "assistant":
                        self.flushed = True
        else:
            self.unwritten.append(
                {"type": "session", "version": 3, "id": str(uuid.uuid4()), "timestamp": iso_now(), "cwd": cwd}
            )

    def _write(self, entries: list[dict[str, Any]]) -> None:
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as handle:
            for entry in entries:
                handle.write(to_json(entry) + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def append(self, message: dict[str, Any]) -> None:
        entry_id = uuid.uuid4().hex[:8]
        base = {"id": entry_id, "parentId": self.last_id, "timestamp": iso_now()}
        if message["role"] == "custom":
            entry = {
                "type": "custom_message",
                **base,
                "customType": message["customType"],
                "content": message["content"],
                "display": True,
                "details": message.get("details"),
            }
        else:
            entry = {"type": "message", **base, "message": message}
        self.unwritten.append(entry)
        self.flushed = self.flushed or message["role"] == "assistant"
        if self.flushed:
            self._write(self.unwritten)
            self.unwritten = []
        self.last_id = entry_id
        self.message_count += 1


class FakePi:
    def __init__(self, session: Session) -> None:
        self.session = session
        self.run_task: asyncio.Task[None] | None = None
        self.steers: list[dict[str, Any]] = []
        self.dialogs: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.run_messages: list[dict[str, Any]] = []
        self.aborting = False
        self.ext_writer: asyncio.StreamWriter | None = None  # the extension's channel
        self.answers: list[str] = []  # [[answers ...]]: the next model calls' answers

    def send_spawn(self, frame: dict[str, Any]) -> None:
        """roost_spawn through the extension's channel (once: a worker whose link to roostd
        is not up yet holds the call until it is, roost.worker.extchannel)."""
        assert self.ext_writer is not None
        self.ext_writer.write(json.dumps(frame).encode() + b"\n")

    @property
    def streaming(self) -> bool:
        return self.run_task is not None and not self.run_task.done()

    # -- output ------------------------------------------------------------------------------
    @staticmethod
    def emit(frame: dict[str, Any]) -> None:
        try:
            sys.stdout.buffer.write(to_json(frame).encode("utf-8") + b"\n")
            sys.stdout.buffer.flush()
        except BrokenPipeError:
            pass  # the worker is gone; we are about to exit too

    def respond(self, request: dict[str, Any], data: Any = None, error: str | None = None) -> None:
        frame = {
            "type": "response",
            "id": request.get("id"),
            "command": request.get("type"),
            "success": error is None,
            **({"error": error} if error else {"data": data}),
        }
        self.emit(frame)

    def add_message(self, message: dict[str, Any]) -> None:
        """Store a message, then announce its end (pi announces first and stores right
        after, synchronously; storing first keeps the kill points below exact)."""
        self.emit({"type": "message_start", "message": message})
        if message["role"] in ("user", "custom"):
            self.check_directives_on_apply(message)
        self.session.append(message)
        self.run_messages.append(message)
        self.emit({"type": "message_end", "message": message})

    def check_directives_on_apply(self, message: dict[str, Any]) -> None:
        text = text_of(message)
        if "[[crash]]" in text:
            os._exit(1)
        if (message.get("customType") == NOTE_TYPE and os.environ.get("FAKEPI_KILL_ON_NOTE")) or (
            "[[kill-worker-before-ack]]" in text and message["role"] == "user"
        ):
            self.session.append(message)  # taken (stored) but never announced by message_end
            os.kill(os.getppid(), signal.SIGKILL)
            os._exit(0)

    # -- commands ------------------------------------------------------------------------------
    async def handle(self, request: dict[str, Any]) -> None:
        kind = request.get("type")
        if kind == "get_state":
            self.respond(
                request,
                {
                    "sessionFile": self.session.path,
                    "sessionId": "fake",
                    "isStreaming": self.streaming,
                    "isCompacting": False,
                    "messageCount": self.session.message_count,
                    "pendingMessageCount": len(self.steers),
                    "thinkingLevel": "off",
                    "model": {"provider": "fake", "id": "fake-model"},
                },
            )
        elif kind == "prompt":
            message = {
                "role": "user",
                "content": [{"type": "text", "text": str(request.get("message"))}],
                "timestamp": millis(),
            }
            if self.streaming:
                if request.get("streamingBehavior") not in ("steer", "followUp"):
                    self.respond(request, error="Agent is already processing. Specify streamingBehavior")
                    return
                self.steers.append(message)
                queued = os.environ.get("FAKEPI_QUEUED")
                if queued:
                    with open(queued, "a", encoding="utf-8") as handle:
                        handle.write(f"{request.get('message')}\n")
                self.respond(request)
            else:
                self.respond(request)
                self.run_task = asyncio.create_task(self.run(message))
        elif kind == "abort":
            if self.streaming:
                assert self.run_task is not None
                self.aborting = True
                self.run_task.cancel()
                await asyncio.gather(self.run_task, return_exceptions=True)
            self.respond(request)
        elif kind == "extension_ui_response":
            future = self.dialogs.pop(str(request.get("id")), None)
            if future is not None and not future.done():
                future.set_result(request)
        else:
            self.respond(request, error=f"Unknown command: {kind}")

    def inject(self, frame: dict[str, Any]) -> None:
        """The extension's pi.sendMessage(..., {deliverAs: "steer", triggerTurn: true}): an
        agent item (`inject`), or a note from roost (`note`)."""
        if frame.get("event") == "note":
            custom_type, details = NOTE_TYPE, {}
        else:
            custom_type = CUSTOM_TYPE
            details = frame.get("details") or {}
        message = {
            "role": "custom",
            "customType": custom_type,
            "content": frame.get("content", ""),
            "display": True,
            "details": details,
            "timestamp": millis(),
        }
        if self.streaming:
            self.steers.append(message)
        else:
            self.run_task = asyncio.create_task(self.run(message))

    # -- runs ---------------------------------------------------------------------------------
    async def run(self, first: dict[str, Any]) -> None:
        self.run_messages = []
        self.emit({"type": "agent_start"})
        self.emit({"type": "turn_start"})
        self.add_message(first)
        trigger = text_of(first)
        last = first
        try:
            while True:
                await asyncio.sleep(STEP_DELAY)
                if last["role"] == "toolResult":
                    self.add_assistant(f"echo: {trigger}")
                else:
                    trigger = text_of(last)
                    await self.model_step(trigger)
                # The turn is over (tool done, or a final answer): queued steers go in now.
                self.emit({"type": "turn_end"})
                if self.run_messages[-1]["role"] == "assistant" and not self.steers:
                    break
                self.emit({"type": "turn_start"})
                last = self.run_messages[-1]
                while self.steers:
                    last = self.steers.pop(0)
                    self.add_message(last)
        except asyncio.CancelledError:
            if not self.aborting:
                raise  # we are exiting: a killed pi writes nothing more
            self.aborting = False
            self.add_assistant("", stop_reason="aborted")
        self.emit({"type": "agent_end", "messages": self.run_messages})

    async def model_step(self, text: str) -> None:
        think = re.search(r"\[\[think ([^\]\s]+)\]\]", text)
        if think:
            await wait_for_gate(think.group(1))
        sleep = re.search(r"\[\[sleep ([0-9.]+)\]\]", text)
        hold = re.search(r"\[\[hold ([^\]\s]+)\]\]", text)
        dialog = re.search(r"\[\[dialog select ([^\]]*)\]\]", text)
        env = re.search(r"\[\[env ([A-Za-z0-9_ ]+)\]\]", text)
        stream = re.search(r"\[\[stream ([0-9]+) ([0-9.]+)(?: ([^\]\s]+))?\]\]", text)
        spawn = re.search(r"\[\[spawn (.*?)\]\]", text)
        # To the last `}]]`: the child's task may hold directives of its own.
        spawn_args = re.search(r"\[\[spawn-args (\{.*\})\]\]", text, re.DOTALL)
        answers = None if spawn_args else re.search(r"\[\[answers (.*?)\]\]", text, re.DOTALL)
        if answers:
            self.answers = [a.strip() for a in re.split(r"\s;;\s", answers.group(1))]
        if self.answers and not (think or sleep or hold or dialog or env or spawn or spawn_args):
            self.add_assistant(self.answers.pop(0))
        elif spawn_args and self.ext_writer is not None:
            args = json.loads(spawn_args.group(1))
            args["task"] = str(args.get("task", ""))
            self.send_spawn({"id": 2, "op": "spawn", **args})
            self.add_assistant("spawn sent")
        elif env:
            self.add_assistant("; ".join(env_line(name) for name in env.group(1).split()))
        elif spawn and self.ext_writer is not None:
            task = spawn.group(1).replace("{{", "[[").replace("}}", "]]")
            self.send_spawn({"id": 2, "op": "spawn", "task": task})
            self.add_assistant("spawn sent")
        elif sleep:
            await self.tool_call("sleep", {"seconds": float(sleep.group(1))})
        elif hold:
            await self.tool_call("hold", {"gate": hold.group(1)})
        elif dialog:
            options = [o.strip() for o in dialog.group(1).split(",") if o.strip()]
            answer = await self.ask_dialog({"method": "select", "title": "Pick one", "options": options})
            chose = "cancelled" if answer.get("cancelled") else answer.get("value")
            self.add_assistant(f"chose: {chose}")
        elif stream:
            await self.stream_assistant(int(stream.group(1)), float(stream.group(2)) / 1000, stream.group(3))
        elif "[[ask]]" in text:
            self.add_assistant(f"echo: {text}\n\nShould I go on?")
        elif "[[cut-emoji]]" in text:
            self.add_assistant("cut: \ud83d")
        else:
            self.add_assistant(f"echo: {text}")

    def add_assistant(
        self, text: str, stop_reason: str = "stop", calls: list[dict[str, Any]] | None = None
    ) -> None:
        content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        content += calls or []
        self.add_message(
            {
                "role": "assistant",
                "content": content,
                "provider": "fake",
                "model": "fake-model",
                "stopReason": stop_reason,
                "timestamp": millis(),
            }
        )

    async def stream_assistant(self, words: int, pause: float, gate: str | None) -> None:
        """An answer streamed a word at a time (message_update events), then stored."""
        message: dict[str, Any] = {
            "role": "assistant",
            "content": [],
            "provider": "fake",
            "model": "fake-model",
            "stopReason": "stop",
            "timestamp": millis(),
        }
        self.emit({"type": "message_start", "message": message})
        text = "streamed:"
        for n in range(1, words + 1):
            delta = f" w{n}"
            text += delta
            message = {**message, "content": [{"type": "text", "text": text}]}
            self.emit(
                {
                    "type": "message_update",
                    "message": message,
                    "assistantMessageEvent": {
                        "type": "text_delta",
                        "contentIndex": 0,
                        "delta": delta,
                        "partial": message,
                    },
                }
            )
            await asyncio.sleep(pause)
        if gate:
            await wait_for_gate(gate)
        self.session.append(message)
        self.run_messages.append(message)
        self.emit({"type": "message_end", "message": message})

    async def tool_call(self, name: str, args: dict[str, Any]) -> None:
        call_id = f"call_{uuid.uuid4().hex[:8]}"
        self.add_assistant(
            "", "toolUse", [{"type": "toolCall", "id": call_id, "name": name, "arguments": args}]
        )
        self.emit({"type": "tool_execution_start", "toolCallId": call_id, "toolName": name, "args": args})
        if name == "hold":
            await wait_for_gate(args["gate"])
        else:
            await asyncio.sleep(float(args.get("seconds", 0)))
        result = {"content": [{"type": "text", "text": f"{name} {json.dumps(args)} done"}]}
        self.emit(
            {
                "type": "tool_execution_end",
                "toolCallId": call_id,
                "toolName": name,
                "result": result,
                "isError": False,
            }
        )
        self.add_message(
            {
                "role": "toolResult",
                "toolCallId": call_id,
                "toolName": name,
                "content": result["content"],
                "isError": False,
                "timestamp": millis(),
            }
        )

    async def ask_dialog(self, request: dict[str, Any]) -> dict[str, Any]:
        dialog_id = str(uuid.uuid4())
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.dialogs[dialog_id] = future
        self.emit({"type": "extension_ui_request", "id": dialog_id, **request})
        try:
            return await future
        finally:
            self.dialogs.pop(dialog_id, None)


def env_line(name: str) -> str:
    """`env NAME=sha256:<16 hex>` or `env NAME unset`: a value proved, never shown."""
    value = os.environ.get(name)
    if value is None:
        return f"env {name} unset"
    return f"env {name}=sha256:{hashlib.sha256(value.encode()).hexdigest()[:16]}"


async def wait_for_gate(name: str) -> None:
    while not os.path.exists(name):
        await asyncio.sleep(0.02)  # test scaffolding: a file the test creates when it wants


async def extension_link(pi: FakePi, sock_path: str) -> None:
    """The roost extension's job channel: hello, then pushed `inject` events."""
    reader, writer = await asyncio.open_unix_connection(sock_path, limit=8 * 1024 * 1024)
    hello = json.loads(await reader.readline())
    if hello.get("type") != "hello":
        raise RuntimeError(f"expected a hello greeting, got {hello}")
    # No token: the worker checks the connection's SO_PEERCRED pid is its pi's.
    writer.write(json.dumps({"id": 1, "op": "ext_hello", "pid": os.getpid()}).encode() + b"\n")
    await writer.drain()
    pi.ext_writer = writer
    while line := await reader.readline():
        frame = json.loads(line)
        if frame.get("type") == "response" and not frame.get("ok"):
            print(f"fakepi: extension channel refused: {frame.get('error')}", file=sys.stderr, flush=True)
        elif frame.get("type") == "event" and frame.get("event") in ("inject", "deliver", "note"):
            pi.inject(frame)


async def main() -> int:
    args = parse_args(sys.argv[1:])
    ext_sock = os.environ.pop("ROOST_EXT_SOCK", None)
    job_id = os.environ.get("ROOST_JOB_ID")
    session_path = args.get("session")
    if args.get("mode") != "rpc" or not session_path:
        print("fakepi: only --mode rpc --session FILE is supported", file=sys.stderr)
        return 2
    from roost.locks import SessionLock  # needs ROOST_HOME, which the worker passes

    lock = SessionLock(session_path, peer=job_id)
    if not lock.acquire():
        holder = lock.holder()
        print(
            f"fakepi: session {session_path} is being written by "
            f"{holder.pid if holder else 'another process'}",
            file=sys.stderr,
            flush=True,
        )
        return EXIT_FATAL
    loop = asyncio.get_running_loop()
    done = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, done.set)
    pi = FakePi(Session(session_path, os.getcwd()))
    if ext_sock:
        link = asyncio.create_task(extension_link(pi, ext_sock))
        link.add_done_callback(
            lambda t: (
                t.cancelled()
                or t.exception() is None
                or print(f"fakepi: extension channel: {t.exception()}", file=sys.stderr, flush=True)
            )
        )
    reader = asyncio.StreamReader(limit=64 * 1024 * 1024)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

    async def commands() -> None:
        while line := await reader.readline():
            try:
                request = json.loads(line)
            except json.JSONDecodeError:
                FakePi.emit(
                    {
                        "type": "response",
                        "command": "parse",
                        "success": False,
                        "error": "could not parse the command",
                    }
                )
                continue
            await pi.handle(request)
        done.set()  # stdin closed: pi exits 0

    reading = asyncio.create_task(commands())
    await done.wait()
    reading.cancel()
    # FAKEPI_TERM_LINGER=S: keep running (and holding the session lock) until S seconds
    # have passed without a SIGTERM, like a pi that takes a while to shut down.
    linger = float(os.environ.get("FAKEPI_TERM_LINGER") or 0)
    while linger and done.is_set():
        done.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), linger)
    lock.release()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
