"""The job's approval gate (docs/guides/approvals.md): the extension asks, for every tool
call pi is about to run, whether it may (`gate` on the extension socket; pi's `tool_call`
event waits for the answer, and a `block` is the call's result, with the reason).

The rules are decided here (roost.approvals.callrules); a call that must ask is asked of
roostd (`approval_request`), which keeps the entry and tells a person. The call waits
until the entry is answered: roostd pushes the answer (`approval`), and the gate also asks
again every ASK_AGAIN seconds and after every reconnect, so an answer given while this
worker was away from roostd (a restart of roostd) still arrives; the request is
idempotent (the same call id, the same entry). While a call waits, the job is
`needs_input` with the call's summary as its status (`approve bash: git push`), and its
run is in progress (`busy`): roostd never reaps its pi, so the call is never lost to idle
reaping, and it holds no queue slot (a job waiting on a person does not run a turn).

pi 1.6 runs the `tool_call` step of every call of one assistant message before it runs
any of them: the calls are asked one at a time, in order, and an approved one runs once
its siblings are decided too.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from typing import Any

from roost.approvals import callrules as policy
from roost.job.record import JobRecord
from roost.job.states import JobState
from roost.wire.connection import Connection
from roost.wire.protocol import BAD_REQUEST, RequestError
from roost.worker.daemon_link import DaemonLink
from roost.worker.runs import RunTracker

log = logging.getLogger("roost.worker")

ASK_AGAIN = 3.0
"""Seconds between two asks of roostd for the same waiting call (a lost push, a restart)."""


class Gate:
    def __init__(
        self, record: JobRecord, runs: RunTracker, link: DaemonLink, report: Callable[[], None]
    ) -> None:
        self.policy = dict(record.approvals) if record.approvals else None
        self.cwd = record.cwd
        self.runs = runs
        self.link = link
        self.report = report
        self.waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}

    @property
    def gated(self) -> bool:
        return policy.gated(self.policy)

    async def gate(self, conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
        call, tool, tool_input = request.get("call"), request.get("tool"), request.get("input")
        if not isinstance(call, str) or not isinstance(tool, str):
            raise RequestError(BAD_REQUEST, "gate: call and tool are strings")
        if not isinstance(tool_input, dict):
            tool_input = {}
        decision = policy.decide(self.policy, tool, tool_input, self.cwd)
        if decision.action == "allow":
            return {"block": False}
        if decision.action == "deny":
            log.info("tool call %s (%s) denied by the rule %s", call, tool, decision.rule)
            return {
                "block": True,
                "reason": f"Denied by the job's approval rule `deny {decision.rule}`: this call did not run.",
            }
        answer = await self._ask(call, tool, tool_input)
        if answer.get("rule") and self.policy is not None:  # --always
            self.policy["allow"] = list(dict.fromkeys([*self.policy.get("allow", []), answer["rule"]]))
        if answer.get("decision") == "approved":
            return {"block": False}
        by, reason = answer.get("by"), answer.get("reason")
        if by == "timeout":
            text = f"Denied: {reason or 'the approval timed out'}. This call did not run."
        else:
            text = "Denied by the user: this call did not run." + (
                f" Their reason: {reason}" if reason else ""
            )
        return {"block": True, "reason": text}

    async def _ask(self, call: str, tool: str, tool_input: dict[str, Any]) -> dict[str, Any]:
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.waiting[call] = future
        self._show(policy.summary(tool, tool_input))
        try:
            while not future.done():
                try:
                    reply = await self.link.request(
                        "approval_request", call=call, tool=tool, input=tool_input, worker=os.getpid()
                    )
                    if reply.get("decision") and not future.done():
                        future.set_result(reply)
                        break
                except RequestError as exc:  # roostd away: asked again once it is back
                    log.debug("approval of %s not asked yet: %s", call, exc)
                with_timeout = asyncio.wait_for(asyncio.shield(future), ASK_AGAIN)
                try:
                    await with_timeout
                except TimeoutError:
                    pass
            return future.result()
        finally:
            self.waiting.pop(call, None)
            self._done()

    def on_answer(self, event: dict[str, Any]) -> None:
        """roostd's `approval` push: a waiting call's answer."""
        future = self.waiting.get(str(event.get("call")))
        if future is not None and not future.done():
            future.set_result(event)

    def _show(self, summary: str) -> None:
        if self.runs.state != JobState.NEEDS_INPUT:
            self.runs.enter(JobState.NEEDS_INPUT)
        self.runs.status = summary
        self.report()

    def _done(self) -> None:
        if self.waiting or self.runs.state != JobState.NEEDS_INPUT:
            return
        self.runs.enter(JobState.RUNNING)
        self.runs.status = "thinking"
        self.report()
