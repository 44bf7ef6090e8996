"""Crash points on the delivery path, for the tests that prove nothing is lost or doubled.

Off unless the environment of the worker (or roostd) has `ROOST_FAULTS=<file>`. The file holds one fault,
`{"point": POINT, "target": "worker"|"pi", "text": TAG, "job": ID}`: the first time an item
whose text contains TAG passes POINT in job ID's worker, the worker SIGKILLs itself or its
pi, and renames the file to `<file>.fired` (so a restarted worker does not fire it again).
The test writes the next fault when it wants one. Points, in the order an item passes them:

- `posted`: the item is in the mailbox and the worker is about to hand it to pi;
- `sent`: handed to pi (RPC prompt written, or the extension told to inject it);
- `taken`: pi printed its `message_end` (pi writes the entry to the session file around then);
- `before_ack` / `after_ack`: around the mailbox ack that moves it to `cur/`;
- `report_routed` (target `roostd`, TAG in the report's result): roostd has put job ID's
  hand-back into its parent's mailbox, and neither noted that in the child's record nor
  answered the worker, which will send it again.
- `run_ended` (target `worker`, TAG in the run's final answer): pi ended the run (the session
  holds the answer), and the worker's run note still says it is in progress;
- `report_pending` (target `worker`, TAG in the report's result): a settled run's report is
  in the run note (`run.json`), not yet sent to roostd;
- `report_answered` (target `worker`, TAG in the report's result): roostd has answered the
  hand-back, and the worker has not yet crossed it off its run note.

With the variable unset, `hit` costs one comparison.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable

POINTS = ("posted", "sent", "taken", "before_ack", "after_ack")
TARGETS = ("worker", "pi")
REPORT_ROUTED = "report_routed"  # roostd's own point (target "roostd")
REPORT_POINTS = ("run_ended", "report_pending", "report_answered")  # a hand-back's, in the worker

_FILE = os.environ.get("ROOST_FAULTS")
pi_pid: Callable[[], int | None] = lambda: None  # noqa: E731 - set by the worker
job_id: str | None = None  # set by the worker


def enabled() -> bool:
    return _FILE is not None


def hit(point: str, text: str, job: str | None = None) -> None:
    """Fire the armed fault if it is for `point` and an item with `text` (of `job`, by
    default this worker's)."""
    if _FILE is None:
        return
    try:
        with open(_FILE, encoding="utf-8") as handle:
            fault = json.load(handle)
    except (OSError, ValueError):
        return
    if (
        fault.get("point") != point
        or fault.get("job") != (job or job_id)
        or str(fault.get("text")) not in text
    ):
        return
    try:
        os.rename(_FILE, _FILE + ".fired")  # exactly once, across worker restarts
    except OSError:
        return
    if fault.get("target") == "pi":
        pid = pi_pid()
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
        return
    os.kill(os.getpid(), signal.SIGKILL)  # the worker, or roostd
