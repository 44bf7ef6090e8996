"""The MCP server: roost's tools and resources on the official SDK's `MCPServer`.

Each tool is a thin call into `roost.mcp.calls` (run in a worker thread: the roostd client
blocks), its input a JSON Schema made from the signature, its output a model of
`roost.mcp.shapes`. A refusal is an MCP tool error (`isError`) carrying roost's one-line
message as it is. What a model must not do through it, it cannot: no tool answers a dialog
or an approval (reply_to_job is refused while a dialog is open: a person answers it on
roost's own surfaces), and send_message is an external agent's message, under
agentExternalMessages.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Annotated, Any, Literal

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from roost import __version__
from roost.errors import RoostError
from roost.mcp import calls, shapes
from roost.mcp.safetext import text as safe
from roost.wire.protocol import DAEMON_OPS, RequestError

INSTRUCTIONS = """\
roost supervises pi coding-agent sessions as background jobs that talk to each other.
run_job starts one (it returns a cursor); wait_for_jobs long-polls its events (at most 25 s
a call: call it again with the cursor it returns); show_job gives its state, summary,
question, cost and the end of its transcript; job_result its structured result. A job
that asks a question waits for reply_to_job. Dialogs and approvals are answered by the
person, on roost's own surfaces (roost inbox, roost view, roost web), never by a tool."""

READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)


def one_line(exc: BaseException) -> str:
    message = (
        exc.message
        if isinstance(exc, RequestError)
        else (exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc))
    )
    return " ".join(safe(str(message)).split()) or type(exc).__name__


async def _thread(fn: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
    return await anyio.to_thread.run_sync(functools.partial(fn, *args), abandon_on_cancel=True)


async def _run(
    model: type[BaseModel],
    fn: Callable[..., dict[str, Any]],
    *args: Any,
    text_of: Callable[[dict[str, Any]], str] | None = None,
) -> CallToolResult:
    """`fn(*args)` in a worker thread, its answer as `model`'s structured result (and a text
    of it for a client that reads only text); a refusal as the tool's error, roost's one
    line as it is (a raised ToolError would reach the client behind the SDK's "Error
    executing tool NAME: ")."""
    try:
        data = await _thread(fn, *args)
    except (RoostError, OSError) as exc:
        return CallToolResult(content=[TextContent(type="text", text=one_line(exc))], is_error=True)
    value = model.model_validate(data).model_dump(mode="json")
    shown = text_of(data) if text_of else json.dumps(value, ensure_ascii=False, indent=1)
    return CallToolResult(content=[TextContent(type="text", text=shown)], structured_content=value)


async def _read(fn: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
    """A resource's data; a refusal as the resource's error, roost's one line."""
    try:
        return await _thread(fn, *args)
    except (RoostError, OSError) as exc:
        raise ResourceError(one_line(exc)) from None


def client_name(ctx: Context, fixed: str | None) -> str:
    """Who an external message is from: `roost mcp --name`, else the client's own name
    (its `initialize`), else `mcp client`."""
    if fixed:
        return fixed
    params = ctx.session.client_params
    info = params.client_info if params is not None else None
    return (info.name if info is not None and info.name else "") or "mcp client"


def _detail_text(job: dict[str, Any]) -> str:
    head = [
        f"job {job['id']} ({job['name']}): {job['state']}",
        *(
            f"{k}: {job[k]}"
            for k in ("status", "summary", "question", "error", "cost")
            if job.get(k) not in (None, "")
        ),
    ]
    if job.get("hasResult"):
        head.append("result: " + json.dumps(job.get("result"), ensure_ascii=False))
    body = job.get("transcript") or ""
    return "\n".join(head) + ("\n\ntranscript (its end):\n" + body if body else "")


JobRef = Annotated[str, Field(description="the job's id (or its name)")]


def build(name: str | None = None) -> MCPServer:
    """The server, its tools and resources; `name`: what external messages are from."""
    server = MCPServer("roost", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")
    _job_tools(server)
    _talk_tools(server, name)
    if "search" in DAEMON_OPS:  # a roost with full-text search
        _search_tool(server)
    _resources(server)
    return server


def _job_tools(server: MCPServer) -> None:
    @server.tool(title="List jobs", annotations=READ)
    async def list_jobs(
        state: Annotated[
            list[str] | None,
            Field(description="only jobs in these states (running, needs_input, done, failed, ...)"),
        ] = None,
        name: Annotated[str | None, Field(description="only jobs whose name holds this")] = None,
        directory: Annotated[
            str | None, Field(description="only jobs working in this directory or below it")
        ] = None,
        limit: Annotated[int, Field(ge=1, le=500)] = 50,
    ) -> Annotated[CallToolResult, shapes.JobList]:
        """roost's jobs, the newest first."""
        return await _run(shapes.JobList, calls.list_jobs, state, name, directory, limit)

    @server.tool(title="Show a job", annotations=READ)
    async def show_job(
        job: JobRef,
        entries: Annotated[
            int,
            Field(
                ge=0,
                le=calls.TRANSCRIPT_MAX,
                description="how many of its transcript's last entries to include",
            ),
        ] = 20,
    ) -> Annotated[CallToolResult, shapes.JobDetail]:
        """One job: its state, summary, question, cost, error, result and the end of its
        transcript."""
        return await _run(shapes.JobDetail, calls.show_job, job, entries, text_of=_detail_text)

    @server.tool(title="Run a job", annotations=WRITE)
    async def run_job(
        task: Annotated[str, Field(description="what the agent is to do")],
        cwd: Annotated[
            str | None, Field(description="its working directory (default: where roost mcp runs)")
        ] = None,
        name: Annotated[str | None, Field(description="a name no other job has")] = None,
        agent: Annotated[str | None, Field(description="an agent definition (roost agents ls)")] = None,
        model: Annotated[str | None, Field(description="provider/id")] = None,
        budget: Annotated[float | None, Field(gt=0, description="the most it may spend")] = None,
        worktree: Annotated[bool, Field(description="work in a new git worktree on a new branch")] = False,
        output_schema: Annotated[
            dict[str, Any] | None,
            Field(description="a JSON Schema its final answer must be valid against (job_result)"),
        ] = None,
        after: Annotated[list[str] | None, Field(description="start only once these jobs are done")] = None,
    ) -> Annotated[CallToolResult, shapes.Started]:
        """Start a pi job in the background; returns its id and a cursor for wait_for_jobs."""
        args = {
            "task": task,
            "cwd": cwd,
            "name": name,
            "agent": agent,
            "model": model,
            "budget": budget,
            "worktree": worktree or None,
            "output_schema": output_schema,
            "after": after,
            "afterMode": "all" if after else None,
        }
        return await _run(shapes.Started, calls.run_job, args)

    @server.tool(title="Wait for jobs", annotations=READ)
    async def wait_for_jobs(
        jobs: Annotated[list[str] | None, Field(description="the jobs (none: every job)")] = None,
        cursor: Annotated[
            int | None, Field(ge=0, description="where the last call (or run_job) left off; none: from now")
        ] = None,
        until: Annotated[
            Literal["event", "settled", "done", "failed", "needs_input"],
            Field(
                description="event: return at the next event; settled: once the jobs' runs "
                "have ended (done, needs_input, failed, stopped)"
            ),
        ] = "event",
        mode: Annotated[Literal["any", "all"], Field(description="any or all of the jobs")] = "any",
        timeout: Annotated[float, Field(ge=0, le=calls.WAIT_MAX)] = calls.WAIT_MAX,
    ) -> Annotated[CallToolResult, shapes.Events]:
        """Long-poll (at most 25 s): the events since `cursor`, once there is one or the
        jobs reach `until`. Call it again with the cursor it returns."""
        return await _run(shapes.Events, calls.wait, jobs or [], cursor, timeout, until, mode)

    @server.tool(title="A job's structured result", annotations=READ)
    async def job_result(job: JobRef) -> Annotated[CallToolResult, shapes.Result]:
        """The job's last final answer that was valid against its output schema."""
        return await _run(shapes.Result, calls.job_result, job)

    @server.tool(
        title="Stop a job", annotations=ToolAnnotations(destructive_hint=True, open_world_hint=False)
    )
    async def stop_job(job: JobRef) -> Annotated[CallToolResult, shapes.Stopped]:
        """Stop a job (messages never wake it; it can be started again with roost start)."""
        return await _run(shapes.Stopped, calls.stop_job, job)


def _talk_tools(server: MCPServer, fixed_name: str | None) -> None:
    @server.tool(title="Reply to a job", annotations=WRITE)
    async def reply_to_job(
        job: JobRef, text: Annotated[str, Field(min_length=1)]
    ) -> Annotated[CallToolResult, shapes.Delivery]:
        """A reply as the user gives one with roost reply: it starts the job's next run (or
        is steered into its running one). It answers no dialog and no approval: refused
        while the job waits on a dialog; the person answers those on roost's own surfaces."""
        return await _run(shapes.Delivery, calls.reply, job, text)

    @server.tool(title="Send a message to a job", annotations=WRITE)
    async def send_message(
        job: Annotated[str, Field(description="the job's exact id")],
        text: Annotated[str, Field(min_length=1)],
        ctx: Context,
    ) -> Annotated[CallToolResult, shapes.Delivery]:
        """A message to the job's agent from you, framed as an external agent's (not the
        user's: it carries no user authority). Only when roost allows messages from
        outside a session tree (agentExternalMessages)."""
        sender = client_name(ctx, fixed_name)
        return await _run(shapes.Delivery, calls.send_message, job, text, sender)

    @server.tool(title="The inbox", annotations=READ)
    async def read_inbox() -> Annotated[CallToolResult, shapes.Inbox]:
        """What waits for a person: open questions and dialogs, budget stops, failures.
        Read only: the person answers them (roost inbox, roost answer, roost web)."""
        return await _run(shapes.Inbox, calls.inbox)


def _search_tool(server: MCPServer) -> None:
    @server.tool(title="Search the jobs' conversations", annotations=READ)
    async def search_jobs(
        query: Annotated[str, Field(min_length=1, description='words, "a phrase", retr*, AND, OR, NOT')],
        job: Annotated[str | None, Field(description="only this job (and its children)")] = None,
        limit: Annotated[int, Field(ge=1, le=200)] = 20,
    ) -> Annotated[CallToolResult, shapes.Found]:
        """Full-text search of every job's conversation (roost search), best first."""
        return await _run(shapes.Found, calls.search, query, job, limit)


def _resources(server: MCPServer) -> None:
    @server.resource(
        "roost://jobs/{job}/transcript",
        name="transcript",
        mime_type="text/plain",
        description="A job's whole transcript as text",
    )
    async def transcript(job: str) -> str:
        def read() -> dict[str, Any]:
            row = calls.request("show", {"job": job})["job"]
            return {"text": calls.transcript(row, None)}

        return str((await _read(read))["text"])

    @server.resource(
        "roost://inbox",
        name="inbox",
        mime_type="application/json",
        description="What waits for a person (roost inbox)",
    )
    async def inbox() -> str:
        return json.dumps(await _read(calls.inbox), ensure_ascii=False, indent=1)
