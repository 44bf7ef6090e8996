"""Other writers of a session file: processes the writer lock does not know about.

The writer lock (roost.locks, docs/locks.md) keeps roost's own pis apart, but a pi without
roost's extension (after `roost install --uninstall`, or with another agent dir) takes no
lock, and it leaves no trace of its session outside its memory: pi keeps no descriptor of
the file open (it appends each entry with one open-write-close, `appendFileSync`), and it
sets its process title, which overwrites its command line (/proc/PID/cmdline reads `pi`).
So the rule (`find_writers`) has two parts:

1. A process whose arguments name S, for programs that keep their command line (scripts,
   tools, a pi run by a wrapper that does not retitle):
   - `--session X` (or `--session=X`) where X is a path (it has a `/` or ends in `.jsonl`,
     as pi decides) that is S, resolved against the process's working directory; or X is
     an id (full or a prefix, as pi accepts) that S's header id starts with;
   - `--session-id ID` with ID equal to S's id;
   - `-c`/`--continue` or `-r`/`--resume` with `--session-dir DIR` (or the process's
     `PI_CODING_AGENT_SESSION_DIR`) naming S's directory: pi may pick S there.
2. A pi outside roost, when S changed behind roost's back: roost notes the file's size and
   mtime (`remember`: the worker before its pi starts and after it exited, `roost attach`
   when its pi quits). If S differs from that note, something else wrote it (or a worker
   died before it could note its pi's last writes); then a live pi of this user that runs
   outside roost (no roost job or attach in its environment, holding no roost writer lock,
   with roost's HOME) and started after the note is taken for a writer: typically a pi started from pi's own
   resume hint. A pi that was already running before is a session the person was using
   elsewhere. This is a heuristic: an unrelated pi without roost's extension started in
   that time is named too (every candidate is named, the earliest first).

Open file descriptors are not looked at: pi's are open for microseconds, a reader such as
`tail -f` holds one for ever without writing, and reading every process's fd table cost
about 4 ms per 90 processes here (the command lines: about 1 ms).

Linux /proc and the standard library only: the worker runs this before it starts pi
(roost.worker.launch), where every millisecond is on the way to the first model request;
part 2 reads more (each process's name) only when S changed outside roost.
Processes of other users are skipped: they cannot write a file of ours that is not
writable by them, and their details are hidden from us anyway.
"""

from __future__ import annotations

import os
import time

PROC = "/proc"
SEEN = "session.seen"
"""In a job's directory: roost's note of its session (`remember`)."""
PI_TITLES = ("pi", "pi-rpc")  # pi's process title (1.x in RPC mode: pi-rpc)
CLK_TCK = 100  # USER_HZ (see roost.host.procid)
SLACK = 0.011  # seconds: a start time is counted in whole ticks of 10 ms (rounded down)
ID_OPTIONS = ("--session", "--session-id")
PICKS = ("-c", "--continue", "-r", "--resume")
NEEDLES = tuple(b"\0" + p.encode() + b"\0" for p in PICKS)


class Writer:
    """One process found writing (or able to write) a session file."""

    __slots__ = ("how", "job", "name", "pid", "started")

    def __init__(
        self, pid: int, name: str, how: str, job: str | None = None, started: float | None = None
    ) -> None:
        self.pid = pid
        self.name = name  # "pi", or the program's name
        self.how = how  # why it counts: "its --session names it", ...
        self.job = job  # the roost job whose worker started it (its own pi), else None
        self.started = started  # seconds since boot, when known

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


def _environ(pid: str, *names: str) -> dict[str, str] | None:
    """Some variables of a process's environment (as it started: what pi was given); None
    when it cannot be read, or reads empty, as a process's does once it is exiting."""
    try:
        with open(f"{PROC}/{pid}/environ", "rb") as handle:
            env = handle.read()
    except OSError:
        return None
    if not env:
        return None
    wanted = tuple(n.encode() + b"=" for n in names)
    return {
        os.fsdecode(key): os.fsdecode(value)
        for key, _, value in (e.partition(b"=") for e in env.split(b"\0") if e.startswith(wanted))
    }


def _job_of(pid: str) -> str | None:
    """The job whose worker started this pi: its worker gave it ROOST_EXT_SOCK (a pi that a
    tool of a job's pi starts has ROOST_JOB_ID but not that)."""
    env = _environ(pid, "ROOST_JOB_ID", "ROOST_EXT_SOCK") or {}
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
        folder = (
            _resolve(folder, pid)
            if folder
            else (_environ(pid, "PI_CODING_AGENT_SESSION_DIR") or {}).get("PI_CODING_AGENT_SESSION_DIR")
        )
        if target.is_dir(folder):
            return f"it runs {opts['pick']} in the session's directory"
    return None


def program_name(argv: list[str], pid: str) -> str:
    """ "pi" for a pi (its node process too), else the program's short name."""
    for arg in argv[:2]:
        base = os.path.basename(arg)
        if base == "pi" or "pi-coding-agent" in arg:
            return "pi"
    try:
        with open(f"{PROC}/{pid}/comm", encoding="utf-8", errors="replace") as handle:
            return handle.read().strip() or "?"
    except OSError:
        return os.path.basename(argv[0]) if argv else "?"


def find_writers(session: str, job_dir: str | None = None, exclude: tuple[int, ...] = ()) -> list[Writer]:
    """Processes of this user, other than `exclude` and this one, that write `session`
    (`job_dir`: the job's directory, where roost's note of the session is kept)."""
    target = _Target(session)
    me, uid = os.getpid(), os.getuid()
    found: list[Writer] = []
    try:
        pids = [p for p in os.listdir(PROC) if p.isdigit()]
    except OSError:
        return found  # no /proc (not Linux): nothing can be said
    pids = [p for p in pids if int(p) != me and int(p) not in exclude]
    for pid in pids:
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
            found.append(Writer(int(pid), program_name(argv, pid), how, _job_of(pid)))
    changed = None if job_dir is None else changed_outside(session, job_dir)
    if changed is not None:
        named = {w.pid for w in found}
        found += [w for w in pis_outside_roost(pids, uid, changed) if w.pid not in named]
    return found


# -- part 2: a pi outside roost, when the session changed outside roost -----------------------
def remember(session: str, job_dir: str) -> None:
    """Note the session file as roost leaves it: before its pi starts (the check passed)
    and after that pi has exited. `<size> <mtime_ns> <noted> <boot id>`; size and mtime -1
    when absent; noted: seconds since boot (CLOCK_BOOTTIME), the clock of process start
    times (the wall clock's boot time in /proc/stat is whole seconds: off by up to 1 s)."""
    try:
        st = os.stat(session)
        size, mtime_ns = st.st_size, st.st_mtime_ns
    except OSError:
        size = mtime_ns = -1
    tmp = os.path.join(job_dir, SEEN + ".tmp")
    try:
        with open(tmp, "w", encoding="ascii") as handle:
            handle.write(f"{size} {mtime_ns} {time.clock_gettime(time.CLOCK_BOOTTIME)!r} {_boot_id()}\n")
        os.replace(tmp, os.path.join(job_dir, SEEN))
    except OSError:
        pass  # the job was removed: nothing to note


def changed_outside(session: str, job_dir: str) -> float | None:
    """When roost last noted the session (seconds since boot; 0 if before this boot), if
    it has changed since (written by something else, or by a pi of roost whose worker died
    before noting it); None when it did not change, or roost never noted it (a new job)."""
    try:
        with open(os.path.join(job_dir, SEEN), encoding="ascii") as handle:
            size_, mtime_, noted_, boot = handle.read().split()
        size, mtime_ns, noted = int(size_), int(mtime_), float(noted_)
    except (OSError, ValueError):
        return None
    try:
        st = os.stat(session)
        now = (st.st_size, st.st_mtime_ns)
    except OSError:
        now = (-1, -1)
    if now == (size, mtime_ns):
        return None
    return noted if boot == _boot_id() else 0.0


def _boot_id() -> str:
    try:
        with open(f"{PROC}/sys/kernel/random/boot_id", encoding="ascii") as handle:
            return handle.read().strip() or "-"
    except OSError:
        return "-"


def _started(pid: str) -> float | None:
    """When the process started, in seconds since boot."""
    try:
        with open(f"{PROC}/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        return int(fields[19]) / CLK_TCK  # field 22: start ticks since boot
    except (OSError, IndexError, ValueError):
        return None


def _lock_holders() -> set[int]:
    """Pids named by roost's writer locks (pis with roost's extension hold one)."""
    import json

    from roost.host import paths

    pids: set[int] = set()
    try:
        names = os.listdir(paths.locks_dir())
    except OSError:
        return pids
    for name in names:
        if name.endswith(".json"):
            try:
                with open(paths.locks_dir() / name, "rb") as handle:
                    pids.add(int(json.load(handle)["pid"]))
            except (OSError, ValueError, KeyError, TypeError):
                continue
    return pids


def pis_outside_roost(pids: list[str], uid: int, since: float) -> list[Writer]:
    """Live pis of `uid` outside roost that started after `since` (seconds since boot), when
    roost last noted the session: one that was running before is a session the person was
    using elsewhere, not one that took this session from roost."""
    found: list[Writer] = []
    holders: set[int] | None = None
    home = os.environ.get("HOME", "")
    for pid in pids:
        try:
            with open(f"{PROC}/{pid}/comm", "rb") as handle:
                if handle.read().strip().decode(errors="replace") not in PI_TITLES:
                    continue
            if os.stat(f"{PROC}/{pid}").st_uid != uid:
                continue
        except OSError:
            continue
        started = _started(pid)
        if started is None or started < since - SLACK:
            continue  # it ran before roost last let go of the session
        env = _environ(pid, "ROOST_EXT_SOCK", "ROOST_ATTACH_JOB", "HOME")
        if env is None:
            # Exiting (or gone): no person's pi that took the session. Counted, its missing
            # HOME read as this one, so another pi's exit anywhere refused a job's attach.
            continue
        if "ROOST_EXT_SOCK" in env or "ROOST_ATTACH_JOB" in env:
            continue  # a job's pi, or `roost attach`'s: under roost
        if env.get("HOME", home) != home:
            continue  # another home is another roost's world (tests run many side by side)
        if holders is None:
            holders = _lock_holders()
        if int(pid) in holders:
            continue  # has roost's extension: it holds its own session's lock
        found.append(
            Writer(int(pid), "pi", "the session changed outside roost while it ran", started=started)
        )
    # The earliest first: a pi started from the hint comes right after roost let go.
    return sorted(found, key=lambda w: w.started or 0.0)
