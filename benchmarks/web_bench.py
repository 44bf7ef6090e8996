"""roost web's speed: an event reaching an open page in a real browser, against `roost events
--follow` in the same run; a 2,000-entry transcript's page; CPU with many open pages and no
traffic, and under load.

    .venv/bin/python benchmarks/web_bench.py [--trials 40] [--pages 50] [--idle 30] [--load 30]
                                             [--no-browser]        (~3.5 min)

- **event -> page**: a fake-pi job is replied to; each observer notes when it sees the job
  `done` (its summary `echo: trial N`):
  - **browser**: Debian's headless chromium holds the job tree (`/`) open; a
    MutationObserver on the live part notes the time (`performance.timeOrigin + now()`)
    of the DOM update that shows it, and the next animation frame's (the frame that paints
    it). Same machine, same clock as the benchmark.
  - **stream**: the page's server-sent event read by an HTTP client (before any browser).
  - **cli**: `roost events --follow --json --type job.state` (the baseline).
  Each is timed from the reply sent, and from the `job.state` event's own `time` (ms).
- **transcript**: GET /job/ID for a session of 2,000 entries (server time plus transfer).
- **idle pages**: 1, 10 and `--pages` live pages (HTTP streams, each read by a client of
  its own: the pages of a done, a waiting and a failed job, the list and the inbox, round
  robin) and the browser's page held open, no traffic, for `--idle` seconds (30 by default,
  the target's window): the CPU seconds roostd and the web process used (the target: under
  1 % of a core together), and, with the most pages open, how soon a job page wakes when its
  session file grows (a line appended) and when its row changes (a reply) (the target:
  100 ms).
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
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx2
import psutil
from kit.browser import chromium
from kit.lab import Lab
from kit.webserver import WebServer

OBSERVE = """
window.__seen = []; window.__waiters = [];
const tree = document.getElementById("tree");
new MutationObserver(() => {
  const dom = performance.timeOrigin + performance.now();
  const html = tree.innerHTML;
  requestAnimationFrame(() => {
    window.__seen.push({dom: dom, frame: performance.timeOrigin + performance.now(), html: html});
    window.__waiters = window.__waiters.filter((check) => !check());
  });
}).observe(tree, {childList: true, subtree: true, characterData: true});
"""
"""The page's own clock at each update of the live tree: the DOM change, then its frame."""

SIGHTING = """
const [needle, since, done] = arguments;
const check = () => {
  const hit = window.__seen.find((s) => s.dom >= since && s.html.includes(needle)
                                        && s.html.includes('<li class="job state-done'));
  if (hit) done({dom: hit.dom, frame: hit.frame});
  return Boolean(hit);
};
if (!check()) window.__waiters.push(check);
"""
"""Wait (in the page, no polling) for the first update since `since` (epoch ms) holding `needle`."""


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))] * 1000, 1)


class Watch:
    """The wall-clock times (epoch seconds: the browser's clock is the same) at which an
    observer saw something, with what it saw."""

    def __init__(self) -> None:
        self.seen: list[tuple[float, str]] = []
        self.cond = threading.Condition()

    def saw(self, what: str = "") -> None:
        with self.cond:
            self.seen.append((time.time(), what))
            self.cond.notify_all()

    def after(self, t0: float, needle: str = "", timeout: float = 30.0) -> tuple[float, str]:
        """The first sighting at or after t0 that holds `needle`: (its time, what was seen)."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                hits = [(t, what) for t, what in self.seen if t >= t0 and needle in what]
                if hits:
                    return hits[0]
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no sighting of {needle!r}")
                self.cond.wait(left)


def epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def follow_page(web: WebServer, http: httpx2.Client, job: str, watch: Watch) -> None:
    """Each redrawn tree in which the job is done (a burst of changes may come as one)."""
    with contextlib.suppress(httpx2.HTTPError):  # the server stops at the end of the run
        for _name, data in web.live(http, "/live/tree"):
            tree = data.get("tree", "")
            if '<li class="job state-done' in tree:
                watch.saw(tree)


def follow_path(web: WebServer, http: httpx2.Client, path: str, watch: Watch) -> None:
    """Every event of the live stream `path`, as its name and data."""
    with contextlib.suppress(httpx2.HTTPError):  # closed at the end of its round
        for name, data in web.live(http, path):
            watch.saw(f"{name} {json.dumps(data)}")


def follow_cli(lab: Lab, job: str, watch: Watch) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "roost.cli.main",
            "events",
            "--follow",
            "--json",
            "--type",
            "job.state",
            "--job",
            job,
        ],
        env=dict(lab.env),
        cwd=lab.work,
        stdout=subprocess.PIPE,
        text=True,
    )

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            event = json.loads(line)
            if event.get("to") == "done":
                watch.saw(str(event.get("time") or ""))

    threading.Thread(target=read, daemon=True).start()
    return proc


def long_session(path: Path, entries: int) -> None:
    with open(path, "a", encoding="utf-8") as handle:
        for i in range(entries // 2):
            handle.write(
                json.dumps(
                    {
                        "type": "message",
                        "timestamp": "2026-12-01T10:00:00Z",
                        "message": {"role": "user", "content": f"question {i} " * 8},
                    }
                )
                + "\n"
            )
            handle.write(
                json.dumps(
                    {
                        "type": "message",
                        "timestamp": "2026-12-01T10:00:01Z",
                        "message": {
                            "role": "assistant",
                            "content": [
                                {"type": "text", "text": f"answer {i} " * 20},
                                {"type": "toolCall", "name": "bash", "arguments": {"command": f"ls {i}"}},
                            ],
                        },
                    }
                )
                + "\n"
            )


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


def event_trials(
    lab: Lab, web: WebServer, http: httpx2.Client, job: str, trials: int, driver: Any
) -> dict[str, Any]:
    """The job replied to `trials` times; when each observer saw it done (see the doc)."""
    stream, cli = Watch(), Watch()
    threading.Thread(target=follow_page, args=(web, http, job, stream), daemon=True).start()
    follower = follow_cli(lab, job, cli)
    if driver is not None:
        driver.get(lab.roost_ok("web", "pair").strip())  # paired (a link of its own), on the tree
        driver.execute_script(OBSERVE)
        driver.set_script_timeout(30)
    time.sleep(1.0)  # every follower connected (start-up only)
    ms: dict[str, list[float]] = {
        k: []
        for k in ("browser_dom", "browser_frame", "stream", "cli", "event_to_browser_dom", "event_to_cli")
    }
    for i in range(trials):
        needle = f"echo: trial {i}<"
        t0 = time.time()
        lab.request("reply", job=job, text=f"trial {i}")
        seen_at, _ = stream.after(t0, needle)
        cli_at, event_time = cli.after(t0)
        ms["stream"].append(seen_at - t0)
        ms["cli"].append(cli_at - t0)
        ms["event_to_cli"].append(cli_at - epoch(event_time))
        if driver is not None:
            hit = driver.execute_async_script(SIGHTING, needle, t0 * 1000)
            ms["browser_dom"].append(hit["dom"] / 1000 - t0)
            ms["browser_frame"].append(hit["frame"] / 1000 - t0)
            ms["event_to_browser_dom"].append(hit["dom"] / 1000 - epoch(event_time))
        lab.wait_settled(job)
    follower.terminate()
    out: dict[str, Any] = {"trials": trials}
    for key, values in ms.items():
        if values:
            out[key] = {"p50": pct(values, 0.5), "p99": pct(values, 0.99)}
    return out


def transcript_page(web: WebServer, http: httpx2.Client, lab: Lab, job: str) -> dict[str, Any]:
    long_session(Path(lab.row(job)["session"]), 2000)
    loads = []
    for _ in range(10):
        t0 = time.monotonic()
        answer = http.get(f"{web.url}/job/{job}")
        loads.append(time.monotonic() - t0)
        assert answer.status_code == 200
    return {"p50": pct(loads, 0.5), "max": round(max(loads) * 1000, 1), "bytes": len(answer.content)}


def idle_pages(
    lab: Lab, web: WebServer, http: httpx2.Client, counts: list[int], idle: float
) -> dict[str, Any]:
    """The idle cost of `counts` open pages, each count in turn: job pages (done, waiting,
    failed, reaped), the list and the inbox, round robin, every stream read by a client of its
    own and nothing happening for `idle` s; then, with the most pages open, how soon a page
    wakes when its job's session file grows (a line appended, as pi appends an answer) and
    when its row changes (a reply that starts a run)."""
    done = lab.run_job("--name", "idle-done", "hello")
    waiting = lab.run_job("--name", "idle-waiting", "[[ask]] colours")
    failed = lab.run_job("--shell", "--name", "idle-failed", "--", "sh", "-c", "exit 3")
    assert lab.wait(done) == "done"
    lab.wait_state(waiting, "needs_input")
    lab.wait_state(failed, "failed")
    kinds = [f"/live/job/{done}", f"/live/job/{waiting}", f"/live/job/{failed}", "/live/tree", "/live/inbox"]
    daemon_pid, web_pid = lab.daemon_pid(), web.proc.pid
    assert daemon_pid is not None
    out: dict[str, Any] = {
        "kinds": ["job done", "job waiting", "job failed", "list", "inbox"],
        "seconds": idle,
        "by_pages": {},
    }
    for count in counts:
        pages = [Watch() for _ in range(count)]
        clients = [httpx2.Client(cookies=http.cookies) for _ in range(count)]
        for i, (watch, client) in enumerate(zip(pages, clients, strict=True)):
            threading.Thread(
                target=follow_path, args=(web, client, kinds[i % len(kinds)], watch), daemon=True
            ).start()
        for watch in pages:
            watch.after(0.0)  # its first part came
        time.sleep(1.0)  # the first reads done
        before = cpu(daemon_pid), cpu(web_pid)
        time.sleep(idle)  # the measured idle period itself
        after = cpu(daemon_pid), cpu(web_pid)
        out["by_pages"][str(count)] = {
            "roostd_cpu_s": round(after[0] - before[0], 3),
            "web_cpu_s": round(after[1] - before[1], 3),
            "cpu_pct_of_a_core": round(100 * (after[0] - before[0] + after[1] - before[1]) / idle, 2),
        }
        if count == max(counts):
            out["wake_ms"] = wake_trials(lab, pages[0], done)
        for client in clients:
            client.close()
    return out


def wake_trials(lab: Lab, page: Watch, job: str, trials: int = 10) -> dict[str, Any]:
    """From a line appended to `job`'s session file to its open page's `append`; from a
    reply (the row changes) to the page's next `parts`."""
    session = Path(lab.row(job)["session"])
    grew, row = [], []
    for i in range(trials):
        t0 = time.time()
        with open(session, "a", encoding="utf-8") as handle:
            handle.write(
                json.dumps(
                    {
                        "type": "message",
                        "timestamp": "2026-12-06T10:00:00Z",
                        "message": {"role": "user", "content": f"grew {i}"},
                    }
                )
                + "\n"
            )
        grew.append(page.after(t0, f"grew {i}")[0] - t0)
    for i in range(trials):
        t0 = time.time()
        lab.request("reply", job=job, text=f"wake {i}")
        row.append(page.after(t0, "parts ")[0] - t0)
        lab.wait_settled(job)
    return {
        "session_grew": {"p50": pct(grew, 0.5), "max": round(max(grew) * 1000, 1)},
        "row_changed": {"p50": pct(row, 0.5), "max": round(max(row) * 1000, 1)},
    }


def load(lab: Lab, web: WebServer, http: httpx2.Client, pages: int, seconds: float) -> dict[str, Any]:
    """roostd's CPU under 200 replies a minute, with the web and `pages` list pages open, then
    with the web stopped."""
    clients = [httpx2.Client(cookies=http.cookies) for _ in range(pages)]
    streams = [c.stream("GET", web.url + "/live/tree", timeout=None) for c in clients]
    for s in streams:
        s.__enter__()
    daemon_pid = lab.daemon_pid()
    assert daemon_pid is not None
    workers = [lab.run_job("--name", f"load{i}", "hello") for i in range(4)]
    for w in workers:
        lab.wait(w)
    with_web = load_cpu(lab, workers, daemon_pid, seconds)
    for s in streams:
        s.__exit__(None, None, None)
    for c in clients:
        c.close()
    web.stop()
    without_web = load_cpu(lab, workers, daemon_pid, seconds)
    return {
        "seconds": seconds,
        "roostd_cpu_pct_with_web": with_web,
        "roostd_cpu_pct_without_web": without_web,
        "added_pct": round(with_web - without_web, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--pages", type=int, default=50)
    parser.add_argument("--idle", type=float, default=30.0, help="the idle window, seconds")
    parser.add_argument("--load", type=float, default=30.0)
    parser.add_argument(
        "--no-browser", action="store_true", help="without chromium: the page's stream and the CLI only"
    )
    args = parser.parse_args(argv)
    out: dict[str, Any] = {}
    with contextlib.ExitStack() as stack:
        lab = stack.enter_context(Lab(pi="fake", settings={"reapAfterSeconds": 3600}))
        web = stack.enter_context(WebServer(lab))
        driver = None if args.no_browser else stack.enter_context(chromium())
        job = lab.run_job("--name", "bench", "hello")
        assert lab.wait(job) == "done"
        http = web.paired()
        out["event_to_page_ms"] = event_trials(lab, web, http, job, args.trials, driver)
        out["transcript_2000_ms"] = transcript_page(web, http, lab, job)
        counts = sorted({1, min(10, args.pages), args.pages})
        out["idle_pages"] = idle_pages(lab, web, http, counts, args.idle)
        out["load_200_per_min"] = load(lab, web, http, args.pages, args.load)
    out["note"] = (
        "ms from the reply sent to the job's `done` seen by each observer; event_to_*: "
        "from the job.state event's own time (ms resolution)"
    )
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
