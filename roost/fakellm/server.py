"""FakeLLM: a scripted OpenAI-compatible chat-completions server on 127.0.0.1.

Each request is matched against the rules in order; the first rule that matches (and is
not used up) produces the reply; with no match the default reply (text "ok") is sent and
the request is also kept in `unmatched`. Every request is recorded in `requests` before
any delay or hold, so a test can see that pi asked while the answer is still held back.

Rules can be added and cleared from any thread while the server runs.
"""

from __future__ import annotations

import itertools
import json
import os
import selectors
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import roost.fakellm.wire as wire
from roost.fakellm.matchers import Matcher, Pred, as_matcher
from roost.fakellm.replies import Reply, text
from roost.fakellm.requests import Request, last_user_text

ReplyFn = Callable[[Request], "Reply | str"]

CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")
MODELS_PATHS = ("/v1/models", "/models")
MAX_BODY = 64 * 1024 * 1024


@dataclass(eq=False)
class Rule:
    """`match` + `reply` (a Reply or `fn(request) -> Reply | str`) + `times` (None = always)."""

    match: Matcher
    reply: Reply | ReplyFn
    times: int | None = None
    name: str = ""
    used: int = 0

    @property
    def exhausted(self) -> bool:
        return self.times is not None and self.used >= self.times

    def __repr__(self) -> str:
        times = "∞" if self.times is None else f"{self.used}/{self.times}"
        return f"Rule({self.name!r}, {self.match.desc}, {times})"


class FakeLLM:
    """A scripted chat-completions server; a context manager that runs it in a thread."""

    def __init__(
        self,
        rules: Iterable[Rule] = (),
        *,
        default: Reply | ReplyFn | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        model: str = "fake-model",
        log_path: str | Path | None = None,
        hold_timeout: float = 300.0,
    ) -> None:
        self.host = host
        self.model = model
        self.log_path = Path(log_path) if log_path else None
        # A held response gives up after this long so a forgotten Event cannot hang a test run.
        self.hold_timeout = hold_timeout
        self._requested_port = port
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._rules: list[Rule] = list(rules)
        self._default: Reply | ReplyFn = default if default is not None else text("ok")
        self._requests: list[Request] = []
        self._unmatched: list[Request] = []
        self._errors: list[str] = []
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._wake_r = self._wake_w = -1
        self._rule_seq = itertools.count(1)
        self._completion_seq = itertools.count(1)
        self.sent: list[tuple[float, bytes]] | None = None
        """Set to a list to note each streamed chunk written, with its time (benchmarks)."""

    # ---- lifecycle -------------------------------------------------------------------

    def start(self) -> FakeLLM:
        if self._server is not None:
            return self
        server = _Server((self.host, self._requested_port), _Handler)
        server.fake = self
        server.timeout = 0  # handle_request() is only called once the socket is readable
        self._server = server
        self._stopping.clear()
        self._wake_r, self._wake_w = os.pipe()
        self._thread = threading.Thread(
            target=self._serve,
            args=(server, self._wake_r),
            daemon=True,
            name=f"fakellm:{self.port}",
        )
        self._thread.start()
        return self

    def _serve(self, server: _Server, wake_fd: int) -> None:
        # Own accept loop instead of serve_forever(): that one polls every poll_interval to
        # notice shutdown; here stop() wakes the selector through a pipe, so an idle server
        # costs nothing and stops at once.
        with selectors.DefaultSelector() as sel:
            sel.register(server.socket, selectors.EVENT_READ)
            sel.register(wake_fd, selectors.EVENT_READ)
            while not self._stopping.is_set():
                for key, _ in sel.select():
                    if key.fileobj is server.socket and not self._stopping.is_set():
                        server.handle_request()

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping.set()  # also releases delays and holds
        os.write(self._wake_w, b"x")
        if self._thread:
            self._thread.join(timeout=5)
        server.server_close()
        os.close(self._wake_r)
        os.close(self._wake_w)

    def __enter__(self) -> FakeLLM:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("FakeLLM is not running")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """What goes in models.json `baseUrl`: `http://127.0.0.1:PORT/v1`."""
        return f"http://{self.host}:{self.port}/v1"

    # ---- scripting -------------------------------------------------------------------

    def add(
        self,
        match: Matcher | Pred | None,
        reply: Reply | ReplyFn | str,
        *,
        times: int | None = None,
        name: str | None = None,
        first: bool = False,
    ) -> Rule:
        """Add a rule (at the end, or before all others with `first=True`)."""
        m = as_matcher(match)
        r: Reply | ReplyFn = text(reply) if isinstance(reply, str) else reply
        rule = Rule(m, r, times, name or f"rule{next(self._rule_seq)}:{m.desc}")
        return self.add_rule(rule, first=first)

    def add_rule(self, rule: Rule, *, first: bool = False) -> Rule:
        if not rule.name:
            rule.name = f"rule{next(self._rule_seq)}:{rule.match.desc}"
        with self._lock:
            if first:
                self._rules.insert(0, rule)
            else:
                self._rules.append(rule)
        return rule

    def remove(self, rule: Rule) -> None:
        with self._lock:
            self._rules = [r for r in self._rules if r is not rule]

    def clear(self) -> None:
        """Drop every rule (recorded requests stay)."""
        with self._lock:
            self._rules = []

    def set_default(self, reply: Reply | ReplyFn | str) -> None:
        with self._lock:
            self._default = text(reply) if isinstance(reply, str) else reply

    @property
    def rules(self) -> list[Rule]:
        with self._lock:
            return list(self._rules)

    # ---- what was asked --------------------------------------------------------------

    @property
    def requests(self) -> list[Request]:
        """Every chat request so far, oldest first (a snapshot)."""
        with self._lock:
            return list(self._requests)

    @property
    def unmatched(self) -> list[Request]:
        """Requests no rule matched (they got the default reply)."""
        with self._lock:
            return list(self._unmatched)

    @property
    def errors(self) -> list[str]:
        """Exceptions raised by reply callables (the request got HTTP 500)."""
        with self._lock:
            return list(self._errors)

    def requests_matching(self, pred: Matcher | Pred) -> list[Request]:
        m = as_matcher(pred)
        return [r for r in self.requests if m(r)]

    def wait_for_request(
        self, pred: Matcher | Pred | None = None, timeout: float = 10.0, *, since: int = 0
    ) -> Request:
        """The first request with index >= `since` that satisfies `pred`; waits for it.

        Raises TimeoutError listing what did arrive.
        """
        m = as_matcher(pred)
        deadline = time.monotonic() + timeout
        checked = since
        with self._cond:
            while True:
                while checked < len(self._requests):
                    req = self._requests[checked]
                    checked += 1
                    if m(req):
                        return req
                left = deadline - time.monotonic()
                if left <= 0:
                    seen = [f"#{r.index} {last_user_text(r)[:50]!r}" for r in self._requests]
                    raise TimeoutError(
                        f"no model request matching {m.desc} within {timeout}s "
                        f"(since #{since}; received: {seen or 'none'})"
                    )
                self._cond.wait(left)

    # ---- request handling (called from handler threads) ------------------------------

    def _receive(
        self, path: str, body: Mapping[str, Any], authorization: str | None = None
    ) -> tuple[Request, Reply]:
        with self._cond:
            req = Request(
                body, index=len(self._requests), t=time.monotonic(), path=path, authorization=authorization
            )
            chosen: Rule | None = None
            for rule in self._rules:
                if rule.exhausted:
                    continue
                try:
                    ok = rule.match(req)
                except Exception:  # a broken matcher must not take the server down
                    self._errors.append(f"matcher {rule.name}: {traceback.format_exc()}")
                    ok = False
                if ok:
                    chosen = rule
                    rule.used += 1
                    break
            source: Reply | ReplyFn
            if chosen is None:
                source = self._default
                self._unmatched.append(req)
            else:
                source = chosen.reply
                req.rule = chosen.name
            self._requests.append(req)
            self._log(req)
            self._cond.notify_all()
        return req, self._resolve(source, req)

    def _resolve(self, source: Reply | ReplyFn, req: Request) -> Reply:
        if isinstance(source, Reply):
            return source
        try:
            out = source(req)
        except Exception:
            msg = f"reply for request #{req.index} raised:\n{traceback.format_exc()}"
            with self._lock:
                self._errors.append(msg)
            return Reply(status=500, error_message=msg)
        return text(out) if isinstance(out, str) else out

    def _log(self, req: Request) -> None:
        if self.log_path is None:
            return
        with self.log_path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(req.record(), separators=(",", ":")) + "\n")

    def _wait_before_reply(self, reply: Reply) -> None:
        if reply.delay > 0:
            self._stopping.wait(reply.delay)
        if reply.hold is not None:
            # Two events cannot be waited on together; a short re-check keeps stop() prompt.
            deadline = time.monotonic() + self.hold_timeout
            while not reply.hold.wait(0.05):
                if self._stopping.is_set() or time.monotonic() > deadline:
                    break

    def _next_completion_id(self) -> str:
        return f"chatcmpl-fake-{next(self._completion_seq)}"


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    fake: FakeLLM


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def handle(self) -> None:
        # A client that hangs up is normal, not a server error: pi killed by roost (a job
        # stopped at its budget, a worker told to stop) resets its idle keep-alive connection
        # while this waits for the next request, or the one whose body it is sending. The
        # stdlib would print a traceback for each; the connection just ends.
        try:
            super().handle()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    # ---- helpers ---------------------------------------------------------------------

    def _send_json(self, status: int, obj: Any, headers: Mapping[str, str] | None = None) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    # ---- routes ----------------------------------------------------------------------

    def do_GET(self) -> None:
        fake = self.server.fake
        path = self.path.split("?", 1)[0]
        if path in MODELS_PATHS:
            self._send_json(
                200,
                {
                    "object": "list",
                    "data": [{"id": fake.model, "object": "model", "created": 0, "owned_by": "fakellm"}],
                },
            )
        else:
            self._send_json(404, wire.error_body(404, f"no route GET {path}"))

    def do_POST(self) -> None:
        fake = self.server.fake
        path = self.path.split("?", 1)[0]
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self._send_json(413, wire.error_body(413, "request body too large"))
            self.close_connection = True
            return
        raw = self.rfile.read(length) if length else b""
        if path not in CHAT_PATHS:
            self._send_json(404, wire.error_body(404, f"no route POST {path}"))
            return
        try:
            body = json.loads(raw or b"{}")
            if not isinstance(body, dict):
                raise ValueError("body is not a JSON object")
        except ValueError as e:
            self._send_json(400, wire.error_body(400, f"could not decode request: {e}"))
            return
        req, reply = fake._receive(path, body, self.headers.get("Authorization"))
        fake._wait_before_reply(reply)
        try:
            self._answer(fake, req, reply, len(raw))
            req.completed = True
        except (BrokenPipeError, ConnectionResetError):
            # The client went away (pi aborted the request); nothing to answer.
            self.close_connection = True

    def _answer(self, fake: FakeLLM, req: Request, reply: Reply, request_chars: int) -> None:
        if reply.is_error:
            # x-should-retry: false stops the OpenAI SDK's own silent retries, so each
            # scripted error reaches pi (and its visible auto-retry) exactly once.
            assert reply.status is not None
            self._send_json(
                reply.status,
                wire.error_body(reply.status, reply.error_message),
                {"x-should-retry": "false"},
            )
            return
        calls = wire.resolve_calls(reply)
        cid = fake._next_completion_id()
        if not req.get("stream"):
            self._send_json(
                200,
                wire.completion_body(
                    reply, calls, model=fake.model, completion_id=cid, request_chars=request_chars
                ),
            )
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        first = True
        for event in wire.sse_chunks(
            reply, calls, model=fake.model, completion_id=cid, request_chars=request_chars
        ):
            if reply.chunk_delay > 0 and not first:
                fake._stopping.wait(reply.chunk_delay)
            first = False
            self._write_chunk(event)
            if fake.sent is not None:
                fake.sent.append((time.time(), event))
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
