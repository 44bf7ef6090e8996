"""Live text's speed and cost, with the real pi and the scripted model streaming slowly.

    .venv/bin/python benchmarks/live_bench.py [--tokens 40] [--jobs 10] [--pages 50]
                                              [--idle 20] [--no-browser]      (~2 min)

- **delta -> page**: one job's answer streams a token (`t00 `, `t01 `, ...) every 0.25 s
  (roost.fakellm: chunk_size 4, chunk_delay 0.25). For each token, the time from
  the scripted model writing its chunk to pi (FakeLLM.sent) to its first sighting:
  - **browser**: Debian's headless chromium holds the job page open; a MutationObserver on
    its live item notes the page's own clock (`performance.timeOrigin + now()`) when each
    token first shows in it (same machine, same clock as the model's);
  - **page_stream**: in the job page's live stream (`/live/job/ID`, a `partial` part),
    read by an HTTP client as a browser's EventSource reads it;
  - **logs -f**: in `roost logs -f`'s live line, on a pseudo-terminal (the baseline, same
    run).
  Each includes pi's own parsing and its RPC event, the worker's coalescing (80 ms; a
  delta after a quiet spell goes at once), roostd and the reader.
- **ten jobs streaming**: `--jobs` jobs stream at once (their answers held until every one
  asked, then a token every 0.1 s each, 8 s), each with its job page open: roostd's and
  the web's CPU, % of one core, over the streaming window.
- **idle pages**: `--pages` job pages open and nothing happening for `--idle` s: the CPU
  seconds of roostd and the web.

Prints one JSON object. ROOST_PI (and ROOST_NODE) choose the pi, as for the tests.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pty
import re
import select
import subprocess
import sys
import threading
import time
from typing import Any

import httpx2
import psutil
from kit.browser import chromium
from kit.lab import Lab
from kit.webserver import WebServer

from roost.fakellm import always, text

TOKEN = re.compile(rb"t(\d\d)\b")
OBSERVE = """
window.__tokens = {};
const live = document.getElementById("partial");
new MutationObserver(() => {
  const now = performance.timeOrigin + performance.now();
  for (const m of live.textContent.matchAll(/t(\\d\\d)\\b/g)) {
    if (!(m[1] in window.__tokens)) window.__tokens[m[1]] = now;
  }
}).observe(live, {childList: true, subtree: true, characterData: true});
"""
"""In the job page: the page's own clock (epoch ms) when each token first shows in the live item."""

COMPLETION = re.compile(rb'"id":\s*"([^"]+)"')


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))] * 1000, 1)


def cpu(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


class Sightings:
    """The first time each token was seen by one observer."""

    def __init__(self) -> None:
        self.first: dict[int, float] = {}

    def saw(self, data: bytes) -> None:
        now = time.time()
        for match in TOKEN.finditer(data):
            self.first.setdefault(int(match.group(1)), now)


def follow_page(
    web: WebServer, http: httpx2.Client, job: str, seen: Sightings, ready: threading.Event
) -> None:
    with contextlib.suppress(httpx2.HTTPError):
        for _name, data in web.live(http, f"/live/job/{job}"):
            ready.set()
            if "partial" in data:
                seen.saw(data["partial"].encode())


def follow_logs(lab: Lab, job: str, seen: Sightings, stop: threading.Event) -> subprocess.Popen[bytes]:
    primary, secondary = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "roost.cli", "logs", "-f", job],
        env=dict(lab.env),
        cwd=lab.work,
        stdin=secondary,
        stdout=secondary,
        stderr=secondary,
    )
    os.close(secondary)

    def read() -> None:
        tail = b""
        while not stop.is_set():
            if not select.select([primary], [], [], 0.2)[0]:
                continue
            try:
                chunk = os.read(primary, 65536)
            except OSError:
                return
            if not chunk:
                return
            seen.saw(tail + chunk)
            tail = chunk[-4:]  # a token cut between two reads
        os.close(primary)

    threading.Thread(target=read, daemon=True).start()
    return proc


def sent_times(sent: list[tuple[float, bytes]], since: float) -> dict[int, float]:
    out: dict[int, float] = {}
    for at, chunk in sent:
        if at >= since:
            for match in TOKEN.finditer(chunk):
                out.setdefault(int(match.group(1)), at)
    return out


def delta_to_page(
    lab: Lab, web: WebServer, http: httpx2.Client, tokens: int, driver: Any = None
) -> dict[str, Any]:
    llm = lab.llm
    answer = " ".join(f"t{i:02d}" for i in range(tokens))
    llm.add(always(), text(answer, chunk_size=4, chunk_delay=0.25, delay=6.0), times=1)
    llm.sent = []
    start = time.time()
    job = lab.run_job("--name", "streamer", "stream something")
    page, logs, stop, ready = Sightings(), Sightings(), threading.Event(), threading.Event()
    threading.Thread(target=follow_page, args=(web, http, job, page, ready), daemon=True).start()
    follower = follow_logs(lab, job, logs, stop)
    browser = Sightings()
    if driver is not None:
        driver.get(f"{web.url}/job/{job}")
        driver.execute_script(OBSERVE)
    ready.wait(30)
    assert lab.wait(job, timeout=120) == "done"
    time.sleep(0.5)
    stop.set()
    follower.terminate()
    follower.wait(10)
    sent = sent_times(llm.sent, start)
    if driver is not None:
        browser.first = {int(k): v / 1000 for k, v in driver.execute_script("return window.__tokens").items()}
    out: dict[str, Any] = {"tokens": len(sent)}
    for name, seen in (("browser", browser), ("page_stream", page), ("logs_f", logs)):
        lat = [seen.first[k] - at for k, at in sent.items() if k in seen.first]
        out[name] = (
            {"seen": len(lat), "p50_ms": pct(lat, 0.5), "p99_ms": pct(lat, 0.99), "max_ms": pct(lat, 1.0)}
            if lat
            else {"seen": 0}
        )
    return out


def many_streaming(lab: Lab, web: WebServer, http: httpx2.Client, jobs: int) -> dict[str, Any]:
    llm = lab.llm
    answer = " ".join(f"t{i:02d}" for i in range(80))
    go = threading.Event()  # every answer held until all the jobs asked: they stream at once
    llm.add(always(), text(answer, chunk_size=4, chunk_delay=0.1, hold=go), times=jobs)
    llm.sent = []
    asked = len(llm.requests)
    ids = [lab.run_job("--name", f"many-{n}", f"stream {n}") for n in range(jobs)]
    clients = [httpx2.Client(cookies=http.cookies) for _ in ids]
    for job, client in zip(ids, clients, strict=True):
        threading.Thread(
            target=follow_page, args=(web, client, job, Sightings(), threading.Event()), daemon=True
        ).start()
    daemon_pid, web_pid = lab.daemon_pid(), web.proc.pid
    assert daemon_pid is not None
    deadline = time.monotonic() + 180
    while len(llm.requests) - asked < jobs and time.monotonic() < deadline:
        time.sleep(0.05)  # the benchmark's own wait for every job's pi to ask
    time.sleep(1.0)  # their pages connected
    t0, before = time.monotonic(), (cpu(daemon_pid), cpu(web_pid))
    go.set()
    sums = [lab.wait(job, timeout=180) for job in ids]
    wall = time.monotonic() - t0
    after = cpu(daemon_pid), cpu(web_pid)
    streams = sum(1 for _, c in llm.sent if b"t79" in c)
    spans: dict[bytes, list[float]] = {}
    for at, chunk in llm.sent:
        ident = COMPLETION.search(chunk)
        if ident and TOKEN.search(chunk):
            spans.setdefault(ident.group(1), []).append(at)
    edges = sorted([(min(v), 1) for v in spans.values()] + [(max(v), -1) for v in spans.values()])
    level = most = 0
    for _, step in edges:
        level += step
        most = max(most, level)
    for client in clients:
        client.close()
    return {
        "jobs": jobs,
        "done": sums.count("done"),
        "streams_completed": streams,
        "most_streaming_at_once": most,
        "seconds": round(wall, 2),
        "streams_start_spread_s": round(
            max(min(v) for v in spans.values()) - min(min(v) for v in spans.values()), 2
        ),
        "roostd_pct_of_a_core": round(100 * (after[0] - before[0]) / wall, 2),
        "web_pct_of_a_core": round(100 * (after[1] - before[1]) / wall, 2),
    }


def idle_pages(lab: Lab, web: WebServer, http: httpx2.Client, pages: int, idle: float) -> dict[str, Any]:
    job = lab.run_job("--name", "idle", "hello")
    lab.wait(job, timeout=120)
    clients = [httpx2.Client(cookies=http.cookies) for _ in range(pages)]
    readies = []
    for client in clients:
        ready = threading.Event()
        readies.append(ready)
        threading.Thread(target=follow_page, args=(web, client, job, Sightings(), ready), daemon=True).start()
    for ready in readies:
        ready.wait(30)
    time.sleep(1.0)
    daemon_pid, web_pid = lab.daemon_pid(), web.proc.pid
    assert daemon_pid is not None
    before = cpu(daemon_pid), cpu(web_pid)
    time.sleep(idle)
    after = cpu(daemon_pid), cpu(web_pid)
    for client in clients:
        client.close()
    return {
        "pages": pages,
        "seconds": idle,
        "roostd_cpu_s": round(after[0] - before[0], 3),
        "web_cpu_s": round(after[1] - before[1], 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=40)
    parser.add_argument("--jobs", type=int, default=10)
    parser.add_argument("--pages", type=int, default=50)
    parser.add_argument("--idle", type=float, default=20.0)
    parser.add_argument(
        "--no-browser", action="store_true", help="without chromium: the page's stream and logs -f only"
    )
    args = parser.parse_args(argv)
    out: dict[str, Any] = {}
    with contextlib.ExitStack() as stack:
        lab = stack.enter_context(
            Lab(llm=True, settings={"reapAfterSeconds": 3600, "maxRunning": 2 * args.jobs})
        )
        web = stack.enter_context(WebServer(lab))
        driver = None if args.no_browser else stack.enter_context(chromium())
        if driver is not None:
            driver.get(lab.roost_ok("web", "pair").strip())  # paired, a link of its own
        http = web.paired()
        out["delta_to_visible"] = delta_to_page(lab, web, http, args.tokens, driver)
        out["many_streaming"] = many_streaming(lab, web, http, args.jobs)
        out["idle_pages"] = idle_pages(lab, web, http, args.pages, args.idle)
        out["load_1m"] = round(os.getloadavg()[0], 2)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
