"""What a settled run's answer becomes: the job's checked result and its parent's report.

A job with an output schema (README: Structured results) has each answer checked when its
run settles (`Answers.check`, roost.results): the final text must be a JSON value valid
against the schema. A valid one goes to roostd (the `result` op: the record, `roost
result`, `job.result`) before the worker reports the run's end, so whoever sees the job
`done` finds its result. An invalid one gets roost's framed note with the errors, which
starts a new turn of the same run's cause, up to `resultRepairs` notes in a row; the next
invalid answer fails the job with the errors. A run that ends on a question, in a model
error or aborted is no answer and is not checked.

`Answers.hand_back` sends a spawned job's report (roost.agents.handback decides which runs
report): the checked result as JSON when there is one, else the final text.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Callable
from typing import Any

from roost import protocol, results
from roost.agents.handback import should_report
from roost.config import load_settings
from roost.jobs import JobRecord
from roost.protocol import RESULT_MAX
from roost.states import JobState
from roost.worker.daemon_link import DaemonLink
from roost.worker.runs import Run, RunTracker, first_line

log = logging.getLogger("roost.worker")


class Answers:
    def __init__(self, record: JobRecord, runs: RunTracker, link: DaemonLink,
                 to_extension: Callable[[dict[str, Any]], bool]) -> None:
        self.job_id = record.id
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
        if (self.schema is None or run.stop_reason in ("error", "aborted")
                or self.runs.state != JobState.DONE):
            return None
        value, errors = results.check(self.schema, run.final_text)
        if not errors:
            self.valid, self.value, self.notes_sent = True, value, 0
            self.link.send_reliably("result", value=value)
            return None
        sent = self.notes_sent if repairing else 0
        allowed = load_settings().resultRepairs
        if sent < allowed and self.to_extension(protocol.event(
                "note", content=results.repair_note(errors, allowed - sent - 1))):
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

    def hand_back(self, run: Run) -> None:
        """Hand the run's result back to the parent when the run is report-worthy (an
        answer being repaired is not: its repair reports)."""
        if not self.spawned or self.repairing:
            return
        report, self.parent_chain = should_report(
            run.cause, run.sources, run.stop_reason, self.parent_chain
        )
        if not report:
            return
        text, structured = run.final_text[:RESULT_MAX], False
        if self.valid:
            text, structured = structured_text(self.value, self.job_id), True
        self.link.send_reliably(
            "handback",
            report=secrets.token_hex(8),  # roostd hands each id over once
            result=text,
            state=self.runs.state.value,
            question=self.runs.question,
            error=self.failure or run.error,
            structured=structured,
        )


def structured_text(value: Any, job_id: str) -> str:
    """A checked result as its report carries it: indented JSON, or when that is over
    RESULT_MAX, compact JSON, or past that only its size (`roost result` has it whole)."""
    for indent in (2, None):
        text = json.dumps(value, ensure_ascii=False, indent=indent,
                          separators=None if indent else (",", ":"))
        if len(text) <= RESULT_MAX:
            return text
    return (f"(a JSON result of {len(results.compact(value).encode('utf-8'))} bytes, too large "
            f"for a report: `roost result {job_id} --json` prints it)")
