"""Session writer locks shared by roost (Python) and the roost pi extension (Node).

See `session_lock` and docs/locks.md.
"""

from roost.locks.session_lock import (
    LockError,
    LockHolder,
    SessionLock,
    SessionLocked,
    holder_is_alive,
    lock_path_for,
    normalise_session,
    process_start_time,
    read_holder,
)

__all__ = [
    "LockError",
    "LockHolder",
    "SessionLock",
    "SessionLocked",
    "holder_is_alive",
    "lock_path_for",
    "normalise_session",
    "process_start_time",
    "read_holder",
]
