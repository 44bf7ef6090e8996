"""The handlers of roostd's socket ops, one module per area (jobs, agents, attach, worker,
events, usage, worktrees), one function per op, each typed against `core.Core`;
`Daemon._build_handlers` collects them and checks them against `ops.DAEMON_OPS`."""
