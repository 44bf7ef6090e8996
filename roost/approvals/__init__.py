"""Approvals: which of a job's tool calls run unasked, which wait for a person, which are
refused (docs/guides/approvals.md). `callrules` is the pure policy (no I/O): the job's mode,
its allow/ask/deny rules and what one call needs. roostd keeps the requests
(roost.supervise.approvalbook), the worker holds a call until it is answered
(roost.worker.gate), the extension only asks the worker (roost/extension/roost.ts)."""
