"""roost web's speed: an event reaching an open page, against `roost events --follow` in the
same run; a 2,000-entry transcript's page; CPU with many open pages and no traffic.

    .venv/bin/python benchmarks/web_bench.py [--trials 40] [--pages 50] [--idle 20]   (~1.5 min)

- **event -> page**: a fake-pi job is replied to; the clock starts when the reply is sent
  and stops when each observer sees the job `done`: the page's live stream (/live/tree, the
  server-sent event that carries the redrawn tree, read by an HTTP client: what the browser
  gets, before it paints) and `roost events --follow --json --type job.state` (the CLI's
  live view of the same change). Both read in their own thread, at once, each trial.
- **transcript**: GET /job/ID for a session of 2,000 entries (server time plus transfer).
- **idle CPU**: `--pages` live pages held open, no traffic, for `--idle` seconds: the CPU
  seconds roostd and the web process used (the target: 0).
- **load CPU**: 200 replies a minute to 4 fake-pi jobs for `--load` seconds, with the web
  and its `--pages` live pages, then again with the web stopped: roostd's CPU (% of a
  core) in each, and the difference (what the web adds to roostd).

Prints one JSON object: p50/p99 in ms for each, and the CPU seconds.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx2
import psutil

from roost.testkit.lab import Lab
from roost.testkit.webserver import WebServer


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))] * 1000, 1)


class Watch:
    """The monotonic times at which an observer saw something, with what it saw."""

    def __init__(self) -> None:
        self.seen: list[tuple[float, str]] = []
        self.cond = threading.Condition()

    def saw(self, what: str = "") -> None:
        with self.cond:
            self.seen.append((time.monotonic(), what))
            self.cond.notify_all()

    def after(self, t0: float, needle: str = "", timeout: float = 30.0) -> float:
        """Seconds from t0 to the first sighting after it that holds `needle`."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                hits = [t for t, what in self.seen if t >= t0 and needle in what]
                if hits:
                    return hits[0] - t0
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no sighting of {needle!r}")
                self.cond.wait(left)


def follow_page(web: WebServer, http: httpx2.Client, job: str, watch: Watch) -> None:
    """Each redrawn tree in which the job is done (a burst of changes may come as one)."""
    with contextlib.suppress(httpx2.HTTPError):  # the server stops at the end of the run
        for _name, data in web.live(http, "/live/tree"):
            tree = data.get("tree", "")
            if '<li class="job state-done' in tree:
                watch.saw(tree)


def follow_cli(lab: Lab, job: str, watch: Watch) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-m", "roost.cli.main", "events", "--follow", "--json",
                             "--type", "job.state", "--job", job],
                            env=dict(lab.env), cwd=lab.work, stdout=subprocess.PIPE, text=True)

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if json.loads(line).get("to") == "done":
                watch.saw()

    threading.Thread(target=read, daemon=True).start()
    return proc


def long_session(path: Path, entries: int) -> None:
    with open(path, "a", encoding="utf-8") as handle:
        for i in range(entries // 2):
            handle.write(json.dumps({"type": "message", "timestamp": "2026-12-01T10:00:00Z",
                                     "message": {"role": "user", "content": f"question {i} " * 8}}) + "\n")
            handle.write(json.dumps({"type": "message", "timestamp": "2026-12-01T10:00:01Z",
                                     "message": {"role": "assistant", "content": [
                                         {"type": "text", "text": f"answer {i} " * 20},
                                         {"type": "toolCall", "name": "bash",
                                          "arguments": {"command": f"ls {i}"}}]}}) + "\n")


def cpu(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def load_cpu(lab: Lab, jobs: list[str], daemon_pid: int, seconds: float) -> float:
    """roostd's CPU (% of a core) while 200 replies a minute go to `jobs`, round robin."""
    start, before, sent = time.monotonic(), cpu(daemon_pid), 0
    with lab.client() as client:
        while time.monotonic() - start < seconds:
            client.request("reply", job=jobs[sent % len(jobs)], text=f"load {sent}")
            sent += 1
            time.sleep(max(0.0, start + sent * 0.3 - time.monotonic()))  # the load's pace
    used = cpu(daemon_pid) - before
    return round(100 * used / (time.monotonic() - start), 2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--pages", type=int, default=50)
    parser.add_argument("--idle", type=float, default=20.0)
    parser.add_argument("--load", type=float, default=30.0)
    args = parser.parse_args(argv)
    out: dict[str, Any] = {}
    with Lab(pi="fake", settings={"reapAfterSeconds": 3600}) as lab, WebServer(lab) as web:
        job = lab.run_job("--name", "bench", "hello")
        assert lab.wait(job) == "done"
        http = web.paired()
        page, cli = Watch(), Watch()
        threading.Thread(target=follow_page, args=(web, http, job, page), daemon=True).start()
        follower = follow_cli(lab, job, cli)
        time.sleep(1.0)  # both followers connected (start-up only)
        web_ms, cli_ms = [], []
        for i in range(args.trials):
            t0 = time.monotonic()
            lab.request("reply", job=job, text=f"trial {i}")
            web_ms.append(page.after(t0, f"echo: trial {i}<"))
            cli_ms.append(cli.after(t0))
            lab.wait_settled(job)
        follower.terminate()
        out["event_to_page_ms"] = {"web_p50": pct(web_ms, 0.5), "web_p99": pct(web_ms, 0.99),
                                   "cli_follow_p50": pct(cli_ms, 0.5), "cli_follow_p99": pct(cli_ms, 0.99),
                                   "trials": args.trials}

        session = Path(lab.row(job)["session"])
        long_session(session, 2000)
        loads = []
        for _ in range(10):
            t0 = time.monotonic()
            answer = http.get(f"{web.url}/job/{job}")
            loads.append(time.monotonic() - t0)
            assert answer.status_code == 200
        out["transcript_2000_ms"] = {"p50": pct(loads, 0.5), "max": round(max(loads) * 1000, 1),
                                     "bytes": len(answer.content)}

        clients = [httpx2.Client(cookies=http.cookies) for _ in range(args.pages)]
        streams = [c.stream("GET", web.url + "/live/tree", timeout=None) for c in clients]
        for s in streams:
            s.__enter__()
        time.sleep(2.0)  # every page's first part sent
        daemon_pid, web_pid = lab.daemon_pid(), web.proc.pid
        assert daemon_pid is not None
        before = cpu(daemon_pid), cpu(web_pid)
        time.sleep(args.idle)  # the measured idle period itself
        after = cpu(daemon_pid), cpu(web_pid)
        out["idle"] = {"pages": args.pages, "seconds": args.idle,
                       "roostd_cpu_s": round(after[0] - before[0], 3),
                       "web_cpu_s": round(after[1] - before[1], 3)}
        workers = [lab.run_job("--name", f"load{i}", "hello") for i in range(4)]
        for w in workers:
            lab.wait(w)
        with_web = load_cpu(lab, workers, daemon_pid, args.load)
        for s in streams:
            s.__exit__(None, None, None)
        for c in clients:
            c.close()
        web.stop()
        without_web = load_cpu(lab, workers, daemon_pid, args.load)
        out["load_200_per_min"] = {"seconds": args.load, "roostd_cpu_pct_with_web": with_web,
                                   "roostd_cpu_pct_without_web": without_web,
                                   "added_pct": round(with_web - without_web, 2)}
    out["median_note"] = "ms from the reply sent to the job's `done` seen by each observer"
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
