"""Usage, cost and budgets (issue 12).

- `account`: a job's tokens and cost, summed from what pi records (`usage` on the session
  file's entries; `get_session_stats` on pi 1.x). A re-read replaces the sum, never adds to it.
- `budget`: the budget rules, pure functions (warn, stop, what a spawn may take).
- `log`: the durable usage log that keeps a removed job's figures (`roost usage`).
- `report`: `roost usage` grouped by job, tree, model or day.
- `ops`: roostd's handlers (`budget`, the worker's `usage_note`).

The worker imports `account` and `budget` only (never `roost.supervise`).
"""
