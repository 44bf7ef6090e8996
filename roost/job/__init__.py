"""The job record: `job.json` (`record`), the state machines (`states`), the environment
(`env`), structured results, the tree of rows."""
