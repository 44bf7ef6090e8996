"""When a child's settled run reports to its parent (the hand-back). Pure logic.

Report-worthy: runs started by the spawn task, a user reply or CLI input, and any run a
user reply joined. A run started by the parent's own message reports too (so a parent's
answer gets the next report), at most MAX_PARENT_CHAIN such runs in a row. Runs started by
other agents' messages never report, so sessions cannot wake each other forever. Aborted
runs and restores (no run) never report.
"""

from __future__ import annotations

from roost.job.states import RunCause

MAX_PARENT_CHAIN = 3
USER_CAUSES = frozenset({RunCause.TASK.value, RunCause.REPLY.value, RunCause.CLI.value})


def should_report(
    cause: RunCause, joined: set[str], stop_reason: str | None, parent_chain: int
) -> tuple[bool, int]:
    """(report?, the new count of parent-message runs in a row)."""
    if stop_reason == "aborted" or cause == RunCause.RESTORE and not (joined & USER_CAUSES):
        return False, parent_chain
    if cause.value in USER_CAUSES or joined & USER_CAUSES:
        return True, 0
    if cause == RunCause.PARENT_MESSAGE:
        chain = parent_chain + 1
        return chain <= MAX_PARENT_CHAIN, chain
    return False, parent_chain
