"""Who else writes a job's session: the writer lock's holder, or a process the lock misses.

One rule for roostd (before it wakes a job for an item) and the worker (before it starts
pi): the session of job J is held when the writer lock names a live process that is not J's
own pi, or when a process of this user names the session on its command line
(roost.writers: a pi without roost's extension, typically started from pi's own resume
hint). J's own previous pi is not "someone else": its worker stops it.
"""

from __future__ import annotations

from dataclasses import dataclass

from roost.locks.session_lock import SessionLock
from roost.writers import find_writers


@dataclass(frozen=True)
class Held:
    """Another process writes the session."""

    pid: int
    what: str  # "pi, not under roost", "pi, roost peer ab12cd34", ...
    how: str  # why it counts (for the log)

    def message(self, job_id: str) -> str:
        return (f"the session is held by pid {self.pid} ({self.what}): "
                f"quit it or run roost attach {job_id}")


def other_writer(session: str, job_id: str) -> Held | None:
    """The first process other than the job's own pi that writes `session`, or None."""
    holder = SessionLock(session).holder()
    if holder is not None and holder.peer != job_id:
        peer = f"roost peer {holder.peer}" if holder.peer else "under roost"
        return Held(holder.pid, f"pi, {peer}", "it holds the writer lock")
    for writer in find_writers(session):
        if writer.job == job_id or (holder is not None and writer.pid == holder.pid):
            continue
        under = "not under roost" if writer.job is None else f"roost job {writer.job}"
        return Held(writer.pid, f"{writer.name}, {under}", writer.how)
    return None


def own_pis(session: str, job_id: str) -> list[int]:
    """Pids of the job's own pis still on the session (a worker that died left them)."""
    pids = [w.pid for w in find_writers(session) if w.job == job_id]
    holder = SessionLock(session).holder()
    if holder is not None and holder.peer == job_id and holder.pid not in pids:
        pids.append(holder.pid)
    return pids
