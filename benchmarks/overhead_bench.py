#!/usr/bin/env python3
"""What roost adds to pi: start-up (start -> first model request) and reply latency.

    .venv/bin/python benchmarks/overhead_bench.py [--trials 5] [--replies 3] [--no-cli]
        [--back-to-back] [--no-spare] [--stock]

Everything runs against a FakeLLM in this process (the model request's arrival time is
the finish line), with an isolated ROOST_HOME / HOME / pi agent dir. The variants are
measured *interleaved* (trial i runs each once, in a rotating order), so a machine loaded
by other work slows all of them alike; compare medians.

Start-up, from t0 to the FakeLLM's receipt of the first model request:
  bare      `pi --mode rpc --session FILE` driven directly: t0 = spawn; get_state; prompt.
  bare_ext  the same with `-e roost/extension/roost.ts` (the extension's load cost).
  roost     roostd already running; t0 = just before the `run` request (roost.wire.client).
  cli       t0 = spawn of a `roost run TASK` process, as a person types it (adds the CLI's
            own Python start-up); the target's figure (`start_summary`). --no-cli skips it.
Reply, from t0 to the next model request, on an idle pi (its previous run ended):
  bare      t0 = just before writing an RPC `prompt` to the idle bare pi.
  roost     t0 = just before the `reply` request (roost.wire.client); the job is done/idle.
  cli       t0 = spawn of a `roost reply JOB TEXT` process.

roostd runs through a thin probe (this file, `--daemon-probe`) that starts every pi
worker as `python -c "import overhead_bench" --worker-probe JOB` instead of
`python -m roost.worker JOB`: the same roost/worker/__main__.py (launch.start spawns pi,
then roost.worker.lifecycle is imported while pi boots), with timestamps (and CPU readings) at
each step written to the job's worker.log, and the daemon's own marks (requests, mailbox
posts, job.json saves) to roostd.log. That is where `phases` come from. `--stock` runs the
unmodified `roost daemon run` instead (no phases).

Every trial starts once roostd's spare worker waits and the machine is quiet, unless
--back-to-back: then each trial follows the last at once, as commands run one after
another do (how roost's start on pi 1.6 was first seen ~200 ms over a bare pi's).
`start_summary` puts the three side by side (`roost run`, bare pi, bare pi with roost's
extension, from the same run) with the targets, the load, and how many roost trials found
the spare worker waiting.

Output: one JSON object (see benchmarks/README.md for every field).
"""

from __future__ import annotations

import sys
import time

_T_INTERP = time.monotonic()  # the worker probe's "Python is up" mark: before any import

PHASE_TAG = "BENCHPHASE"


def _mark(name: str, t: float | None = None) -> None:
    """One phase line on stderr (the worker's stderr is its worker.log; line-buffered)."""
    sys.stderr.write(f"{PHASE_TAG} {name} {time.monotonic() if t is None else t:.6f}\n")


CPU_TAG = "BENCHCPU"


def proc_cpu_ms(pid: int | None = None) -> float | None:
    """user+system CPU a process has used so far (ms; /proc tick resolution, 10 ms)."""
    import os

    try:
        with open(f"/proc/{pid or 'self'}/stat", encoding="ascii") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * 1000.0 / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _cpu(name: str, pid: int | None = None) -> None:
    value = proc_cpu_ms(pid)
    if value is not None:
        sys.stderr.write(f"{CPU_TAG} {name} {value:.1f}\n")


def _marked(name, handler):
    async def wrapper(*a, **k):
        _mark(name)
        return await handler(*a, **k)

    return wrapper


def _wrap_sync(owner: object, name: str, before: str | None, after: str | None) -> None:
    """Replace owner.name (a function or method) with one that marks before/after it."""
    orig = getattr(owner, name)

    def wrapper(*a, **k):
        if before:
            _mark(before)
        out = orig(*a, **k)
        if after:
            _mark(after)
        return out

    setattr(owner, name, wrapper)


def _wrap_async(owner: object, name: str, before: str | None, after: str | None) -> None:
    orig = getattr(owner, name)

    async def wrapper(*a, **k):
        if before:
            _mark(before)
        out = await orig(*a, **k)
        if after:
            _mark(after)
        return out

    setattr(owner, name, wrapper)


class _AfterImport:
    """A one-shot import hook: `then(module)` runs right after module `name` has executed.

    Lets the probe instrument roost.worker.lifecycle at the moment roost/worker/__main__.py
    imports it (after launch.start, i.e. after pi is spawned), without importing it sooner.
    """

    def __init__(self, name: str, then) -> None:
        self.name = name
        self.then = then

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find else None
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        orig_exec = loader.exec_module
        then = self.then

        def exec_module(module):
            orig_exec(module)
            then(module)

        loader.exec_module = exec_module
        return spec


def _wrap_launch(launch) -> None:
    """Marks around the launcher's steps (roost.worker.launch), before it runs."""
    _wrap_sync(launch, "listen", None, "ext_listening")
    orig_spawn = launch.spawn_pi

    def spawn_pi(*a, **k):
        _cpu("worker_pre_spawn")  # the worker's CPU from exec to spawning pi
        _mark("pi_spawn")
        out = orig_spawn(*a, **k)
        _mark("pi_spawned")
        return out

    # Module attribute: launch.start's call and the slow path in Worker.run (the session's
    # lock file exists) both look it up there.
    launch.spawn_pi = spawn_pi
    _wrap_sync(launch, "start", None, "launched")


def _worker_probe(job_id: str, t_spawn: float) -> int:
    """`python -m roost.worker JOB`, with a timestamp at every start-up step.

    Runs the real roost/worker/__main__.py (through runpy, as `python -m` does), so the
    steps keep their order: launch.start (extension socket, pi spawned) first, then the
    heavy `import roost.worker.lifecycle` while pi boots, then main(early). The light launch
    module is imported (and wrapped) here just before; roost.worker.lifecycle is wrapped by a
    one-shot import hook the moment __main__.py has imported it.
    """
    _mark("spawn", t_spawn)
    _mark("interp", _T_INTERP)
    import runpy

    from roost.worker import launch

    _mark("launch_imported")
    _wrap_launch(launch)

    def instrument(wm) -> None:
        _mark("imported")
        _instrument_worker(wm)

    sys.meta_path.insert(0, _AfterImport("roost.worker.lifecycle", instrument))
    sys.argv = [sys.argv[0], job_id]
    runpy.run_module("roost.worker", run_name="__main__", alter_sys=True)
    return 0  # __main__.py exits through sys.exit(main(early))


def _standby_probe() -> int:
    """`python -m roost.worker --standby` (roostd's spare), with the same marks from the
    moment it is handed its job (`job_received`); before that its stderr is roostd's."""
    import runpy

    from roost.worker import launch, standby

    _wrap_launch(launch)
    orig_wait = standby.wait_for_job

    def wait_for_job() -> str:
        job = orig_wait()
        _mark("job_received")
        return job

    standby.wait_for_job = wait_for_job
    sys.meta_path.insert(0, _AfterImport("roost.worker.lifecycle", _instrument_worker))
    sys.argv = [sys.argv[0], "--standby"]
    runpy.run_module("roost.worker", run_name="__main__", alter_sys=True)
    return 0


def _instrument_worker(wm) -> None:
    """Marks in roost.worker.lifecycle (and what it uses), installed before main(early) runs."""
    from roost.mailbox import Mailbox
    from roost.worker.daemon_link import DaemonLink
    from roost.worker.delivery import Delivery
    from roost.worker.pi_process import PiProcess

    _wrap_sync(wm.Worker, "__init__", None, "init_done")
    _wrap_sync(wm.Worker, "check_lock", None, "lock_checked")  # only if the lock file exists
    _wrap_async(wm.asyncio, "start_unix_server", None, "ext_serving")  # the worker's only server
    _wrap_async(PiProcess, "attach", "pi_attach", "pi_attached")
    _wrap_async(DaemonLink, "_open", "daemon_connect", "daemon_connected")
    _wrap_async(Delivery, "pump", "pump", None)
    _wrap_sync(Delivery, "drop_resends", "drop_resends", "resends_dropped")

    orig_command = PiProcess.command

    async def command(self, kind, timeout=60.0, **fields):
        first_state = kind == "get_state" and not getattr(self, "_bench_cpu", False)
        if first_state:
            _cpu("worker_ready")  # the worker's CPU from exec to asking pi (its set-up done)
        _mark(f"{kind}_sent")
        out = await orig_command(self, kind, timeout, **fields)
        _mark(f"{kind}_ok")
        if first_state:
            self._bench_cpu = True
            _cpu("pi_ready", self.pid)  # pi's CPU from exec to its first answer
        return out

    PiProcess.command = command  # type: ignore[method-assign]

    orig_call = DaemonLink._call

    async def call(self, conn, op, **args):
        out = await orig_call(self, conn, op, **args)
        if op == "worker_hello":
            _mark("daemon_bound")
        return out

    DaemonLink._call = call  # type: ignore[method-assign]

    from roost.worker.extchannel import ExtensionChannel

    orig_serve = ExtensionChannel.serve

    async def serve(self, reader, writer):
        _mark("ext_connect")
        return await orig_serve(self, reader, writer)

    ExtensionChannel.serve = serve  # type: ignore[method-assign]

    orig_handlers = ExtensionChannel._handlers

    def ext_handlers(self):
        handlers = orig_handlers(self)
        hello = handlers["ext_hello"]

        async def ext_hello(conn, request):
            _mark("ext_hello")
            return await hello(conn, request)

        handlers["ext_hello"] = ext_hello
        for op in ("send", "spawn"):
            handlers[op] = _marked(f"ext_{op}", handlers[op])
        return handlers

    ExtensionChannel._handlers = ext_handlers  # type: ignore[method-assign]
    _wrap_async(wm.Worker, "_send_agent", "inject", "inject_sent")
    _wrap_sync(DaemonLink, "send_reliably", "handback", None)

    orig_event = wm.Worker._on_pi_event

    def on_pi_event(self, event):
        kind = event.get("type")
        if kind == "agent_end":
            _mark("pi_agent_end")
        elif kind == "message_end":
            role = (event.get("message") or {}).get("role")
            if role in ("custom", "user"):
                _mark(f"pi_{role}_end")
        return orig_event(self, event)

    wm.Worker._on_pi_event = on_pi_event

    orig_watch = Mailbox.watch

    def watch(self, on_change=None):
        def changed() -> None:
            _mark("inotify")
            if on_change is not None:
                on_change()

        _mark("watch_begin")
        out = orig_watch(self, changed)
        _mark("watch_started")
        return out

    Mailbox.watch = watch  # type: ignore[method-assign]


def _daemon_probe() -> int:
    """`roost daemon run`, starting pi workers through the probes above."""
    import os

    from roost.supervise import workers
    from roost.supervise.daemon import main

    orig = workers.WorkerProcess.command
    here = os.path.dirname(os.path.abspath(__file__))
    # Imported as a module (not run as a script) so its bytecode is cached like roost's.
    boot = f"import sys; sys.path.insert(0, {here!r}); import overhead_bench"

    def command(self):
        if self.record.kind != "pi":
            return orig(self)
        return [sys.executable, "-c", boot, "--worker-probe", self.record.id, f"{time.monotonic():.6f}"]

    workers.WorkerProcess.command = command  # type: ignore[method-assign]
    from roost.supervise import spare

    spare.standby_command = lambda: [sys.executable, "-c", boot, "--standby-probe"]

    # Daemon-side marks (in roostd.log): requests handled, durable writes around them.
    from roost.job.record import JobRecord
    from roost.mailbox import Mailbox
    from roost.supervise.handlers import agents, jobs, worker

    def marked_handlers(module):
        orig_handlers = module.handlers

        def handlers(daemon):
            table = orig_handlers(daemon)
            for op in ("run", "reply", "send", "spawn", "handback", "worker_update"):
                if op in table:
                    table[op] = _marked(f"d_{op}", table[op])
            return table

        module.handlers = handlers

    for module in (agents, jobs, worker):
        marked_handlers(module)

    def timed(cls, name, label):
        orig_fn = getattr(cls, name)

        def wrapper(*a, **k):
            _mark(f"{label}_begin")
            try:
                return orig_fn(*a, **k)
            finally:
                _mark(f"{label}_end")

        setattr(cls, name, wrapper)

    timed(Mailbox, "post", "d_post")
    timed(JobRecord, "save", "d_save")
    return main()


# Dispatch at import time, before anything heavy is imported (the probe worker imports this
# module with `python -c`, the daemon probe runs it as a script).
if len(sys.argv) > 1 and sys.argv[1] == "--worker-probe":
    sys.exit(_worker_probe(sys.argv[2], float(sys.argv[3])))
if len(sys.argv) > 1 and sys.argv[1] == "--standby-probe":
    sys.exit(_standby_probe())
if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == "--daemon-probe":
    sys.exit(_daemon_probe())

# ---- the benchmark proper (nothing below runs in a probe) ---------------------------------

import argparse  # noqa: E402
import contextlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
from collections.abc import Callable, Iterable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from kit.lab import Lab  # noqa: E402
from kit.testpi import PiRpc, require_pi  # noqa: E402

from roost.fakellm import last_user_contains  # noqa: E402
from roost.host import paths  # noqa: E402
from roost.wire.client import Client  # noqa: E402

TIMEOUT = 90.0


# ---- numbers --------------------------------------------------------------------------------
def ms(seconds: float) -> float:
    return round(seconds * 1000.0, 2)


def summary(values: Iterable[float]) -> dict[str, Any]:
    """median, p90 (nearest rank), min, max and n of a list of milliseconds."""
    xs = sorted(v for v in values if v is not None)
    if not xs:
        return {"n": 0}
    p90 = xs[min(len(xs) - 1, max(0, int(round(0.9 * len(xs) + 0.5)) - 1))]
    return {
        "median": round(statistics.median(xs), 2),
        "p90": round(p90, 2),
        "min": round(xs[0], 2),
        "max": round(xs[-1], 2),
        "n": len(xs),
    }


def percentile(values: Iterable[float], q: float) -> float | None:
    xs = sorted(values)
    if not xs:
        return None
    return round(xs[min(len(xs) - 1, max(0, int(round(q * len(xs) + 0.5)) - 1))], 3)


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


# ---- an isolated roost + pi installation ------------------------------------------------------
def bench_lab(
    *,
    probe: bool = True,
    roost_settings: dict[str, Any] | None = None,
    keep: bool = False,
    bytecode_cache: bool = True,
) -> Lab:
    """A Lab (the real pi, the lab's own FakeLLM) with roostd (the probe, or the stock daemon)
    running in it, which this process's roost.wire.client reaches too."""
    require_pi()
    settings: dict[str, Any] = {"warmSeconds": 3600, "maxLivePi": 1000}  # no idle stop
    settings.update(roost_settings or {})
    lab = Lab(llm=True, settings=settings, keep=keep, prefix="roost-bench-", hold_timeout=300.0)
    lab.env.pop("PYTHONUNBUFFERED", None)  # roostd and the workers as they run for real
    if bytecode_cache:
        lab.use_bytecode_cache()
    lab.activate()  # roost.wire.client and roost.host.paths in this process resolve the same ROOST_HOME
    paths.ensure_dir(lab.roost_home)
    lab.start_daemon([sys.executable, os.path.abspath(__file__), "--daemon-probe"] if probe else None)
    return lab


def _marks(log: Path, tag: str) -> list[tuple[str, float]]:
    out = []
    with contextlib.suppress(OSError):
        for line in log.read_text(errors="replace").splitlines():
            if line.startswith(tag + " "):
                _, name, value = line.split()
                out.append((name, float(value)))
    return out


def worker_phases(lab: Lab, job: str) -> list[tuple[str, float]]:
    """The probe's phase marks of a job's worker(s), in order."""
    return _marks(lab.job_dir(job) / "worker.log", PHASE_TAG)


def cpu_marks(lab: Lab, job: str) -> dict[str, float]:
    """The probe's CPU readings of a job's worker (first of each name), in ms."""
    out: dict[str, float] = {}
    for name, value in _marks(lab.job_dir(job) / "worker.log", CPU_TAG):
        out.setdefault(name, value)
    return out


def daemon_phases(lab: Lab) -> list[tuple[str, float]]:
    """The daemon probe's marks (requests handled, mailbox posts, job.json saves)."""
    return _marks(lab.roost_home / "roostd.log", PHASE_TAG)


def roost_added(p: dict[str, float]) -> float | None:
    """roost's serial time on the way to the first model request, from one trial's phases
    (ms after t0): until pi is spawned, plus from pi being ready (get_state answered and the
    extension's ext_hello) to the prompt written. What pi does in between is the same work
    as a bare pi's start-up, so this is robust against the load that swamps start_ms.

    The worker's own set-up after spawning pi (its heavy imports, Worker(), the event
    loop, the extension server, attaching pi's pipes, the mailbox watcher) runs while pi
    boots and is left out: `worker_overlap` says whether it stayed hidden."""
    if not all(k in p for k in ("pi_spawned", "get_state_ok", "ext_hello", "prompt_sent")):
        return None
    return round(p["pi_spawned"] + p["prompt_sent"] - max(p["get_state_ok"], p["ext_hello"]), 2)


def worker_overlap(p: dict[str, float]) -> dict[str, float]:
    """Whether the worker's set-up after pi's spawn stayed off the critical path (ms).

    setup: pi spawned -> the worker asks pi its first get_state (everything the worker
      does meanwhile: `import roost.worker.lifecycle`, Worker(), asyncio, attach, the watcher).
    pi_wait: that get_state sent -> answered. A pi already up answers in about the idle
      round trip (`idle_get_state_rtt`); more means pi was still booting: the set-up hidden.
    ext_wait: the worker's extension server up -> the extension's connection accepted. About
      0 means the connection had waited in the listen backlog for the worker (pi's
      extension awaits its hello at session_start, so that wait can delay pi).
    """
    out: dict[str, float] = {}

    def d(key: str, a: str, b: str) -> None:
        if a in p and b in p:
            out[key] = round(p[b] - p[a], 2)

    d("setup", "pi_spawned", "get_state_sent")
    d("imports", "launched", "imported")
    d("pi_wait", "get_state_sent", "get_state_ok")
    d("ext_wait", "ext_serving", "ext_connect")
    return out


def idle_get_state_rtt(marks: list[tuple[str, float]]) -> float | None:
    """Median get_state round trip of a pi that is up (the worker's later get_state calls)."""
    sent: float | None = None
    rtts: list[float] = []
    for name, t in marks:
        if name == "get_state_sent":
            sent = t
        elif name == "get_state_ok" and sent is not None:
            rtts.append(t - sent)
            sent = None
    return ms(statistics.median(rtts[1:])) if len(rtts) > 1 else None


def first_after(marks: list[tuple[str, float]], name: str, t0: float) -> float | None:
    for n, t in marks:
        if n == name and t >= t0:
            return t
    return None


def wait_settled(c: Client, job: str) -> dict[str, Any]:
    out = c.call("wait", {"job": job, "timeout": TIMEOUT}, TIMEOUT + 30)
    if not out.get("settled"):
        raise TimeoutError(f"job {job} did not settle: {out}")
    return out


# ---- the variants ------------------------------------------------------------------------------
START_PHASES = (
    "spawn",
    "job_received",
    "interp",
    "launch_imported",
    "ext_listening",
    "lock_checked",
    "pi_spawn",
    "pi_spawned",
    "launched",
    "imported",
    "init_done",
    "ext_serving",
    "daemon_connect",
    "daemon_connected",
    "daemon_bound",
    "pi_attach",
    "pi_attached",
    "watch_begin",
    "watch_started",
    "get_state_sent",
    "ext_connect",
    "ext_hello",
    "get_state_ok",
    "drop_resends",
    "resends_dropped",
    "pump",
    "prompt_sent",
)


def bare_trial(lab: Lab, token: str, ext: bool, replies: int) -> dict[str, Any]:
    """Start a bare pi (optionally with the roost extension), prompt it, then reply."""
    session = lab.root / "bare" / f"{token}.jsonl"
    session.parent.mkdir(exist_ok=True)
    since = len(lab.llm.requests)
    pi = PiRpc(cwd=lab.work, env=lab.env, session=session, extensions=[paths.extension_path()] if ext else [])
    try:
        t0 = pi.spawned_at
        resp = pi.send({"type": "get_state"}, timeout=TIMEOUT)
        t_state = pi.times[pi.index_of(resp)]
        cpu_ready = proc_cpu_ms(pi.proc.pid)
        t_prompt = time.monotonic()
        pi.prompt(f"{token} start", timeout=TIMEOUT)
        req = lab.llm.wait_for_request(last_user_contains(token), TIMEOUT, since=since)
        pi.wait_event("agent_end", timeout=TIMEOUT)
        out: dict[str, Any] = {
            "start_ms": ms(req.t - t0),
            "phases": {
                "get_state_ok": ms(t_state - t0),
                "prompt_sent": ms(t_prompt - t0),
                "model_request": ms(req.t - t0),
            },
            "reply_ms": [],
            "boot_ms": ms(t_state - t0),  # spawn -> get_state answered
            "cpu": {"pi_ready": cpu_ready},
            "prompt_to_request_ms": ms(req.t - t_prompt),
        }
        for j in range(replies):
            tok = f"{token}-reply{j}"
            since = len(lab.llm.requests)
            mark = pi.mark()
            t = time.monotonic()
            pi.prompt(tok, timeout=TIMEOUT)
            req = lab.llm.wait_for_request(last_user_contains(tok), TIMEOUT, since=since)
            out["reply_ms"].append(ms(req.t - t))
            pi.wait_event("agent_end", timeout=TIMEOUT, since=mark)
        return out
    finally:
        pi.close()


def spare_ready(lab: Lab) -> None:
    """With spareWorker: until roostd's spare worker waits for a job (a `--standby` child no
    job names, using no CPU), so a trial meets the steady state of a person's next command;
    a burst of runs is scale_bench's. Untimed. Without it (`--no-spare`): at once."""
    import psutil

    if not SPARE or BACK_TO_BACK:
        return
    deadline = time.monotonic() + 30

    def waiting() -> bool:
        named = {
            lab.record(p.parent.name)["process"].get("workerPid")
            for p in (lab.roost_home / "jobs").glob("*/job.json")
        }
        for proc in psutil.Process(lab.daemon_pid() or 0).children():
            try:
                if "--standby" not in " ".join(proc.cmdline()[-1:]) or proc.pid in named:
                    continue
                before = sum(proc.cpu_times()[:2])
                time.sleep(0.2)
                if sum(proc.cpu_times()[:2]) == before:
                    return True
            except psutil.Error:
                continue
        return False

    while not waiting():
        if time.monotonic() > deadline:
            return  # measured without it, as a run that finds none
        time.sleep(0.05)


SPARE = True
BACK_TO_BACK = False
"""--back-to-back: no wait for an idle spare or a quiet machine before a trial."""


def took_spare(lab: Lab, job: str) -> bool | None:
    """Whether the job's worker was roostd's spare (the probe's `job_received` mark); None
    without the probe (--stock)."""
    marks = worker_phases(lab, job)
    if not marks:
        return None
    return any(name == "job_received" for name, _ in marks)


def _cpu_busy_idle() -> tuple[int, int]:
    with open("/proc/stat", encoding="ascii") as handle:
        fields = [int(x) for x in handle.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, idle


def machine_quiet(max_busy: float = 0.10, window: float = 0.1, timeout: float = 10.0) -> None:
    """Until the machine's CPUs are at most `max_busy` busy over a `window` (the last
    trial's processes gone: an exiting pi, a booting spare). Untimed; every trial starts so,
    whatever ran before it, so the medians compare starts on a quiet machine. Not with
    --back-to-back."""
    if BACK_TO_BACK:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        busy0, idle0 = _cpu_busy_idle()
        time.sleep(window)
        busy1, idle1 = _cpu_busy_idle()
        total = (busy1 - busy0) + (idle1 - idle0)
        if total and (busy1 - busy0) / total <= max_busy:
            return


def roost_trial(lab: Lab, token: str, replies: int) -> dict[str, Any]:
    """`run` through roost.wire.client with roostd up, then `reply` to the idle job."""
    spare_ready(lab)
    with lab.client() as c:
        since = len(lab.llm.requests)
        t0 = time.monotonic()
        res = c.request("run", task=f"{token} start", cwd=str(lab.work), name=token)
        t_resp = time.monotonic()
        job = res["id"]
        req = lab.llm.wait_for_request(last_user_contains(token), TIMEOUT, since=since)
        out: dict[str, Any] = {"job": job, "start_ms": ms(req.t - t0), "run_response_ms": ms(t_resp - t0)}
        marks = worker_phases(lab, job)
        phases = {"run_response": ms(t_resp - t0)}
        for name in START_PHASES:
            t = first_after(marks, name, 0.0)
            if t is not None:
                phases[name] = ms(t - t0)
        phases["model_request"] = ms(req.t - t0)
        t_run = first_after(daemon_phases(lab), "d_run", t0)
        if t_run is not None:
            phases["d_run"] = ms(t_run - t0)
        out["phases"] = phases
        out["spare"] = took_spare(lab, job)
        out["added_ms"] = roost_added(phases)
        out["overlap"] = worker_overlap(phases)
        out["cpu"] = cpu_marks(lab, job)
        if "prompt_sent" in phases:
            out["prompt_to_request_ms"] = round(phases["model_request"] - phases["prompt_sent"], 2)
        wait_settled(c, job)
        out["reply_ms"], out["reply_phases"], out["reply_status"] = [], [], []
        for j in range(replies):
            tok = f"{token}-reply{j}"
            since = len(lab.llm.requests)
            t = time.monotonic()
            r = c.request("reply", job=job, text=tok)
            t_ack = time.monotonic()
            req = lab.llm.wait_for_request(last_user_contains(tok), TIMEOUT, since=since)
            out["reply_ms"].append(ms(req.t - t))
            out["reply_status"].append(r.get("status"))
            wait_settled(c, job)  # then every mark of this reply is in the logs
            marks = worker_phases(lab, job)
            rp = {"reply_response": ms(t_ack - t)}
            for name in ("inotify", "pump", "prompt_sent"):
                tm = first_after(marks, name, t)
                if tm is not None:
                    rp[name] = ms(tm - t)
            rp["model_request"] = ms(req.t - t)
            dm = daemon_phases(lab)
            for name in ("d_reply", "d_post_begin", "d_post_end"):
                tm = first_after(dm, name, t)
                if tm is not None:
                    rp[name] = ms(tm - t)
            out["reply_phases"].append(rp)
        rtt = idle_get_state_rtt(worker_phases(lab, job))  # the settle checks after each run
        if rtt is not None:
            out["overlap"]["idle_get_state_rtt"] = rtt
        c.request("rm", job=job)
    return out


ROOST_SCRIPT = Path(sys.executable).parent / "roost"
"""The console script, as a person runs `roost` from the shell."""


def cli(lab: Lab, *args: str) -> str:
    entry = [str(ROOST_SCRIPT)] if ROOST_SCRIPT.exists() else [sys.executable, "-m", "roost.cli.main"]
    proc = subprocess.run(
        [*entry, *args], env=lab.env, cwd=lab.work, capture_output=True, text=True, timeout=TIMEOUT
    )
    if proc.returncode != 0:
        raise RuntimeError(f"roost {' '.join(args)}: {proc.returncode} {proc.stderr}")
    return proc.stdout.strip()


def cli_trial(lab: Lab, token: str, replies: int) -> dict[str, Any]:
    """The same through `roost run` / `roost reply` processes (their Python start-up too),
    in their plain forms, as a person types them."""
    spare_ready(lab)
    since = len(lab.llm.requests)
    t0 = time.monotonic()
    job = cli(lab, "run", f"{token} start")
    t_exit = time.monotonic()
    req = lab.llm.wait_for_request(last_user_contains(token), TIMEOUT, since=since)
    out: dict[str, Any] = {
        "job": job,
        "start_ms": ms(req.t - t0),
        "cli_exit_ms": ms(t_exit - t0),
        "reply_ms": [],
        "spare": took_spare(lab, job),
    }
    with lab.client() as c:
        wait_settled(c, job)
        for j in range(replies):
            tok = f"{token}-reply{j}"
            since = len(lab.llm.requests)
            t = time.monotonic()
            cli(lab, "reply", job, tok)
            req = lab.llm.wait_for_request(last_user_contains(tok), TIMEOUT, since=since)
            out["reply_ms"].append(ms(req.t - t))
            wait_settled(c, job)
        c.request("rm", job=job)
    return out


# ---- the run ---------------------------------------------------------------------------------------
def phase_medians(rows: list[dict[str, Any]], key: str = "phases") -> dict[str, float]:
    names: list[str] = []
    for r in rows:
        for n in r[key]:
            if n not in names:
                names.append(n)
    table = {n: [r[key][n] for r in rows if n in r[key]] for n in names}
    medians = {n: round(statistics.median(v), 2) for n, v in table.items() if v}
    return dict(sorted(medians.items(), key=lambda kv: kv[1]))


def segments(p: dict[str, float], bare_ext: dict[str, float]) -> dict[str, float | None]:
    """Where roost's start-up goes, from the phase medians (ms, each a difference)."""

    def d(a: str, b: str) -> float | None:
        return round(p[b] - p[a], 2) if a in p and b in p else None

    ready = max(p.get("get_state_ok", 0), p.get("ext_hello", 0))
    out: dict[str, float | None] = {
        # serial, on the critical path: t0 -> pi spawned
        "daemon: run request -> handler": p.get("d_run"),
        "daemon: run request -> worker Popen (no spare)": p.get("spawn"),
        "daemon: run request -> job handed to the spare worker": p.get("job_received"),
        "run response back at the client": p.get("run_response"),
        "python interpreter start (Popen -> first line)": d("spawn", "interp"),
        "launch: import roost.worker.launch": d("interp", "launch_imported"),
        "launch: job.json + ext socket + lock-file check (-> pi spawn)": d("launch_imported", "pi_spawn"),
        "pi spawn call (subprocess.Popen)": d("pi_spawn", "pi_spawned"),
        "total: run request -> pi spawned": p.get("pi_spawned"),
        # overlapping pi's boot
        "worker imports (roost.worker.lifecycle), while pi boots": d("launched", "imported"),
        "Worker() + asyncio + ext server (imported -> ext_serving)": d("imported", "ext_serving"),
        "attach pi + mailbox watcher (ext_serving -> get_state sent)": d("ext_serving", "get_state_sent"),
        "worker set-up after pi spawn (pi spawned -> get_state sent)": d("pi_spawned", "get_state_sent"),
        "pi start-up to get_state answer (with extension)": d("pi_spawned", "get_state_ok"),
        "pi start-up to ext_hello": d("pi_spawned", "ext_hello"),
        "worker waits for pi (get_state sent -> answered)": d("get_state_sent", "get_state_ok"),
        # serial again: pi ready -> the first model request
        "ready (get_state + ext_hello) -> prompt written": round(p["prompt_sent"] - ready, 2)
        if "prompt_sent" in p
        else None,
        "prompt written -> model request": d("prompt_sent", "model_request"),
    }
    if "get_state_ok" in bare_ext and "pi_spawned" in p and "get_state_ok" in p:
        out["pi start-up vs bare_ext (same work; contention, the job-mode hello)"] = round(
            (p["get_state_ok"] - p["pi_spawned"]) - bare_ext["get_state_ok"], 2
        )
    return out


def start_summary(
    start: dict[str, Any],
    names: list[str],
    paired: Callable[..., Any],
    results: dict[str, list[dict[str, Any]]],
    load_before: list[float],
    load_after: list[float],
) -> dict[str, Any]:
    """The three starts side by side, from this run: `roost run` (the command typed; the
    client's `run` request with --no-cli), a bare pi, a bare pi with roost's extension;
    their differences (medians, and medians of per-trial differences) against the targets;
    the load; how many roost trials found the spare worker waiting."""
    ours = "cli" if "cli" in names else "roost"

    def median(name: str) -> float | None:
        return start[name].get("median")

    def over(base: str) -> dict[str, Any]:
        a, b = median(ours), median(base)
        return {
            "medians": round(a - b, 2) if a is not None and b is not None else None,
            "paired": paired(base, ours, "start_ms"),
        }

    spare = {n: [r.get("spare") for r in results[n]] for n in ("roost", "cli") if n in names}
    return {
        "pi": pi_label(),
        "loadavg_before_after": [load_before, load_after],
        "roost run -> first model request, median ms"
        if ours == "cli"
        else "roost (run request) -> first model request, median ms": median(ours),
        "bare pi --mode rpc, median ms": median("bare"),
        "bare pi -e roost.ts, median ms": median("bare_ext"),
        f"{ours} - bare ms (target <= 100)": over("bare"),
        f"{ours} - bare_ext ms (target <= 40)": over("bare_ext"),
        "bare_ext - bare ms (the extension's load)": {
            "medians": (
                round(median("bare_ext") - median("bare"), 2)
                if median("bare_ext") is not None and median("bare") is not None
                else None
            ),
            "paired": paired("bare", "bare_ext", "start_ms"),
        },
        "trials that found the spare worker waiting": {
            n: (f"{v.count(True)} of {len(v)}" if None not in v else None) for n, v in spare.items()
        },
    }


def pi_label() -> str:
    """Which pi ran (ROOST_PI selects another than the pinned one)."""
    from roost.pi.compat import features_of
    from roost.pi.locate import find_pi

    install = find_pi()
    return f"{features_of(install).label} on {install.node or 'its own node'}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--replies", type=int, default=3, help="replies per started pi")
    ap.add_argument(
        "--cli", action="store_true", help="(the default) time `roost run` / `roost reply` as processes too"
    )
    ap.add_argument("--no-cli", action="store_true", help="skip `roost run` / `roost reply` as processes")
    ap.add_argument(
        "--back-to-back",
        action="store_true",
        help="start each trial as soon as the last ended (no wait for the spare "
        "worker or a quiet machine), as commands typed one after another",
    )
    ap.add_argument(
        "--no-bytecode-cache",
        action="store_true",
        help="keep PYTHONDONTWRITEBYTECODE from the environment for roost's processes",
    )
    ap.add_argument("--stock", action="store_true", help="run the unmodified roostd/worker (no phase marks)")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir")
    ap.add_argument(
        "--no-spare",
        action="store_true",
        help="spareWorker off: every worker starts when its job does (the "
        "start-up before the spare worker, for a comparison)",
    )
    args = ap.parse_args(argv)
    global SPARE, BACK_TO_BACK
    SPARE = not args.no_spare
    BACK_TO_BACK = args.back_to_back

    variants: dict[str, Callable[[Lab, str], dict[str, Any]]] = {
        "bare": lambda lab, tok: bare_trial(lab, tok, False, args.replies),
        "bare_ext": lambda lab, tok: bare_trial(lab, tok, True, args.replies),
        "roost": lambda lab, tok: roost_trial(lab, tok, args.replies),
    }
    if not args.no_cli:
        variants["cli"] = lambda lab, tok: cli_trial(lab, tok, 1)
    # A bare trial between two of roost's: back to back, the next `roost run` comes after a
    # bare pi's start, as when the three are run in turn, not within the same second.
    names = ["roost", "bare", "cli", "bare_ext"] if "cli" in variants else list(variants)
    results: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    started = time.monotonic()
    load_before = load_average()
    with bench_lab(
        probe=not args.stock,
        keep=args.keep,
        bytecode_cache=not args.no_bytecode_cache,
        roost_settings={"spareWorker": not args.no_spare},
    ) as lab:
        # Warm-up (untimed): disk caches, pi's modules + the extension, roost's bytecode.
        variants["roost"](lab, "WARM-roost")
        for i in range(args.trials):
            order = names[i % len(names) :] + names[: i % len(names)]
            for name in order:
                spare_ready(lab)  # its boot in no trial, a bare one included
                machine_quiet()
                results[name].append(variants[name](lab, f"T{i}-{name}"))
    elapsed = time.monotonic() - started

    start = {n: summary(r["start_ms"] for r in results[n]) for n in names}
    reply = {n: summary(x for r in results[n] for x in r["reply_ms"]) for n in names}

    def paired(a: str, b: str, key: str) -> float | None:
        if key == "start_ms":
            diffs = [rb[key] - ra[key] for ra, rb in zip(results[a], results[b], strict=True)]
        else:
            diffs = [
                y - x
                for ra, rb in zip(results[a], results[b], strict=True)
                for x, y in zip(ra[key], rb[key], strict=False)
            ]
        return round(statistics.median(diffs), 2) if diffs else None

    def diff(table: dict[str, Any], a: str, b: str) -> float | None:
        if table[a].get("n") and table[b].get("n"):
            return round(table[b]["median"] - table[a]["median"], 2)
        return None

    out: dict[str, Any] = {
        "bench": "overhead",
        "pi": pi_label(),
        "trials": args.trials,
        "replies_per_trial": args.replies,
        "probe": not args.stock,
        "spareWorker": not args.no_spare,
        "back_to_back": args.back_to_back,
        "elapsed_s": round(elapsed, 1),
        "loadavg_before": load_before,
        "loadavg_after": load_average(),
        "cpus": os.cpu_count(),
        "start_ms": start,
        "reply_ms": reply,
        "overhead_ms": {
            "start roost - bare (medians)": diff(start, "bare", "roost"),
            "start roost - bare (median of paired trials)": paired("bare", "roost", "start_ms"),
            "start bare_ext - bare (extension load)": diff(start, "bare", "bare_ext"),
            "start roost - bare_ext (roost plumbing)": diff(start, "bare_ext", "roost"),
            "reply roost - bare (medians)": diff(reply, "bare", "roost"),
            "reply roost - bare (median of paired)": paired("bare", "roost", "reply_ms"),
        },
        "bytecode_cache": not args.no_bytecode_cache,
        "targets_ms": {"start: roost run - bare": 100, "start: roost run - bare_ext": 40, "reply": 10},
    }
    out["start_summary"] = start_summary(
        start, names, paired, results, out["loadavg_before"], out["loadavg_after"]
    )
    if not args.stock:
        # The load-robust view of start-up (see roost_added, worker_overlap): roost's own
        # serial path, whether the worker's set-up stayed hidden behind pi's boot, and pi's
        # boot (spawn -> get_state answered) in each variant, run in the same trials.
        rr = results["roost"]
        boot = {n: summary(r["boot_ms"] for r in results[n]) for n in ("bare", "bare_ext")}
        boot["roost"] = summary(
            r["phases"]["get_state_ok"] - r["phases"]["pi_spawned"] for r in rr if "pi_spawned" in r["phases"]
        )

        def ov(key: str) -> list[float]:
            return [r["overlap"][key] for r in rr if key in r["overlap"]]

        def on_path(r: dict[str, Any]) -> bool:
            o = r["overlap"]
            rtt = o.get("idle_get_state_rtt") or 1.0
            return (o.get("pi_wait", 1e9) <= max(5.0, 3 * rtt)) or o.get("ext_wait", 1e9) < 0.5

        boot_diff = [
            r["phases"]["get_state_ok"] - r["phases"]["pi_spawned"] - b["boot_ms"]
            for r, b in zip(rr, results["bare_ext"], strict=True)
            if "pi_spawned" in r["phases"] and "get_state_ok" in r["phases"]
        ]
        out["start_critical_path_ms"] = {
            "roost: added by roost, serial (t0 -> pi spawned + pi ready -> prompt written)": summary(
                r["added_ms"] for r in rr if r.get("added_ms") is not None
            ),
            "roost: t0 -> pi spawned": summary(
                r["phases"]["pi_spawned"] for r in rr if "pi_spawned" in r["phases"]
            ),
            "roost: pi ready -> prompt written": summary(
                r["phases"]["prompt_sent"] - max(r["phases"]["get_state_ok"], r["phases"]["ext_hello"])
                for r in rr
                if all(k in r["phases"] for k in ("prompt_sent", "get_state_ok", "ext_hello"))
            ),
            "roost: worker set-up while pi boots (pi spawned -> get_state sent)": summary(ov("setup")),
            "roost: of which import roost.worker.lifecycle": summary(ov("imports")),
            "roost: worker waits for pi (get_state sent -> answered)": summary(ov("pi_wait")),
            "roost: idle get_state round trip (a pi that is up)": summary(ov("idle_get_state_rtt")),
            "roost: ext server up -> extension connected (~0: it waited for the worker)": summary(
                ov("ext_wait")
            ),
            "roost: trials with the worker's set-up on the critical path": sum(
                1 for r in rr if r["overlap"] and on_path(r)
            ),
            "pi boot (spawn -> get_state answered)": boot,
            "pi boot, roost - bare_ext (median of paired trials; CPU contention with the "
            "worker, the job-mode hello)": round(statistics.median(boot_diff), 2) if boot_diff else None,
            "prompt written -> model request": {
                n: summary(
                    r["prompt_to_request_ms"] for r in results[n] if r.get("prompt_to_request_ms") is not None
                )
                for n in names
                if n != "cli"
            },
        }
    if "cli" in names:
        out["overhead_ms"]["start cli - bare"] = diff(start, "bare", "cli")
        out["overhead_ms"]["start cli - bare (median of paired trials)"] = paired("bare", "cli", "start_ms")
        out["overhead_ms"]["reply cli - bare (informational)"] = diff(reply, "bare", "cli")
        out["cli_exit_ms"] = summary(r["cli_exit_ms"] for r in results["cli"])
        # The start-up target: `roost run` from the shell -> the first model request, within a
        # bare `pi --mode rpc` prompt + 100 ms (medians, the same run).
        over = out["overhead_ms"]["start cli - bare"]
        over_ext = diff(start, "bare_ext", "cli")
        out["target_start_cli"] = {
            "roost run (whole command) -> first model request, median ms": start["cli"].get("median"),
            "baseline: bare pi --mode rpc prompt, median ms": start["bare"].get("median"),
            "over the baseline ms": over,
            "target: over <= ms": 100,
            "met": over is not None and over <= 100,
            "baseline with the extension: bare pi -e roost.ts, median ms": start["bare_ext"].get("median"),
            "over the baseline with the extension ms": over_ext,
            "target: over the baseline with the extension <= ms": 40,
            "met with the extension": over_ext is not None and over_ext <= 40,
        }
    if not args.stock:
        roost_p = phase_medians(results["roost"])
        bare_ext_p = phase_medians(results["bare_ext"])
        out["phases_median_ms"] = {
            "bare": phase_medians(results["bare"]),
            "bare_ext": bare_ext_p,
            "roost": roost_p,
            "roost_reply": phase_medians(
                [{"p": p} for r in results["roost"] for p in r["reply_phases"]], "p"
            ),
        }
        out["roost_start_segments_ms"] = segments(roost_p, bare_ext_p)
    out["cpu_ms"] = {  # CPU time, unlike wall time, hardly moves with the machine's load
        "pi from exec to its first answer (get_state)": {
            n: summary(
                r["cpu"]["pi_ready"] for r in results[n] if (r.get("cpu") or {}).get("pi_ready") is not None
            )
            for n in names
            if n != "cli"
        },
        "roost worker from exec to spawning pi": summary(
            r["cpu"]["worker_pre_spawn"]
            for r in results["roost"]
            if (r.get("cpu") or {}).get("worker_pre_spawn") is not None
        ),
        "roost worker from exec to its first get_state (set-up done; competes with pi's boot)": summary(
            r["cpu"]["worker_ready"]
            for r in results["roost"]
            if (r.get("cpu") or {}).get("worker_ready") is not None
        ),
    }
    out["reply_status"] = sorted({st for r in results["roost"] for st in r["reply_status"]})
    out["raw"] = {
        n: [{k: v for k, v in r.items() if k not in ("phases", "reply_phases", "cpu")} for r in results[n]]
        for n in names
    }
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
