"""What a settled run's answer becomes: the job's checked result and its parent's report.

A job with an output schema (README: Structured results) has each answer checked when its
run settles (`Answers.check`, roost.job.results): the final text must be a JSON value valid
against the schema. A valid one goes to roostd (the `result` op: the record, `roost
result`, `job.result`) before the worker reports the run's end, so whoever sees the job
`done` finds its result. An invalid one gets roost's framed note with the errors, which
starts a new turn of the same run's cause, up to `resultRepairs` notes in a row; the next
invalid answer fails the job with the errors. A run that ends on a question, in a model
error or aborted is no answer and is not checked.

`Answers.hand_back` sends a spawned job's report (roost.agents.handback decides which runs
report): the checked result as JSON when there is one, else the final text. Nothing is lost
to a worker killed on the way (roost.worker.runnote): `note_settled` writes the report into
the run note in the write that ends the run, roostd's answer crosses it off, and a restarted
worker sends again what is left (`resend`, the same id: roostd hands each id over once).
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from roost import faults
from roost.agents.handback import should_report
from roost.config import load_settings
from roost.job import results
from roost.job.record import JobRecord
from roost.job.states import JobState
from roost.pi.transcript import content_text, interrupted, parse_millis
from roost.wire import protocol
from roost.wire.protocol import RESULT_MAX
from roost.worker.daemon_link import DaemonLink
from roost.worker.runnote import Keeper, RunNote
from roost.worker.runs import Run, RunTracker, first_line, question_in

log = logging.getLogger("roost.worker")


class Answers:
    def __init__(
        self,
        record: JobRecord,
        runs: RunTracker,
        link: DaemonLink,
        to_extension: Callable[[dict[str, Any]], bool],
        notes: Keeper,
    ) -> None:
        self.job_id = record.id
        self.notes = notes  # the run note: it keeps each report until roostd has it
        self.prepared: dict[str, Any] | None = None  # the settled run's report, noted, unsent
        self.schema = record.output_schema
        self.spawned = record.links.spawned
        self.runs = runs
        self.link = link
        self.to_extension = to_extension
        self.parent_chain = 0  # parent-message runs in a row (hand-back loop guard)
        self.notes_sent = 0  # repair notes in a row for the answer being repaired
        self.repairing = False  # the last settled answer was invalid and got a note
        self.value: Any = None  # the last settled run's valid result
        self.valid = False
        self.failure: str | None = None  # why the last settled run's answer failed the job

    def check(self, run: Run) -> str | None:
        """Check a settled run's answer against the job's schema (none: nothing to do).
        Returns the job's error when the answer is invalid for the last time."""
        self.valid, self.value, self.failure = False, None, None
        repairing, self.repairing = self.repairing, False
        if self.schema is None or run.stop_reason in ("error", "aborted") or self.runs.state != JobState.DONE:
            return None
        value, errors = results.check(self.schema, run.final_text)
        if not errors:
            self.valid, self.value, self.notes_sent = True, value, 0
            self.link.send_reliably("result", value=value)
            return None
        sent = self.notes_sent if repairing else 0
        allowed = load_settings().resultRepairs
        if sent < allowed and self.to_extension(
            protocol.event("note", content=results.repair_note(errors, allowed - sent - 1))
        ):
            log.info("the answer is not valid against the output schema: a note asks again")
            self.notes_sent, self.repairing = sent + 1, True
            self.runs.next_cause = run.cause  # the repair is a turn of the same run's cause
            self.runs.enter(JobState.RUNNING)
            self.runs.status = "repairing its answer"
            return None
        log.info("the answer is not valid against the output schema: the job fails")
        self.notes_sent = 0
        self.runs.enter(JobState.FAILED)
        self.runs.status = "invalid answer"
        self.runs.summary = first_line("error: the answer is not valid against the output schema")
        self.failure = results.failure(errors)
        return self.failure

    def note_settled(self, run: Run | None) -> None:
        """The run settled: one write of the run note says no run is in progress and keeps
        the run's report (when it is report-worthy) until roostd has it."""
        if run is not None:
            faults.hit("run_ended", run.final_text)
        note, self.prepared = self.notes.note, self.report_of(run) if run is not None else None
        if self.prepared is None and (note.cause is None or note.stopped):
            return
        # (a run the user stopped keeps its note: started again, it shows it was cut short)
        kept = note if note.stopped else RunNote()
        self.notes.save(replace(kept, reports=[*note.reports, *filter(None, [self.prepared])]))

    def hand_back(self, run: Run) -> None:
        """Send the report `note_settled` noted for the run (a report-worthy run's)."""
        report, self.prepared = self.prepared, None
        if report is not None:
            self.send(report)

    def recover(self, entries: list[dict[str, Any]]) -> None:
        """A restarted worker, before its restore ends the run note: a run the note says is
        in progress that ended in the session (pi answered; the worker was killed before
        it settled the run) reports now, as its settle would have. Its id comes from the
        note, so a second crash before the note is ended cannot report it twice."""
        note = self.notes.note
        answer = (
            final_answer(entries, since=parse_millis(note.started))
            if note.in_progress and not interrupted(entries)
            else None
        )
        if answer is None:
            return
        stop, error = answer.get("stopReason"), answer.get("errorMessage")
        run = Run(
            note.run_cause(),
            final_text=content_text(answer.get("content")),
            stop_reason=str(stop) if stop else None,
            error=str(error) if error else None,
        )
        report = self.report_of(run)
        if report is None:
            return
        question = question_in(run.final_text) if stop == "stop" else None
        report.update(
            report=hashlib.sha256(f"{self.job_id} {note.cause} {note.started}".encode()).hexdigest()[:16],
            state=(
                JobState.FAILED if stop == "error" else JobState.NEEDS_INPUT if question else JobState.DONE
            ).value,
            question=question,
        )
        if all(r.get("report") != report["report"] for r in note.reports):
            log.info("reporting the run that ended while no worker saw it (%s)", note.cause)
            self.notes.save(replace(note, reports=[*note.reports, report]))

    def resend(self) -> None:
        """A restarted worker: send again the reports roostd has not answered."""
        for report in self.notes.note.reports:
            log.info("sending again a report roostd had not answered (%s)", report.get("report"))
            self.send(report)

    def send(self, report: dict[str, Any]) -> None:
        text, report_id = str(report.get("result") or ""), str(report.get("report"))

        def answered() -> None:
            faults.hit("report_answered", text)
            self.notes.reported(report_id)

        faults.hit("report_pending", text)
        self.link.send_reliably("handback", answered, **report)  # answered: crossed off

    def report_of(self, run: Run) -> dict[str, Any] | None:
        """The `handback` op's arguments for a settled run, when it is report-worthy (an
        answer being repaired is not: its repair reports)."""
        if not self.spawned or self.repairing:
            return None
        report, self.parent_chain = should_report(run.cause, run.sources, run.stop_reason, self.parent_chain)
        if not report:
            return None
        text, structured = run.final_text[:RESULT_MAX], False
        if self.valid:
            text, structured = structured_text(self.value, self.job_id), True
        return {
            "report": secrets.token_hex(8),  # roostd hands each id over once
            "result": text,
            "state": self.runs.state.value,
            "question": self.runs.question,
            "error": self.failure or run.error,
            "structured": structured,
        }


def final_answer(entries: list[dict[str, Any]], since: float | None) -> dict[str, Any] | None:
    """The session's last message when it is the model's answer written after `since`
    (epoch ms: the run note's start; an answer from before is the last run's)."""
    for entry in reversed(entries):
        if entry.get("type") in ("message", "custom_message"):
            message = entry.get("message") or {}
            at = parse_millis(entry.get("timestamp")) or parse_millis(message.get("timestamp"))
            if message.get("role") != "assistant" or since is None or at is None or at < since:
                return None
            return message
    return None


def structured_text(value: Any, job_id: str) -> str:
    """A checked result as its report carries it: indented JSON, or when that is over
    RESULT_MAX, compact JSON, or past that only its size (`roost result` has it whole)."""
    for indent in (2, None):
        text = json.dumps(value, ensure_ascii=False, indent=indent, separators=None if indent else (",", ":"))
        if len(text) <= RESULT_MAX:
            return text
    return (
        f"(a JSON result of {len(results.compact(value).encode('utf-8'))} bytes, too large "
        f"for a report: `roost result {job_id} --json` prints it)"
    )
