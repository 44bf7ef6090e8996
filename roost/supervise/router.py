"""roostd's agent side: foreground peers, the peer list, message and report routing.

The session file is the routing key at delivery time. The sender is always the
authenticated connection (a worker bound by its token, a foreground peer bound by
`peer_register`), never an argument.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from roost import faults
from roost.agents.envelope import agent_frame
from roost.agents.peers import Peer, relation
from roost.job.record import JobRecord
from roost.job.states import ENDED_JOB_STATES, Attach, ItemKind, JobKind, JobState, Outcome, PeerKind
from roost.supervise import budget
from roost.supervise.jobstore import accept_item
from roost.tasks import Tasks
from roost.wire import protocol
from roost.wire.connection import Connection

if TYPE_CHECKING:
    from roost.supervise.base import JobTable

log = logging.getLogger(__name__)

REPORT_RETRY_SECONDS = 1.0
"""The first wait before a report whose routing failed is routed again (doubling each time)."""
REPORT_RETRY_MAX = 30.0
"""The longest wait between two attempts."""


@dataclass
class ForegroundPeer:
    id: str
    session: str | None
    name: str
    cwd: str
    pid: int
    conn: Connection


class AgentRouter:
    def __init__(self, daemon: JobTable) -> None:
        self.daemon = daemon
        self.foreground: dict[str, ForegroundPeer] = {}
        # Connections of foreground pis holding the session of an attached job: when one
        # closes (the person quit pi, or a hand-off finished) the job goes to the background.
        self.holders: dict[Connection, str] = {}
        # job id -> (pid, start time, ticks, boot id: procid.identity) of the `roost attach`
        # that asked for it: the pi that registers for the attached job's session must be
        # that process or its descendant.
        self.attach_callers: dict[str, tuple[int, float, int | None, str | None]] = {}
        self._tasks = Tasks(log)  # reports being routed (`report_for`)

    async def close(self) -> None:
        """roostd stops: a report waiting to be routed again stays the child's undelivered
        one (in its record), routed when its parent's session is held again."""
        await self._tasks.cancel_all()

    # -- peers ---------------------------------------------------------------------------
    def job_peer(self, record: JobRecord) -> Peer:
        proc = self.daemon.procs.get(record.id)
        return Peer(
            id=record.id,
            name=record.name,
            kind=PeerKind.JOB,
            session=record.session,
            state=record.state.value,
            cwd=record.cwd,
            live=proc is not None and proc.alive,
            status=record.status,
            summary=record.summary,
            question=record.question,
            parent_session=record.links.parent_session,
            parent_peer=record.links.parent_peer,
            root_session=record.links.root_session,
            extra={
                "shell": record.kind == JobKind.SHELL,
                "cost": (record.usage or {}).get("cost"),  # roost_agents shows it
            },
        )

    def foreground_peer(self, fg: ForegroundPeer) -> Peer:
        job = self.job_for_session(fg.session)
        links = job.links if job else None
        return Peer(
            id=fg.id,
            name=fg.name,
            kind=PeerKind.FOREGROUND,
            session=fg.session,
            state="connected",
            cwd=fg.cwd,
            live=True,
            parent_session=links.parent_session if links else None,
            parent_peer=links.parent_peer if links else None,
            root_session=links.root_session if links else None,
        )

    def all_peers(self) -> list[Peer]:
        peers = [self.job_peer(r) for r in self.daemon.jobs.values() if r.kind == JobKind.PI]
        peers += [self.foreground_peer(fg) for fg in self.foreground.values()]
        return peers

    def caller(self, conn: Connection) -> Peer:
        if conn.job_id is not None:
            return self.job_peer(self.daemon.jobs[conn.job_id])
        fg = self.foreground.get(conn.peer_id or "")
        if fg is None:
            raise protocol.RequestError(protocol.UNAUTHORIZED, "register first (peer_register)")
        return self.foreground_peer(fg)

    def job_for_session(self, session: str | None) -> JobRecord | None:
        """The job record of a session file, preferring a live one."""
        if not session:
            return None
        found = [r for r in self.daemon.jobs.values() if r.session == session]
        found.sort(key=lambda r: (not self._alive(r), r.created))
        return found[0] if found else None

    def _alive(self, record: JobRecord) -> bool:
        proc = self.daemon.procs.get(record.id)
        return proc is not None and proc.alive

    def live_peer_for_session(self, session: str | None) -> str | None:
        """The id of the live holder of `session` (JobRow.parent)."""
        if not session:
            return None
        for fg in self.foreground.values():
            if fg.session == session:
                return fg.id
        record = self.job_for_session(session)
        return record.id if record is not None and self._alive(record) else None

    def peer_disconnected(self, conn: Connection) -> None:
        fg = self.foreground.get(conn.peer_id or "")
        if fg is not None and fg.conn is conn:
            del self.foreground[fg.id]
            log.info("foreground peer %s disconnected", fg.id)
        job_id = self.holders.pop(conn, None)
        record = self.daemon.jobs.get(job_id or "")
        if record is not None and record.attached:
            self.detach(record, "its foreground pi quit")

    def detach(self, record: JobRecord, why: str) -> str:
        """Back to the background; a worker starts at once if anything is waiting."""
        daemon = self.daemon
        if not record.attached:  # already back (its pi's connection closed first)
            proc = daemon.procs.get(record.id)
            return "started" if proc is not None and proc.alive else "idle"
        record.set_attach(Attach.DETACHED, why)
        budget.recount(daemon, record)  # what the foreground pi spent counts too
        if record.state == JobState.STARTING or daemon.mailbox(record).pending():
            daemon.start_worker(record, why)
            daemon.job_changed(record)
            return "started"
        daemon.job_changed(record)
        self.retry_undelivered(record.session)
        return "idle"

    def register(self, fg: ForegroundPeer) -> None:
        old = self.foreground.get(fg.id)
        if old is not None and old.conn is not fg.conn:
            old.conn.peer_id = None
        self.foreground[fg.id] = fg
        fg.conn.peer_id = fg.id
        attached = self.job_for_session(fg.session)
        if attached is not None and attached.attached:
            self.holders[fg.conn] = attached.id
        self.retry_undelivered(fg.session)

    # -- delivery --------------------------------------------------------------------------
    async def deliver(
        self, target: Peer, kind: ItemKind, sender: Peer, rel: str, text: str, **extra: Any
    ) -> Outcome:
        """Hand one agent item to `target`; its outcome.

        `rel` is what the sender is to the receiver (the envelope's relation).
        """
        sender_info = {"id": sender.id, "name": sender.name, "relation": rel}
        if target.kind == PeerKind.FOREGROUND:
            fg = self.foreground.get(target.id)
            if fg is None:
                return Outcome.NOT_RUNNING
            item = {"kind": kind.value, "from": sender_info, "text": text, **extra}
            sent = await fg.conn.send(protocol.event("deliver", **agent_frame(item, None)))
            return Outcome.DELIVERED if sent else Outcome.NOT_RUNNING
        record = self.daemon.jobs.get(target.id)
        if record is None:
            return Outcome.NOT_RUNNING
        return accept_item(self.daemon, record, kind, text, sender=sender_info, **extra)

    async def send_message(self, target: Peer, sender: Peer, text: str) -> Outcome:
        """A `roost_send` message from `sender` to `target`: delivered and announced (the
        message.sent event carries no body)."""
        outcome = await self.deliver(target, ItemKind.MESSAGE, sender, relation(target, sender), text)
        self.daemon.events.emit(
            "message.sent",
            sender,
            **{"from": {"id": sender.id, "name": sender.name}},
            to={"id": target.id, "name": target.name},
            outcome=outcome.value,
        )
        return outcome

    # -- reports -----------------------------------------------------------------------------
    def report_for(self, child: JobRecord, report: dict[str, Any]) -> None:
        """Route a child's report (or synthetic `ended`) to its parent, or keep it."""
        self._tasks.spawn(self.hand_over(child, report), f"routing job {child.id}'s report")

    async def hand_over(self, child: JobRecord, report: dict[str, Any]) -> None:
        """`route_report`, never losing the report: one whose routing failed (a full disk,
        a mailbox that would not take it) is kept as the child's undelivered report and
        routed again later, until it is handed over (or kept for an absent parent)."""
        try:
            await self.route_report(child, report)
        except Exception as exc:
            self._keep_and_retry(child, report, exc, REPORT_RETRY_SECONDS)

    def _keep_and_retry(self, child: JobRecord, report: dict[str, Any], exc: Exception, delay: float) -> None:
        log.error(
            "job %s: its report could not be routed (%s: %s): routing it again in %gs",
            child.id,
            type(exc).__name__,
            exc,
            delay,
        )
        kept = {**report}  # this attempt's own: whoever takes it from the record has it
        child.reports.undelivered = kept
        if child.id in self.daemon.jobs:
            try:
                child.save()
            except OSError as error:
                log.warning("job %s: its kept report is not on disk yet: %s", child.id, error)
        self._tasks.spawn(self._route_again(child, kept, delay), f"routing job {child.id}'s report again")

    async def _route_again(self, child: JobRecord, kept: dict[str, Any], delay: float) -> None:
        await asyncio.sleep(delay)
        if child.reports.undelivered is not kept:
            return  # taken meanwhile (its parent's pi came back: retry_undelivered)
        child.reports.undelivered = None
        try:
            await self.route_report(child, kept)
        except Exception as exc:
            self._keep_and_retry(child, kept, exc, min(delay * 2, REPORT_RETRY_MAX))

    async def route_report(self, child: JobRecord, report: dict[str, Any]) -> None:
        """Hand a report to the parent's holder: a foreground pi, or its job's mailbox (a
        stopped parent's too, without waking it); kept in the child's record while nobody
        holds the parent's session. A report with an `id` (a worker's hand-back) is handed
        over at most once, even when roostd died half-way and the worker sent it again."""
        sender = self.job_peer(child)
        text = str(report.get("result") or report.get("text") or "")[: protocol.RESULT_MAX]
        fields: dict[str, Any] = {k: report.get(k) for k in ("state", "question", "error")}
        if report.get("ended"):
            fields["ended"] = True
        else:
            fields["result"] = text
            if report.get("structured"):
                fields["structured"] = True
        target: Peer | None = None
        for fg in self.foreground.values():
            if (child.links.parent_session and fg.session == child.links.parent_session) or (
                child.links.parent_peer and fg.id == child.links.parent_peer and fg.session is None
            ):
                target = self.foreground_peer(fg)
                break
        parent_job = self.job_for_session(child.links.parent_session) if target is None else None
        if target is None and parent_job is not None:
            target = self.job_peer(parent_job)
        if target is None:
            if child.links.parent_session:  # nobody holds the parent's session now: keep it
                child.reports.undelivered = {**report, "text": text}
                child.save()
                log.info("job %s: report kept until its parent's session is back", child.id)
            return
        rel = relation(target, sender)
        report_id = report.get("id")
        if report_id:
            fields["report"] = report_id
        try:  # a stopped parent keeps it without waking (states.item_outcome)
            if report_id and parent_job is not None and self._holds_report(parent_job, report_id):
                outcome = Outcome.QUEUED  # posted before roostd went away, not yet answered
            else:
                outcome = await self.deliver(target, ItemKind.REPORT, sender, rel, text, **fields)
                faults.hit(faults.REPORT_ROUTED, text, child.id)
        except protocol.RequestError as exc:
            log.warning("job %s: report not delivered (%s); kept", child.id, exc.message)
            outcome = Outcome.NOT_RUNNING
        if outcome == Outcome.NOT_RUNNING and child.links.parent_session:
            child.reports.undelivered = {**report, "text": text}
        else:
            child.reports.undelivered = None
            if report_id:
                child.reports.last = report_id
        if child.id in self.daemon.jobs:
            try:
                child.save()
            except OSError as exc:
                if child.reports.undelivered is not None:
                    raise  # kept, and not on disk: kept again, and routed again (hand_over)
                # Handed over: routing it again would hand it over twice.
                log.error(
                    "job %s: its report went to %s; its record is not saved: %s", child.id, target.id, exc
                )
        log.info("job %s: report to %s -> %s", child.id, target.id, outcome.value)
        if child.reports.undelivered is None:  # a kept report is announced once handed over
            self.daemon.events.emit(
                "job.report",
                child,
                to={"id": target.id, "name": target.name},
                kind="ended" if report.get("ended") else ItemKind.REPORT.value,
                firstLine=(text.strip().splitlines() or [""])[0][:200],
                outcome=outcome.value,
            )

    def _holds_report(self, parent: JobRecord, report_id: str) -> bool:
        box = self.daemon.mailbox(parent)
        return any(
            item.kind == ItemKind.REPORT and item.extra.get("report") == report_id
            for item in (*box.pending(), *box.acked())
        )

    def retry_undelivered(self, session: str | None) -> None:
        """A peer or job for `session` appeared: deliver the reports kept for it."""
        if not session:
            return
        for child in list(self.daemon.jobs.values()):
            if child.links.parent_session == session and child.reports.undelivered:
                report, child.reports.undelivered = child.reports.undelivered, None
                self.report_for(child, report)

    def job_ended(self, record: JobRecord, reason: str) -> None:
        """A spawned child stopped, removed or given up on: its parent gets `ended`."""
        if not record.links.spawned:
            return
        self.report_for(record, {"ended": True, "text": reason, "state": record.state.value})

    def live_jobs(self) -> list[JobRecord]:
        return [
            r for r in self.daemon.jobs.values() if r.kind == JobKind.PI and r.state not in ENDED_JOB_STATES
        ]
