"""A session file whose last line a killed pi left cut short.

pi appends each entry as one line. A pi SIGKILLed in the middle of that write (the OOM
killer, a kill of its process group) can leave the file ending in part of a line: the kernel
stops a write to a regular file between pages when a fatal signal is pending. pi 1.x ends
such a line itself when it loads the session; pi 0.73.1 does not, so the next pi's first
entry was glued to the fragment and both were one unreadable line to every reader, pi
included. Its entries' parent links then ran into that missing entry. The worker ends the
line before it starts pi on the session, as pi 1.x does.

Imported by roost.worker.launch on the way to pi: the standard library's `os` only.
"""

from __future__ import annotations

import os


def end_cut_line(session: str) -> bool:
    """Append a newline if the session file ends in part of a line; True if it did.

    Only for a session no one writes now (the worker checked): nothing else appends between
    the read and the write. An absent, empty or unreadable file is left as it is."""
    try:
        fd = os.open(session, os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:  # a new job's session (pi makes it), or not a file roost may touch
        return False
    try:
        size = os.fstat(fd).st_size
        if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
            return False
        os.write(fd, b"\n")
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
