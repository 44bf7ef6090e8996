"""Usage, cost and budgets (README: Usage, cost and budgets).

- `account`: a job's tokens and cost, summed from what pi records (`usage` on the session
  file's entries; `get_session_stats` on pi 1.x). A re-read replaces the sum, never adds to it.
- `budget`: the budget rules, pure functions (warn, stop, what a spawn may take).
- `log`: the durable usage log that keeps a removed job's figures (`roost usage`).
- `meter`: the worker's running sum and limits for one job.
- `report`: `roost usage` grouped by job, tree, model or day (GROUPS).
- `show`: the cells and the usage block the CLI prints.

roostd's side is `roost.supervise.budget`, the worker's `roost.worker.budget`, the commands
`roost.cli.commands.usage`. Every `roost` process imports this package's `__init__` only (the CLI's
options), so it stays free of imports.
"""

GROUPS = ("job", "tree", "model", "day")
"""`roost usage --by`."""
