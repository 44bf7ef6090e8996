"""The worker's note of the run in progress: `jobs/<id>/run.json`.

A restarted worker reads it to tell a run that a crash cut short (to be continued, as the
same run) from one that ended on purpose (stopped by the user, let go for `roost attach`).
The session file alone cannot: an aborted last answer looks the same either way.

Written when roost hands pi the item that starts a run (before pi sees it), and when the
run settles or is stopped. A settled run's report to the parent (`reports`: the `handback`
op's arguments, with its id) is written in the same write that says the run ended, and
crossed off once roostd has answered it: a worker killed in between sends it again when it
starts, under the same id (roostd hands each id over once). Written by replace, without
fsync: it must outlive the worker and pi (a SIGKILL keeps the page cache), as the session
file does; a power cut loses pi's own unsynced session writes too.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from roost.job.states import RunCause

log = logging.getLogger("roost.worker")


@dataclass
class RunNote:
    cause: str | None = None  # what started the run in progress; None when none is
    started: str | None = None  # when roost started it (ISO-8601 UTC)
    resumes: int = 0  # continuations of this run in a row after crashes
    stopped: bool = False  # stopped by the user: never continued by itself
    reports: list[dict[str, Any]] = field(default_factory=list)  # hand-backs roostd has not answered

    @property
    def in_progress(self) -> bool:
        return self.cause is not None and not self.stopped

    def run_cause(self) -> RunCause:
        try:
            return RunCause(self.cause)
        except ValueError:
            return RunCause.RESTORE


def read(path: Path) -> RunNote:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return RunNote(
            cause=data.get("cause") if isinstance(data.get("cause"), str) else None,
            started=data.get("started") if isinstance(data.get("started"), str) else None,
            resumes=int(data.get("resumes") or 0),
            stopped=bool(data.get("stopped")),
            reports=[r for r in data.get("reports") or [] if isinstance(r, dict)],
        )
    except (OSError, ValueError, TypeError, AttributeError):
        return RunNote()


def write(path: Path, note: RunNote) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(asdict(note)) + "\n")
    os.replace(tmp, path)


class Keeper:
    """One job's run note, as the worker last wrote it (`note`) and on disk (`save`)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.note = read(path)

    def save(self, note: RunNote) -> None:
        """Write `note`; the reports still pending stay unless `note` names its own."""
        if not note.reports:
            note = replace(note, reports=list(self.note.reports))
        self._write(note)

    def reported(self, report_id: str) -> None:
        """roostd answered the hand-back `report_id`: crossed off."""
        left = [r for r in self.note.reports if r.get("report") != report_id]
        if len(left) != len(self.note.reports):
            self._write(replace(self.note, reports=left))

    def _write(self, note: RunNote) -> None:
        self.note = note
        try:
            write(self.path, note)
        except OSError as exc:
            log.warning("could not write %s: %s", self.path, exc)
