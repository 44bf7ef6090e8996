"""Who else writes a job's session: the writer lock's holder, or a process the lock misses.

One rule for roostd (before it wakes a job for an item) and the worker (before it starts
pi): the session of job J is held when the writer lock names a live process that is not J's
own pi, or when roost.locks.writers finds another writer: a process that names the session on
its command line, or a pi outside roost that was running when the session was written
outside roost (a pi without roost's extension, typically started from pi's own resume
hint). J's own previous pi is not "someone else": its worker stops it.
"""

from __future__ import annotations

from dataclasses import dataclass

from roost.host import paths
from roost.locks.session_lock import SessionLock
from roost.locks.writers import find_writers


@dataclass(frozen=True)
class Held:
    """Another process writes the session."""

    pid: int
    what: str  # "pi, not under roost", "pi, roost peer ab12cd34", ...
    how: str  # why it counts (for the log)
    others: tuple[int, ...] = ()  # more pis that may be the writer (roost.locks.writers, part 2)

    def who(self) -> str:
        also = f" or by pid {', '.join(map(str, self.others))}" if self.others else ""
        return f"the session is held by pid {self.pid} ({self.what}){also}"

    def message(self, job_id: str) -> str:
        return f"{self.who()}: quit it or run roost attach {job_id}"


def other_writer(session: str, job_id: str) -> Held | None:
    """The first process other than the job's own pi that writes `session`, or None."""
    holder = SessionLock(session).holder()
    if holder is not None and holder.peer != job_id:
        peer = f"roost peer {holder.peer}" if holder.peer else "under roost"
        return Held(holder.pid, f"pi, {peer}", "it holds the writer lock")
    writers = [
        w
        for w in find_writers(session, str(paths.job_dir(job_id)))
        if w.job != job_id and (holder is None or w.pid != holder.pid)
    ]
    if not writers:
        return None
    first = writers[0]
    under = "not under roost" if first.job is None else f"roost job {first.job}"
    return Held(first.pid, f"{first.name}, {under}", first.how, tuple(w.pid for w in writers[1:]))


def own_pis(session: str, job_id: str) -> list[int]:
    """Pids of the job's own pis still on the session (a worker that died left them)."""
    pids = [w.pid for w in find_writers(session) if w.job == job_id]
    holder = SessionLock(session).holder()
    if holder is not None and holder.peer == job_id and holder.pid not in pids:
        pids.append(holder.pid)
    return pids
