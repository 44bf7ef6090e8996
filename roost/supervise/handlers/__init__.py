"""The handlers of roostd's socket ops, one module per area (jobs, agents, attach, worker,
events); `Daemon._build_handlers` collects them."""
