"""The event log: its file format and reading it (`log`), roostd's writer (`writer`)."""
