#!/usr/bin/env python3
"""Hundreds of jobs on one machine: the scale figures, each printed beside its target.

    .venv/bin/python benchmarks/scale_bench.py [--jobs 200] [--records 1000]
                                               [--idle-seconds 60] [--only burst|records]

A quick check of the benchmark itself: `--jobs 20 --records 100 --idle-seconds 5`.

1. burst: `--jobs` real pi jobs (the pinned pi, the scripted model answering each at once)
   submitted at once with one `roost run --each FILE`, the default limits (maxRunning and
   maxLivePi from the machine). First, in the same roostd, one job alone: its time from
   `roost run` to done, and its RSS (worker + pi, sampled while it runs). Then the burst:
   - the submission: the `run --each` command's wall time (target <= 2 s);
   - all complete: every job `done` (none failed), no worker crashed, and the kernel's OOM
     kill counter (/proc/vmstat oom_kill) unchanged;
   - peak RSS of roost's processes (roostd and all its descendants: workers, pis, the spare
     worker), sampled every 0.2 s, against the bound (maxRunning + maxLivePi) x one job +
     roostd + the spare: jobs that work are capped by maxRunning, done jobs that keep their
     pi for the warm window by maxLivePi;
   - the total time (submission to the last job done) against 1.25 x (jobs / maxRunning x
     one job's time).
2. records: `--records` job records, most done (90% done, 5% failed, 5% stopped), written
   directly as job.json files (roost.job.record.JobRecord.save, as roostd writes them; no pi ran:
   only the records matter here) while roostd is down. Then:
   - roostd restart to a ready socket (spawn of `python -m roost.supervise` -> its answer
     to a `status` request: its socket is bound before it loads the jobs, so a connect alone
     would not say it is ready), median of 3, target <= 1 s;
   - `roost ls --json` as a whole process, median of 10, target <= 100 ms;
   - roostd's RSS, target <= 100 MB;
   - `roost view`'s first screen: a fresh process (imports included) from spawn to the
     job table holding every record's row (textual's pilot, 160x40), median of 3, target
     <= 1 s;
   - CPU used by roostd (and its spare worker) over `--idle-seconds` of idleness, target 0.

Output: one JSON object, `targets` first: each target with its figure and whether it is met.
The machine may be shared: `loadavg` says how loaded it was.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import psutil  # noqa: E402
from kit.lab import Lab  # noqa: E402
from kit.procs import wait_until  # noqa: E402

SCRIPT = Path(sys.executable).parent / "roost"
TIMEOUT = 1800.0
CORES = os.cpu_count() or 1


def mb(nbytes: float) -> float:
    return round(nbytes / 2**20, 1)


def oom_kills() -> int | None:
    try:
        for line in Path("/proc/vmstat").read_text().splitlines():
            if line.startswith("oom_kill "):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def tree_of(pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def rss_of(procs: list[psutil.Process]) -> int:
    total = 0
    for proc in procs:
        try:
            total += proc.memory_info().rss
        except psutil.Error:
            pass
    return total


class PeakRss:
    """The peak RSS of roostd and all its descendants, sampled every 0.2 s in a thread."""

    def __init__(self, lab: Lab) -> None:
        self.lab = lab
        self.peak = 0
        self.peak_procs = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            pid = self.lab.daemon_pid()
            if pid is not None:
                procs = tree_of(pid)
                total = rss_of(procs)
                if total > self.peak:
                    self.peak, self.peak_procs = total, len(procs)
            self._stop.wait(0.2)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def limits() -> dict[str, int]:
    """The default limits as roostd derives them on this machine."""
    from roost.supervise.idle import default_live_pi_cap
    from roost.supervise.jobqueue import machine_limit

    return {"maxRunning": machine_limit(), "maxLivePi": default_live_pi_cap()}


def spare_rss(lab: Lab) -> int:
    """The spare worker's RSS (roostd's `--standby` child no job names), 0 when none."""
    pid = lab.daemon_pid()
    if pid is None:
        return 0
    named = {
        json.loads(p.read_text())["process"].get("workerPid")
        for p in (lab.roost_home / "jobs").glob("*/job.json")
    }
    return rss_of(
        [
            p
            for p in psutil.Process(pid).children()
            if p.cmdline()[-1:] == ["--standby"] and p.pid not in named
        ]
    )


def wait_spare_idle(lab: Lab) -> None:
    """Until roostd's spare worker is up and idle (it starts 2 s after roostd, then imports
    for ~0.5 s of CPU): a command timed meanwhile would share the cores with it."""

    def standby() -> psutil.Process | None:
        for proc in psutil.Process(lab.daemon_pid() or 0).children():
            with contextlib.suppress(psutil.Error):
                if proc.cmdline()[-1:] == ["--standby"]:
                    return proc
        return None

    def idle() -> bool:
        proc = standby()
        if proc is None:
            return False
        try:
            before = sum(proc.cpu_times()[:2])
            time.sleep(0.3)
            return sum(proc.cpu_times()[:2]) == before
        except psutil.Error:
            return False

    wait_until(idle, timeout=30.0, what="roostd's spare worker, idle")


def machine_cpu_seconds() -> float:
    """CPU time the whole machine has spent busy (not idle, not waiting on I/O), all cores."""
    with open("/proc/stat", encoding="ascii") as handle:
        fields = [int(x) for x in handle.readline().split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def one_job(lab: Lab) -> dict[str, float]:
    """One job alone: `roost run` -> done (s), the machine's CPU time meanwhile (s); and the
    RSS of a job's worker and pi while its model request is held (as queue_bench measures it)."""
    from roost.fakellm import first_user_contains, text

    started, cpu = time.monotonic(), machine_cpu_seconds()
    job = lab.roost_ok("run", "one job alone").strip()
    lab.wait_settled(job, 120)
    seconds = time.monotonic() - started
    cpu = machine_cpu_seconds() - cpu
    lab.request("rm", job=job)
    hold = threading.Event()
    lab.llm.add(first_user_contains("HELD"), text("done", hold=hold))
    job = lab.roost_ok("run", "HELD for its RSS").strip()
    lab.wait_request(first_user_contains("HELD"))
    worker = wait_until(lambda: lab.show(job)["worker"]["pid"])
    time.sleep(1.0)  # pi's lazy loading done
    job_rss = rss_of(tree_of(worker))
    hold.set()
    lab.wait_settled(job, 120)
    lab.request("rm", job=job)
    return {"seconds": round(seconds, 3), "cpuSeconds": round(cpu, 3), "jobMB": mb(job_rss)}


def burst(lab: Lab, jobs: int) -> dict[str, Any]:
    lab.roost_ok("ls")  # a warm roostd (and its spare worker)
    wait_until(lambda: spare_rss(lab), 30, what="the spare worker")
    alone = one_job(lab)
    roostd = psutil.Process(lab.daemon_pid() or 0).memory_info().rss
    spare = spare_rss(lab)
    tasks = lab.work / "tasks.txt"
    tasks.write_text("".join(f"burst task {n}\n" for n in range(jobs)))
    oom_before = oom_kills()
    with PeakRss(lab) as peak:
        started, cpu = time.monotonic(), machine_cpu_seconds()
        ids = lab.roost_ok("run", "--each", str(tasks), timeout=120).split()
        submitted = time.monotonic() - started
        states = {job: lab.wait_settled(job, TIMEOUT)["state"] for job in ids}
        total = time.monotonic() - started
        cpu = machine_cpu_seconds() - cpu
    oom_after = oom_kills()
    crashed = sum(
        1
        for line in (lab.roost_home / "events.jsonl").read_text().splitlines()
        if '"worker.crashed"' in line or '"worker.gave_up"' in line
    )
    lim = limits()
    bound = (lim["maxRunning"] + lim["maxLivePi"]) * alone["jobMB"] * 2**20 + roostd + spare
    ideal = jobs / lim["maxRunning"] * alone["seconds"]
    return {
        "jobs": jobs,
        "limits": lim,
        "oneJob": alone,
        "roostdMB": mb(roostd),
        "spareMB": mb(spare),
        "submitSeconds": round(submitted, 3),
        "done": sum(1 for s in states.values() if s == "done"),
        "notDone": {j: s for j, s in states.items() if s != "done"},
        "workerCrashes": crashed,
        "oomKills": (oom_after - oom_before) if None not in (oom_before, oom_after) else None,
        "peakMB": mb(peak.peak),
        "peakProcesses": peak.peak_procs,
        "boundMB": mb(bound),
        "totalSeconds": round(total, 1),
        "idealSeconds": round(ideal, 1),
        # Where the CPU bounds the burst: the machine's busy share while it ran, and the
        # least time any order could take if each job cost the CPU one job alone did.
        "cpuSeconds": round(cpu, 1),
        "cpuBusyShare": round(cpu / (total * CORES), 3),
        "cpuBoundSeconds": round(jobs * alone["cpuSeconds"] / CORES, 1),
    }


# ---- 1,000 records --------------------------------------------------------------------------
def write_records(lab: Lab, count: int) -> None:
    """`count` job records as roostd writes them (roostd is down), most of them done."""
    lab.activate()
    from roost.job.record import JobRecord
    from roost.job.states import JobKind, JobState
    from roost.supervise.jobstore import new_job_id

    taken: set[str] = set()
    for n in range(count):
        job_id = new_job_id(taken)
        taken.add(job_id)
        state = JobState.FAILED if n % 20 == 1 else JobState.STOPPED if n % 20 == 2 else JobState.DONE
        record = JobRecord(
            id=job_id,
            name=f"job-{n}",
            kind=JobKind.PI,
            cwd=str(lab.work),
            state=state,
            task=f"task {n}",
            summary=f"summary of job {n}",
            session=str(lab.roost_home / "jobs" / job_id / "session.jsonl"),
            error="it failed" if state == JobState.FAILED else None,
        )
        record.dir.mkdir(parents=True, exist_ok=True)
        record.save()


def restart_seconds(lab: Lab) -> float:
    """`roost daemon stop`, then a new roostd: its spawn -> the socket answers."""
    lab.roost_ok("daemon", "stop")
    started = time.monotonic()
    with open(lab.roost_home / "roostd.log", "ab") as log:
        subprocess.Popen(
            [sys.executable, "-m", "roost.supervise"],
            env=lab.env,
            cwd=lab.roost_home,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    while True:
        try:  # ready: roostd answers (its greeting read), not merely a bound socket
            lab.request("status", timeout=5.0)
            return time.monotonic() - started
        except OSError:
            if time.monotonic() - started > 60:
                raise
            time.sleep(0.005)  # the measurement's own resolution


VIEW_PROBE = """
import asyncio, sys, time
from roost.view.app import ViewApp
from textual.widgets import DataTable
want = int(sys.argv[1])
async def main():
    app = ViewApp()
    async with app.run_test(size=(160, 40)) as pilot:
        while not (app.loaded and app.query_one(DataTable).row_count >= want):
            await pilot.pause(0.01)
        print(f"{time.monotonic():.6f}", flush=True)
        await pilot.press("q")
asyncio.run(main())
"""


def view_seconds(lab: Lab, rows: int) -> float:
    """A fresh `roost view` process (textual's pilot): spawn -> every row in its table."""
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", VIEW_PROBE, str(rows)],
        env=lab.env,
        cwd=lab.work,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return float(proc.stdout.split()[-1]) - started


def ls_json_ms(lab: Lab) -> float:
    entry = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "roost.cli"]
    started = time.perf_counter()
    # Read through a pipe, as `roost ls --json | jq` is: with no pipe to wait on,
    # subprocess's timeout polls for the exit in sleeps of up to 50 ms, which it adds.
    subprocess.run(
        [*entry, "ls", "--json"], env=lab.env, cwd=lab.work, check=True, capture_output=True, timeout=60
    )
    return (time.perf_counter() - started) * 1000.0


def idle_cpu_ms(lab: Lab, seconds: float) -> float:
    """CPU (user + system) roostd and its children used over `seconds` of idleness."""
    procs = tree_of(lab.daemon_pid() or 0)

    def cpu() -> float:
        total = 0.0
        for proc in procs:
            try:
                times = proc.cpu_times()
                total += times.user + times.system
            except psutil.Error:
                pass
        return total

    before = cpu()
    time.sleep(seconds)  # the measurement: nothing is asked of roostd meanwhile
    return round((cpu() - before) * 1000.0, 1)


def records(count: int, idle_seconds: float) -> dict[str, Any]:
    with Lab(pi="fake") as lab:
        lab.use_bytecode_cache()
        lab.env.pop("PYTHONUNBUFFERED", None)
        write_records(lab, count)
        lab.roost_ok("ls")  # a first roostd: bytecode compiled, mailboxes made
        restarts = [restart_seconds(lab) for _ in range(3)]
        # A warm roostd, as the CLI targets are measured: its spare worker up (its imports
        # done), and one untimed list (the mailboxes' counts known, as after any first list).
        wait_spare_idle(lab)
        ls_json_ms(lab)
        ls_runs = [ls_json_ms(lab) for _ in range(10)]
        rows = len(lab.ls())
        roostd = psutil.Process(lab.daemon_pid() or 0).memory_info().rss
        views = [view_seconds(lab, rows) for _ in range(3)]
        time.sleep(2.0)  # the spare worker's imports, the view's disconnect: settled first
        idle = idle_cpu_ms(lab, idle_seconds)
        lab.shutdown()
    return {
        "records": count,
        "rows": rows,
        "restartSeconds": round(statistics.median(restarts), 3),
        "lsJsonMs": round(statistics.median(ls_runs), 1),
        "roostdMB": mb(roostd),
        "viewSeconds": round(statistics.median(views), 3),
        "idleSeconds": idle_seconds,
        "idleCpuMs": idle,
    }


def targets(out: dict[str, Any]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []

    def row(what: str, figure: Any, target: str, met: bool) -> None:
        rows.append({"what": what, "figure": figure, "target": target, "met": met})

    b = out.get("burst")
    if b:
        row(
            f"{b['jobs']} pi jobs at once: all complete",
            f"{b['done']} done",
            f"{b['jobs']} done",
            b["done"] == b["jobs"] and not b["workerCrashes"],
        )
        row("no OOM (kernel oom_kill count)", b["oomKills"], "0", not b["oomKills"])
        row(
            "peak RSS of roost's processes (MB)",
            b["peakMB"],
            f"<= (maxRunning + maxLivePi) x one job + roostd + spare = {b['boundMB']}",
            b["peakMB"] <= b["boundMB"],
        )
        row(
            "total time (s)",
            b["totalSeconds"],
            f"<= 1.25 x jobs / maxRunning x one job = {round(1.25 * b['idealSeconds'], 1)}",
            b["totalSeconds"] <= 1.25 * b["idealSeconds"],
        )
        row(
            f"roost run --each with {b['jobs']} tasks (s)",
            b["submitSeconds"],
            "<= 2",
            b["submitSeconds"] <= 2.0,
        )
    r = out.get("records")
    if r:
        row(f"{r['records']} records: roost ls --json (ms)", r["lsJsonMs"], "<= 100", r["lsJsonMs"] <= 100)
        row("roostd RSS (MB)", r["roostdMB"], "<= 100", r["roostdMB"] <= 100)
        row("roostd restart to a ready socket (s)", r["restartSeconds"], "<= 1", r["restartSeconds"] <= 1)
        row("roost view first screen (s)", r["viewSeconds"], "<= 1", r["viewSeconds"] <= 1)
        row(f"CPU when idle for {r['idleSeconds']:g} s (ms)", r["idleCpuMs"], "0", r["idleCpuMs"] == 0)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=200, help="pi jobs in the burst")
    ap.add_argument("--records", type=int, default=1000, help="job records for part 2")
    ap.add_argument(
        "--idle-seconds", type=float, default=60.0, help="how long part 2 watches an idle roostd's CPU"
    )
    ap.add_argument("--only", choices=("burst", "records"), help="run one part")
    args = ap.parse_args()
    out: dict[str, Any] = {
        "bench": "scale",
        "loadavgBefore": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
        "memoryMB": mb(psutil.virtual_memory().total),
    }
    started = time.monotonic()
    if args.only in (None, "burst"):
        with Lab(llm=True, prefix="roost-scale-") as lab:
            lab.use_bytecode_cache()
            lab.env.pop("PYTHONUNBUFFERED", None)
            out["burst"] = burst(lab, args.jobs)
            lab.shutdown()
    if args.only in (None, "records"):
        out["records"] = records(args.records, args.idle_seconds)
    out["loadavgAfter"] = [round(x, 2) for x in os.getloadavg()]
    out["elapsedSeconds"] = round(time.monotonic() - started, 1)
    print(json.dumps({"targets": targets(out), **out}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
