"""Benchmark roost.mailbox against the floor and persist-queue; prints one JSON object.

    .venv/bin/python benchmarks/mailbox_bench.py [--items N] [--samples M] [--dir D]

Measured in one run, on the same file system:

- post throughput: `Mailbox.post()` in a loop, against the floor: a bare loop of
  create(O_EXCL) + write + fsync + rename + fsync(dir). The two run in alternating
  chunks so that load from elsewhere on the machine hits both alike.
- wake-up latency: from just before `post()` (floor: before the write) to the moment a
  consumer in another process has the item: `Mailbox.watch()` for roost, a raw ctypes
  inotify read for the floor. Samples alternate between the two; the producer waits
  for each answer before the next post, so nothing queues.
- round trip: N posts while a consumer process watches and acknowledges (cumulatively,
  once per batch it finds, as a worker does; also one ack per item), against
  persist-queue's SQLiteAckQueue (WAL, synchronous=FULL, auto_commit) put -> get -> ack
  with a producer and a consumer thread, and against the floor of any Maildir-style
  queue: the bare publishing loop plus an inotify consumer that renames to cur/ and
  fsyncs both directories once per batch.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

IN_MOVED_TO = 0x00000080
SENDER = {"id": "a1b2c3d4", "name": "bench", "relation": "child"}
TEXT = "Please look at the failing test in tests/test_checkout.py and report back. " * 2


def now() -> float:
    """CLOCK_MONOTONIC: one clock for every process on the machine."""
    return time.clock_gettime(time.CLOCK_MONOTONIC)


def _box(path: Path, **caps: int):
    from roost.mailbox import Mailbox

    return Mailbox(path, max_replies=caps.get("cap", 1 << 30), max_agent=caps.get("cap", 1 << 30))


def _item_bytes(seq: int) -> bytes:
    line = json.dumps(
        {"seq": seq, "kind": "message", "from": SENDER, "text": TEXT, "created": "2026-11-30T11:20:00.123Z"},
        separators=(",", ":"),
    )
    return (line + "\n").encode()


class Floor:
    """The bare publishing loop roost is measured against."""

    def __init__(self, root: Path) -> None:
        self.tmp, self.new = root / "tmp", root / "new"
        self.tmp.mkdir(parents=True)
        self.new.mkdir()
        (root / "cur").mkdir()
        self.seq = 0
        self.dir_fd = os.open(self.new, os.O_RDONLY | os.O_DIRECTORY)

    def publish(self) -> int:
        self.seq += 1
        name = f"{self.seq:012d}.json"
        tmp = f"{self.tmp}/{name}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, _item_bytes(self.seq))
        os.fsync(fd)
        os.close(fd)
        os.rename(tmp, f"{self.new}/{name}")
        os.fsync(self.dir_fd)
        return self.seq


# -- consumers (run as: mailbox_bench.py --consume MODE DIR) ---------------------------


def _inotify_names(directory: str):
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_CLOEXEC)
    if fd < 0 or libc.inotify_add_watch(fd, os.fsencode(directory), IN_MOVED_TO) < 0:
        raise OSError(ctypes.get_errno(), "inotify")
    yield [], 0.0
    while True:
        data = os.read(fd, 65536)
        received = now()
        names, offset = [], 0
        while offset < len(data):
            _wd, _mask, _cookie, length = struct.unpack_from("iIII", data, offset)
            names.append(data[offset + 16 : offset + 16 + length].rstrip(b"\0").decode())
            offset += 16 + length
        yield names, received


def consume(mode: str, directory: str, target: int) -> None:
    out = sys.stdout
    if mode in ("floor", "floor-roundtrip"):
        events = _inotify_names(directory)
        next(events)
        out.write("ready\n")
        out.flush()
        cur = os.path.join(os.path.dirname(directory), "cur")
        for names, received in events:
            if mode == "floor":
                out.write("".join(f"{int(name[:12])} {received!r}\n" for name in names))
                out.flush()
                continue
            for name in names:  # the floor of an ack: rename, then fsync both dirs once
                os.rename(os.path.join(directory, name), os.path.join(cur, name))
            for path in (cur, directory):
                dir_fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
                os.fsync(dir_fd)
                os.close(dir_fd)
            if names and int(max(names)[:12]) >= target:
                out.write(f"done {now()!r}\n")
                out.flush()
                return
    box = _box(Path(directory))
    with box.watch() as watcher:
        out.write("ready\n")
        out.flush()
        if mode == "latency":
            for item in watcher:
                received = now()
                box.ack(item.seq)
                out.write(f"{item.seq} {received!r}\n")
                out.flush()
        elif mode in ("roundtrip", "roundtrip-each"):
            done = 0
            while done < target:
                first = watcher.next_item(None)
                if first is None:
                    break
                if mode == "roundtrip":
                    batch = [first, *watcher.drain()]
                    box.ack(batch[-1].seq)
                    done = batch[-1].seq
                else:
                    box.ack(first.seq)
                    done = first.seq
            out.write(f"done {now()!r}\n")
            out.flush()


def start_consumer(mode: str, directory: Path, target: int = 0) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, __file__, "--consume", mode, str(directory), "--items", str(target)],
        stdout=subprocess.PIPE,
        text=True,
        bufsize=1,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if line.strip() != "ready":
        raise RuntimeError(f"{mode} consumer failed to start: {line!r}")
    return proc


# -- measurements ------------------------------------------------------------------


def post_throughput(root: Path, items: int, rounds: int = 8) -> dict[str, float]:
    box = _box(root / "roost-post")
    floor = Floor(root / "floor-post")
    roost_time = floor_time = 0.0
    chunk = max(1, items // rounds)
    done = 0
    while done < items:
        n = min(chunk, items - done)
        started = time.perf_counter()
        for _ in range(n):
            box.post(kind="message", text=TEXT, sender=SENDER)
        roost_time += time.perf_counter() - started
        started = time.perf_counter()
        for _ in range(n):
            floor.publish()
        floor_time += time.perf_counter() - started
        done += n
    return {"roost": items / roost_time, "floor": items / floor_time}


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def wake_latency(root: Path, samples: int) -> dict[str, dict[str, float]]:
    box = _box(root / "roost-wake")
    floor = Floor(root / "floor-wake")
    roost_consumer = start_consumer("latency", box.path)
    floor_consumer = start_consumer("floor", floor.new)
    results: dict[str, list[float]] = {"roost": [], "floor": []}
    try:
        for index in range(samples + 10):  # the first 10 warm both paths up
            started = now()
            seq = box.post(kind="message", text=TEXT, sender=SENDER).seq
            got, received = roost_consumer.stdout.readline().split()  # type: ignore[union-attr]
            assert int(got) == seq
            if index >= 10:
                results["roost"].append((float(received) - started) * 1000)
            started = now()
            seq = floor.publish()
            got, received = floor_consumer.stdout.readline().split()  # type: ignore[union-attr]
            assert int(got) == seq
            if index >= 10:
                results["floor"].append((float(received) - started) * 1000)
    finally:
        for proc in (roost_consumer, floor_consumer):
            proc.kill()
            proc.wait()
    return {
        name: {
            "p50_ms": statistics.median(values),
            "p99_ms": _percentile(values, 0.99),
            "mean_ms": statistics.fmean(values),
        }
        for name, values in results.items()
    }


def roost_round_trip(root: Path, items: int, mode: str) -> float:
    box = _box(root / f"roost-{mode}")
    consumer = start_consumer(mode, box.path, items)
    try:
        started = now()
        for _ in range(items):
            box.post(kind="message", text=TEXT, sender=SENDER)
        line = consumer.stdout.readline().split()  # type: ignore[union-attr]
        if not line or line[0] != "done":
            raise RuntimeError(f"round-trip consumer failed: {line!r}")
        elapsed = float(line[1]) - started
    finally:
        consumer.kill()
        consumer.wait()
    if box.pending():
        raise RuntimeError("round trip left items pending")
    return items / elapsed


def floor_round_trip(root: Path, items: int) -> float:
    floor = Floor(root / "floor-roundtrip")
    consumer = start_consumer("floor-roundtrip", floor.new, items)
    try:
        started = now()
        for _ in range(items):
            floor.publish()
        line = consumer.stdout.readline().split()  # type: ignore[union-attr]
        if not line or line[0] != "done":
            raise RuntimeError(f"floor round-trip consumer failed: {line!r}")
        return items / (float(line[1]) - started)
    finally:
        consumer.kill()
        consumer.wait()


def persist_queue_round_trip(root: Path, items: int) -> float:
    from persistqueue import SQLiteAckQueue

    queue = SQLiteAckQueue(str(root / "pq"), multithreading=True, auto_commit=True)
    q: Any = queue  # its connections are private attributes (typed None in the class)
    for conn in {id(q._putter): q._putter, id(q._getter): q._getter}.values():
        conn.execute("PRAGMA synchronous=FULL")
    payload = {"kind": "message", "from": SENDER, "text": TEXT}
    finished: list[float] = []

    def consumer() -> None:
        for _ in range(items):
            item = queue.get(block=True)
            queue.ack(item)
        finished.append(now())

    thread = threading.Thread(target=consumer)
    thread.start()
    started = now()
    for seq in range(1, items + 1):
        queue.put({**payload, "seq": seq})
    thread.join()
    if queue.acked_count() != items:
        raise RuntimeError("persist-queue did not ack every item")
    queue.close()
    return items / (finished[0] - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=2000, help="items per throughput run")
    parser.add_argument("--samples", type=int, default=300, help="wake-up latency samples")
    parser.add_argument("--dir", help="where to work (default: a temp dir; keep it on disk)")
    parser.add_argument("--consume", nargs=2, metavar=("MODE", "DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.consume:
        consume(args.consume[0], args.consume[1], args.items)
        return

    root = Path(tempfile.mkdtemp(prefix="mailbox-bench-", dir=args.dir))
    try:
        posts = post_throughput(root, args.items)
        wake = wake_latency(root, args.samples)
        round_trip = roost_round_trip(root, args.items, "roundtrip")
        round_trip_each = roost_round_trip(root, args.items, "roundtrip-each")
        round_trip_floor = floor_round_trip(root, args.items)
        pq = persist_queue_round_trip(root, args.items)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    ratios = {
        "post_vs_floor": posts["roost"] / posts["floor"],
        "wake_p50_vs_floor": wake["roost"]["p50_ms"] / wake["floor"]["p50_ms"],
        "wake_p99_vs_floor": wake["roost"]["p99_ms"] / wake["floor"]["p99_ms"],
        "round_trip_vs_persist_queue": round_trip / pq,
        "round_trip_ack_each_vs_persist_queue": round_trip_each / pq,
        "round_trip_vs_floor": round_trip / round_trip_floor,
        "floor_round_trip_vs_persist_queue": round_trip_floor / pq,
    }
    report = {
        "items": args.items,
        "wake_samples": args.samples,
        "cpus": os.cpu_count(),
        "load_avg_1m": os.getloadavg()[0],
        "post_items_per_s": {"roost": posts["roost"], "floor": posts["floor"]},
        "wake_latency_ms": wake,
        "round_trip_items_per_s": {
            "roost_batched_acks": round_trip,
            "roost_ack_each": round_trip_each,
            "floor_rename_ack": round_trip_floor,
            "persist_queue_sqlite_ack": pq,
        },
        "ratios": ratios,
        "targets": {
            "post_vs_floor >= 0.8": ratios["post_vs_floor"] >= 0.8,
            "wake_p50_vs_floor <= 2": ratios["wake_p50_vs_floor"] <= 2,
            "round_trip_vs_persist_queue > 1": ratios["round_trip_vs_persist_queue"] > 1,
        },
    }
    print(json.dumps(_rounded(report), indent=2))


def _rounded(value: object) -> object:
    if isinstance(value, float):
        return round(value, 3)
    if isinstance(value, dict):
        return {key: _rounded(inner) for key, inner in value.items()}
    return value


if __name__ == "__main__":
    main()
