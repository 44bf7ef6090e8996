"""Other writers of a session file: processes the writer lock does not know about.

The writer lock (roost.locks, docs/locks.md) keeps roost's own pis apart, but a pi without
roost's extension (after `roost install --uninstall`, or with another agent dir) takes no
lock. pi keeps no file open either: it appends each entry with one synchronous
open-write-close (`appendFileSync`), so an open file descriptor shows a writer only for
microseconds. What does show, for the whole life of such a pi, is its command line: pi's own
resume hint is `pi [--session-dir DIR] --session ID`, and roost names its sessions by path.

A process is a writer of session file S when its arguments name S (`find_writers`):
- `--session X` (or `--session=X`) where X is a path (it has a `/` or ends in `.jsonl`, as
  pi decides) that is S, resolved against the process's working directory; or X is an id
  (full or a prefix, as pi accepts) that S's header id starts with;
- `--session-id ID` with ID equal to S's id;
- `-c`/`--continue` or `-r`/`--resume` with `--session-dir DIR` (or the process's
  `PI_CODING_AGENT_SESSION_DIR`) naming S's directory: pi may pick S there.

Open file descriptors are not looked at: pi's are open for microseconds, a reader such as
`tail -f` holds one for ever without writing, and reading every process's fd table cost
about 4 ms per 90 processes here (the command lines: about 1 ms).

Linux /proc and the standard library only: the worker runs this before it starts pi
(roost.worker.launch), where every millisecond is on the way to the first model request.
Processes of other users are skipped: they cannot write a file of ours that is not
writable by them, and their details are hidden from us anyway.
"""

from __future__ import annotations

import os

PROC = "/proc"
ID_OPTIONS = ("--session", "--session-id")
PICKS = ("-c", "--continue", "-r", "--resume")
NEEDLES = tuple(b"\0" + p.encode() + b"\0" for p in PICKS)


class Writer:
    """One process found writing (or able to write) a session file."""

    __slots__ = ("how", "job", "name", "pid")

    def __init__(self, pid: int, name: str, how: str, job: str | None = None) -> None:
        self.pid = pid
        self.name = name  # "pi", or the program's name
        self.how = how  # why it counts: "its --session names it", ...
        self.job = job  # the roost job whose worker started it (its own pi), else None

    def __repr__(self) -> str:
        return f"Writer(pid={self.pid}, name={self.name!r}, how={self.how!r}, job={self.job!r})"


def session_id(session: str) -> str | None:
    """The `id` of a session file's header line (None: no file yet, or no header)."""
    try:
        with open(session, "rb") as handle:
            first = handle.readline(4096)
    except OSError:
        return None
    import json  # only when a candidate needs it: the worker's launcher is lean

    try:
        header = json.loads(first)
    except ValueError:
        return None
    value = header.get("id") if isinstance(header, dict) else None
    return value if isinstance(value, str) and value else None


def _options(argv: list[str]) -> dict[str, str]:
    """The options this module reads, in either `--opt value` or `--opt=value` form."""
    found: dict[str, str] = {}
    wanted = (*ID_OPTIONS, "--session-dir")
    for i, arg in enumerate(argv):
        name, eq, value = arg.partition("=")
        if name in wanted:
            if eq:
                found[name] = value
            elif i + 1 < len(argv):
                found[name] = argv[i + 1]
        elif arg in PICKS:
            found["pick"] = arg
    return found


def _resolve(path: str, pid: str) -> str | None:
    if os.path.isabs(path):
        return os.path.normpath(path)
    try:
        return os.path.normpath(os.path.join(os.readlink(f"{PROC}/{pid}/cwd"), path))
    except OSError:
        return None


def _environ(pid: str, *names: str) -> dict[str, str]:
    """Some variables of a process's environment (as it started: what pi was given)."""
    try:
        with open(f"{PROC}/{pid}/environ", "rb") as handle:
            env = handle.read()
    except OSError:
        return {}
    wanted = tuple(n.encode() + b"=" for n in names)
    return {
        os.fsdecode(key): os.fsdecode(value)
        for key, _, value in (e.partition(b"=") for e in env.split(b"\0") if e.startswith(wanted))
    }


def _job_of(pid: str) -> str | None:
    """The job whose worker started this pi: its worker gave it ROOST_EXT_SOCK (a pi that a
    tool of a job's pi starts has ROOST_JOB_ID but not that)."""
    env = _environ(pid, "ROOST_JOB_ID", "ROOST_EXT_SOCK")
    return env.get("ROOST_JOB_ID") if env.get("ROOST_EXT_SOCK") else None


class _Target:
    """The session file, in the forms a command line can name it."""

    def __init__(self, session: str) -> None:
        self.path = os.path.abspath(session)
        self.real = os.path.realpath(session)
        self.dirs = {os.path.dirname(self.path), os.path.dirname(self.real)}
        self._id: str | None | bool = False  # False: not read yet

    @property
    def id(self) -> str | None:
        if self._id is False:
            self._id = session_id(self.path)
        return self._id if isinstance(self._id, str) else None

    def is_path(self, path: str | None) -> bool:
        return path is not None and (path == self.path or os.path.realpath(path) == self.real)

    def is_dir(self, path: str | None) -> bool:
        return path is not None and (path in self.dirs or os.path.realpath(path) in self.dirs)


def names_session(argv: list[str], pid: str, target: _Target) -> str | None:
    """Why this command line writes the session (see the module's rule), or None."""
    opts = _options(argv)
    value = opts.get("--session")
    if value:
        if "/" in value or "\\" in value or value.endswith(".jsonl"):
            if target.is_path(_resolve(value, pid)):
                return "its --session names it"
        elif target.id is not None and target.id.startswith(value):
            return "its --session names its id"
        return None  # an explicit --session names another session
    if opts.get("--session-id") and opts["--session-id"] == target.id:
        return "its --session-id names it"
    if "pick" in opts:
        folder = opts.get("--session-dir")
        folder = (_resolve(folder, pid) if folder
                  else _environ(pid, "PI_CODING_AGENT_SESSION_DIR").get("PI_CODING_AGENT_SESSION_DIR"))
        if target.is_dir(folder):
            return f"it runs {opts['pick']} in the session's directory"
    return None


def program_name(argv: list[str], pid: str) -> str:
    """"pi" for a pi (its node process too), else the program's short name."""
    for arg in argv[:2]:
        base = os.path.basename(arg)
        if base == "pi" or "pi-coding-agent" in arg:
            return "pi"
    try:
        with open(f"{PROC}/{pid}/comm", encoding="utf-8", errors="replace") as handle:
            return handle.read().strip() or "?"
    except OSError:
        return os.path.basename(argv[0]) if argv else "?"


def find_writers(session: str, exclude: tuple[int, ...] = ()) -> list[Writer]:
    """Processes of this user, other than `exclude` and this one, that write `session`."""
    target = _Target(session)
    me, uid = os.getpid(), os.getuid()
    found: list[Writer] = []
    try:
        pids = [p for p in os.listdir(PROC) if p.isdigit()]
    except OSError:
        return found  # no /proc (not Linux): nothing can be said
    for pid in pids:
        number = int(pid)
        if number == me or number in exclude:
            continue
        try:
            with open(f"{PROC}/{pid}/cmdline", "rb") as handle:
                raw = handle.read()
        except OSError:
            continue  # gone meanwhile, or hidden
        if b"--session" not in raw and not any(p in raw for p in NEEDLES):
            continue  # the common case: one read per process, nothing parsed
        argv = [os.fsdecode(a) for a in raw.split(b"\0")[:-1]]
        try:
            if os.stat(f"{PROC}/{pid}").st_uid != uid:
                continue
        except OSError:
            continue
        how = names_session(argv, pid, target)
        if how is not None:
            found.append(Writer(number, program_name(argv, pid), how, _job_of(pid)))
    return found
