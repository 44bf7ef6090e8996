"""`roost acp`: roost as an ACP agent (the Agent Client Protocol, over stdio) for editors
such as Zed, on the `agent-client-protocol` package, imported only when the command runs.
A session is a roost job: `session` (the turns, the live text from roostd's partials and
the session file, dialogs as permission requests), `updates` (session file entries and
partials as ACP updates: pure), `links` (roostd's requests in worker threads and its pushed
rows and partials handed to the loop). docs/guides/editors.md."""
