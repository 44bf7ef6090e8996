"""roostd's agent operations: peer_register, peers, send, spawn, handback.

Guards and limits answer with a `refused` error whose text says which rule; outcomes
(`delivered`, `queued`, `started`, `not running`, `stopped`) are results, not errors.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import secrets
import time
from collections.abc import Callable
from typing import Any

from roost.agents import tooltext
from roost.agents.limits import RateLimiter, SpawnCounts, spawn_refusal
from roost.agents.peers import PEER_ID, Peer, ResolveError, reachable, resolve
from roost.host import procid
from roost.job import env as jobenv
from roost.job.record import JobRecord, Links
from roost.job.states import SETTLED_JOB_STATES, Attach, ItemKind, JobState, PeerKind
from roost.locks import holder_is_alive, read_holder
from roost.supervise import budget as budgets
from roost.supervise import worktrees as worktree_jobs
from roost.supervise.core import Core
from roost.supervise.jobqueue import group_of, priority_of
from roost.supervise.jobs import create_job, launch, request_env, strip_controls
from roost.supervise.jobstore import accept_item
from roost.supervise.router import ForegroundPeer
from roost.text import unicode
from roost.wire.connection import Connection, Handler
from roost.wire.protocol import BAD_REQUEST, NOT_FOUND, REFUSED, RESULT_MAX, UNAUTHORIZED, RequestError
from roost.worktrees.report import with_section

log = logging.getLogger(__name__)

REPORT_ID = re.compile(r"^[0-9a-f]{1,64}$")
REPORT_STATES = sorted(s.value for s in SETTLED_JOB_STATES)  # a run ended in one of them


def refuse(message: str) -> RequestError:
    return RequestError(REFUSED, message)


class AgentOps:
    """The agent ops, one method each, over the daemon's core and the rate limits they
    share (per roostd: a restart forgets them)."""

    def __init__(self, core: Core) -> None:
        self.core = core
        self.router = core.agents
        self.send_rate = RateLimiter()
        self.spawn_rate = RateLimiter()

    async def peer_register(self, conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
        if conn.job_id is not None:
            raise RequestError(BAD_REQUEST, "a job's worker is already its peer")
        session = request.get("session")
        # Who registers is the process at the other end of the socket (SO_PEERCRED), not
        # a pid the request names: otherwise any client could register for a session
        # whose lock a live pi holds, and take its messages.
        peer = conn.peer
        if peer is None or peer.uid != os.getuid():
            raise RequestError(UNAUTHORIZED, "peer_register: the caller's credentials are unknown")
        pid = peer.pid
        if request.get("pid") != pid:
            raise RequestError(
                UNAUTHORIZED, f"peer_register: the caller is pid {pid}, not {request.get('pid')!r}"
            )
        if session is not None:
            if not isinstance(session, str) or not os.path.isabs(session):
                raise RequestError(BAD_REQUEST, "session must be an absolute path or null")
            holder = read_holder(session)
            if holder is None:
                raise RequestError(UNAUTHORIZED, f"no writer lock is held for {session}")
            if holder.pid != pid:
                raise RequestError(
                    UNAUTHORIZED,
                    f"the writer lock of {session} names pid {holder.pid}, not {pid}",
                )
            if not holder_is_alive(holder):
                raise RequestError(UNAUTHORIZED, f"the lock holder pid {pid} is not alive")
            # A job's session is the job's (its reports, its messages): a foreground pi gets
            # it only through `roost attach` (or /roost-bg), never by taking a free lock.
            owner = self.router.job_for_session(session)
            if owner is not None and not owner.attached:
                raise RequestError(
                    UNAUTHORIZED,
                    f"{session} is job {owner.id}'s session: `roost attach {owner.id}` opens it in a pi",
                )
            caller = self.router.attach_callers.get(owner.id) if owner is not None else None
            if (
                owner is not None
                and owner.attach in (Attach.ATTACHING, Attach.ATTACHED)
                and caller is not None
                and not procid.descends_from(pid, *caller)
            ):
                raise RequestError(
                    UNAUTHORIZED,
                    f"pid {pid} is not the pi that `roost attach {owner.id}` (pid {caller[0]}) started",
                )
        else:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                raise RequestError(UNAUTHORIZED, f"pid {pid} is not alive") from None
        peer_id = request.get("peer")
        if (
            not isinstance(peer_id, str)
            or not PEER_ID.match(peer_id)
            or (
                session is None
                and peer_id in self.router.foreground
                and self.router.foreground[peer_id].conn is not conn
            )
        ):
            peer_id = "f" + secrets.token_hex(4)[:7]
        name = self._peer_name(request, peer_id)
        fg = ForegroundPeer(
            id=peer_id,
            session=session,
            name=name,
            cwd=str(request.get("cwd") or ""),
            pid=pid,
            conn=conn,
        )
        self.router.register(fg)
        return {"id": peer_id, "name": fg.name}

    def _peer_name(self, request: dict[str, Any], peer_id: str) -> str:
        """The name a foreground pi goes by: its session's name, under the rule of a job's
        name (unicode.clean_name: NFKC, no bidi or invisible character, one script; no
        look-alike of a job's or another peer's name), refused when it breaks it. Without
        one, its folder's name, under the same rule, or else its peer id: a folder the user
        named long ago never costs a pi its tools."""
        others = {r.name: f"{ascii(r.name)}, the name of job {r.id}" for r in self.core.jobs.values()}
        others.update(
            {
                fg.name: f"{ascii(fg.name)}, the name of peer {fg.id}"
                for fg in self.router.foreground.values()
                if fg.id != peer_id
            }
        )
        given = request.get("name")
        raw = str(given or os.path.basename(str(request.get("cwd") or "")) or peer_id)
        try:
            name = unicode.clean_name(" ".join(strip_controls(raw).split()), "peer name")[:80]
            imitated = unicode.imitates(name, others)
            if imitated:
                raise ValueError(f"peer name {ascii(name)} looks like {imitated}")
        except ValueError as exc:
            if given:
                raise RequestError(BAD_REQUEST, str(exc)) from None
            log.info("peer %s: its folder's name is not a name (%s): named by its id", peer_id, exc)
            return peer_id
        return name or peer_id

    def caller(self, conn: Connection) -> Peer:
        return self.router.caller(conn)

    def identity(self, conn: Connection, me: Peer) -> str:
        """Who the rate limits count: the job, or a foreground pi's session (else its
        kernel pid), never the connection or a peer id it chose: a new connection, or a
        new peer_register, is not a new sender."""
        if me.kind == PeerKind.JOB:
            return f"job:{me.id}"
        held = self.router.job_for_session(me.session)
        if held is not None:  # a job's session handed to this pi: the job's own budget
            return f"job:{held.id}"
        if me.session:
            return f"session:{me.session}"
        return f"pid:{conn.peer.pid}" if conn.peer else f"peer:{me.id}"

    async def peers(self, conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
        me = self.caller(conn)
        external = self.core.settings().agentExternalMessages
        rows = [peer.row(rel) for peer, rel in reachable(me, self.router.all_peers(), external)]
        return {"peers": rows, "self": me.id, "text": tooltext.peers_text(rows)}

    def _checked_message(self, sender: str, message: Any, settings: Any) -> str:
        """`message` as the sender `sender` may send it: counted against the rate limit,
        not empty, not over the size limit (both `send` and an external `message`)."""
        if not self.send_rate.hit(sender, settings.agentMessagesPerMinute):
            raise refuse(f"rate limit: at most {settings.agentMessagesPerMinute} messages a minute")
        if not isinstance(message, str) or not message.strip():
            raise RequestError(BAD_REQUEST, "the message is empty")
        if len(message) > settings.agentMessageMaxChars:
            raise refuse(f"message too long: {len(message)} characters (max {settings.agentMessageMaxChars})")
        return message

    async def send(self, conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
        me = self.caller(conn)
        settings = self.core.settings()
        message = self._checked_message(self.identity(conn, me), request["message"], settings)
        try:
            target, rel = resolve(
                me, str(request["to"]), self.router.all_peers(), settings.agentExternalMessages
            )
        except ResolveError as exc:
            raise refuse(str(exc)) from None
        outcome = await self.router.send_message(target, me, message)
        return {
            "status": outcome.value,
            "relation": rel,
            "id": target.id,
            "name": target.name,
            "text": tooltext.send_text(outcome, rel, target.id, target.name),
        }

    async def message(self, conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
        """A message from an agent outside roost (`roost mcp`'s client, named by `from`) to
        the job `job`: framed to its model as an external agent's (relation `external`),
        never as the user's. External reach rules: only when agentExternalMessages is on,
        the job named by its exact id; the message limits of `send`."""
        settings = self.core.settings()
        if not settings.agentExternalMessages:
            raise refuse(
                "messages from agents outside roost's session trees are off "
                "(agentExternalMessages in ~/.pi/agent/roost.json)"
            )
        name = self._external_name(request.get("from"))
        message = self._checked_message(f"external:{name}", request["message"], settings)
        ref = str(request["job"])
        record = self.core.jobs.get(ref)
        if record is None:
            named = [r.id for r in self.core.jobs.values() if r.name == ref]
            hint = f": use its id {named[0]}" if len(named) == 1 else " (see roost ls)"
            raise RequestError(
                NOT_FOUND,
                f"no job with id {ref!r}; agents outside a session "
                f"tree reach a job by its exact id only{hint}",
            )
        sender = {"id": "external", "name": name, "relation": "external"}
        outcome = accept_item(self.core, record, ItemKind.MESSAGE, message, sender=sender)
        self.core.events.emit(
            "message.sent",
            None,
            **{"from": {"id": "external", "name": name}},
            to={"id": record.id, "name": record.name},
            outcome=outcome.value,
        )
        return {"status": outcome.value, "id": record.id, "name": record.name, "from": name}

    def _external_name(self, given: Any) -> str:
        """The name an external sender goes by, under the rule of a job's name, and no
        look-alike of a job's or a foreground pi's (the receiver must not take it for one)."""
        if not isinstance(given, str) or not given.strip():
            raise RequestError(BAD_REQUEST, "from: name the external agent")
        try:
            name = unicode.clean_name(" ".join(given.split()), "from")[:80]
        except ValueError as exc:
            raise RequestError(BAD_REQUEST, str(exc)) from None
        others = {r.name: f"job {r.id}" for r in self.core.jobs.values()}
        others.update({fg.name: f"peer {fg.id}" for fg in self.router.foreground.values()})
        if name in others or (imitated := unicode.imitates(name, others)):
            raise refuse(
                f"from: {ascii(name)} is (or looks like) the name of "
                f"{others.get(name) or imitated}: choose another name"
            )
        return name

    async def spawn(self, conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
        me = self.caller(conn)
        settings = self.core.settings()
        parent_session = me.session
        parent_tools: tuple[str, ...] | None = None
        if me.kind == PeerKind.JOB:
            parent_record = self.core.jobs[me.id]
            # A child runs with its parent job's environment: the one its creator gave it.
            env = jobenv.load(parent_record.dir)
            depth = parent_record.links.depth
            listed = (parent_record.agent_def or {}).get("tools")
            if listed is not None:
                parent_tools = tuple(listed)
                # pi does not offer the tool then; a call that gets here anyway is refused.
                if "roost_spawn" not in parent_tools:
                    raise refuse("this session's agent definition does not allow roost_spawn")
        else:
            env = request_env(request)  # a foreground pi sends its own
            held = self.router.job_for_session(me.session)  # a job handed to this pi
            depth = held.links.depth if held else 0
        root = me.root_session or parent_session
        live = self.router.live_jobs()
        tree_key = root or self.identity(conn, me)
        counts = SpawnCounts(
            parent_depth=depth,
            live_children=sum(
                1
                for r in live
                if (parent_session and r.links.parent_session == parent_session)
                or (not parent_session and r.links.parent_peer == me.id)
            ),
            live_in_tree=sum(1 for r in live if (r.links.root_session or r.session) == root) if root else 0,
            live_spawned=sum(1 for r in live if r.links.spawned),
        )
        rate_ok = self.spawn_rate.allowed(tree_key, settings.agentSpawnsPerMinute)
        refusal = spawn_refusal(counts, settings, rate_ok)
        # Past the tree caps (not the depth nor the rate), a spawn may wait in the queue.
        caps = (
            bool(refusal)
            and rate_ok
            and depth + 1 <= settings.agentMaxDepth
            and (request.get("queue") is True or settings.agentSpawnQueue)
        )
        if refusal and not caps:
            raise refuse(refusal)
        if request.get("after") and request.get("withResults") is None:
            request = {**request, "withResults": True}  # a fan-in child reads their answers
        record = create_job(
            self.core,
            request,
            parent_tools=parent_tools,
            links=Links(
                parent_session=parent_session,
                parent_peer=me.id,
                root_session=root,
                depth=depth + 1,
                spawned=True,
            ),
            resolve_after=self._within_reach(me),
        )
        parent_job = self.core.jobs.get(me.id) if me.kind == PeerKind.JOB else None
        # A child waits in its parent's group, with its priority.
        self.core.queue.place(
            record,
            group_of(parent_job) if parent_job else None,
            priority_of(parent_job) if parent_job else 0,
            caps=caps,
        )
        budgets.apply_budget(self.core, record, request)  # within the tree's budget
        await worktree_jobs.prepare(self.core, record, request, spawned=True)
        self.spawn_rate.hit(tree_key, settings.agentSpawnsPerMinute)  # a refused request is no spawn
        try:
            launch(self.core, record, env=env, env_source="roost_spawn")
        except BaseException:
            await worktree_jobs.discard(record)
            raise
        result: dict[str, Any] = {"id": record.id, "name": record.name}
        if record.worktree:
            result["worktree"] = {"path": record.worktree["path"], "branch": record.worktree["branch"]}
        result["text"] = tooltext.spawn_text(
            record.id,
            record.name,
            record.worktree,
            self.core.queue.position(record),
            record.status if record.state == JobState.WAITING else None,
        )
        result["position"] = self.core.queue.position(record)
        return result

    def _within_reach(self, me: Peer) -> Callable[[str], JobRecord]:
        """How a spawn's `after` finds its jobs: as roost_send finds a peer (the caller's
        tree by name or id, another tree by exact id when external messages are on)."""

        def find(ref: str) -> JobRecord:
            if ref in (me.id, me.name):
                raise refuse(f"after: {ref} is you; wait on other jobs (your children)")
            try:
                peer, _ = resolve(
                    me, ref, self.router.all_peers(), self.core.settings().agentExternalMessages
                )
            except ResolveError as exc:
                raise refuse(f"after: {exc}") from None
            record = self.core.jobs.get(peer.id)
            if record is None:
                raise refuse(f"after: {ref} is a foreground pi, not a job")
            return record

        return find

    async def handback(self, conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
        assert conn.job_id is not None
        record = self.core.jobs[conn.job_id]
        state = str(request["state"])
        if state not in REPORT_STATES:
            raise RequestError(BAD_REQUEST, f"handback state must be one of {REPORT_STATES}")
        report_id = request.get("report")
        if report_id is not None and not (isinstance(report_id, str) and REPORT_ID.match(report_id)):
            raise RequestError(BAD_REQUEST, "report must be a short hex id")
        if not record.links.spawned:
            return {"routed": False}
        if report_id is not None and report_id == record.reports.last:
            return {"routed": True}  # sent again after roostd went away: it already went
        result = str(request.get("result") or "")[:RESULT_MAX]
        if record.worktree:  # its branch, commits, diffstat and uncommitted work
            # The router keeps a report within RESULT_MAX: the section is kept whole.
            result = await asyncio.to_thread(with_section, result, record.worktree, RESULT_MAX)
        report = {
            "result": result,
            "state": state,
            "question": request.get("question"),
            "error": request.get("error"),
            "structured": request.get("structured") is True,  # `result` is the checked JSON
            "at": time.time(),
            "id": report_id,
        }
        # Answered once it is in the parent's mailbox (or kept): the worker forgets it then.
        await self.router.hand_over(record, report)  # kept and routed again if that failed
        return {"routed": True}


def handlers(core: Core) -> dict[str, Handler]:
    ops = AgentOps(core)
    return {
        "peer_register": ops.peer_register,
        "peers": ops.peers,
        "send": ops.send,
        "message": ops.message,
        "spawn": ops.spawn,
        "handback": ops.handback,
    }
