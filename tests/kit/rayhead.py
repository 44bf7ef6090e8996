"""A Ray head on 127.0.0.1 for tests and benchmarks, stopped by its own temp dir.

`ray stop` stops every Ray process of the user on the machine (another person's head
included), so a head started here is stopped by what is its own: every process of the
user whose command line names its temp dir (Ray passes the session directory, which lies
under it, to each of its processes), SIGTERM then SIGKILL. Its ports are picked free, so
two heads never meet. Ray's servers bind every interface whatever `--node-ip-address`
says, so a head starts only where loopback is the only interface (a network namespace of
its own: scripts/test-ray runs the tests and the benchmark under `unshare -n`). Ray's own
CLI is run from the interpreter `python` (a venv that has `ray[default]`); nothing of Ray
is imported here.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

START_TIMEOUT = 120.0
START_ATTEMPTS = 3


def only_loopback() -> bool:
    """This process sees no network interface but loopback (its own network namespace)."""
    return all(name == "lo" for _, name in socket.if_nameindex())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RayHead:
    """`with RayHead(python) as head:` a head on 127.0.0.1; `head.address` is its Jobs API."""

    def __init__(self, python: str, num_cpus: int = 2, resources: str | None = None) -> None:
        self.python = python
        self.ray = str(Path(python).parent / "ray")
        self.num_cpus = num_cpus
        self.resources = resources
        # Short: Ray's unix sockets live under it (a socket path has at most 107 bytes).
        self.temp_dir = tempfile.mkdtemp(prefix="rh", dir="/tmp")
        self.dashboard_port = free_port()
        self.address = f"http://127.0.0.1:{self.dashboard_port}"
        self.started = 0.0

    def start(self) -> RayHead:
        if not only_loopback():
            os.rmdir(self.temp_dir)
            raise RuntimeError(
                "a Ray head binds every interface: start it where loopback is the only one "
                "(scripts/test-ray runs under `unshare -n`)"
            )
        # `ray start` on a loaded 2-core machine sometimes gives up on its own processes (a
        # clean-clone CI run: exit 1 for every test of the module): the head is the tests'
        # scaffolding, so it is started again, afresh, before the tests are failed with what
        # Ray said each time.
        said: list[str] = []
        for attempt in range(1, START_ATTEMPTS + 1):
            began = time.monotonic()
            try:
                self._start_once()
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired, TimeoutError) as exc:
                output = getattr(exc, "stderr", None) or getattr(exc, "stdout", None) or b""
                text = output.decode(errors="replace") if isinstance(output, bytes) else str(output)
                said.append(f"attempt {attempt}: {exc}\n{text[-2000:]}")
                self.stop()
                self.temp_dir = tempfile.mkdtemp(prefix="rh", dir="/tmp")
                self.dashboard_port = free_port()
                self.address = f"http://127.0.0.1:{self.dashboard_port}"
                continue
            except BaseException:
                self.stop()
                raise
            self.started = time.monotonic() - began
            return self
        raise RuntimeError("the Ray head did not start:\n" + "\n".join(said))

    def _start_once(self) -> None:
        ports = {
            "--port": free_port(),
            "--dashboard-port": self.dashboard_port,
            "--dashboard-agent-listen-port": free_port(),
            "--dashboard-agent-grpc-port": free_port(),
            "--runtime-env-agent-port": free_port(),
            "--metrics-export-port": free_port(),
            "--node-manager-port": free_port(),
            "--object-manager-port": free_port(),
            "--ray-client-server-port": free_port(),
        }
        argv = [
            self.ray,
            "start",
            "--head",
            "--node-ip-address=127.0.0.1",
            "--dashboard-host=127.0.0.1",
            "--disable-usage-stats",
            f"--temp-dir={self.temp_dir}",
            f"--num-cpus={self.num_cpus}",
            *[f"{flag}={port}" for flag, port in ports.items()],
        ]
        if self.resources:
            argv.append(f"--resources={self.resources}")
        env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
        began = time.monotonic()
        subprocess.run(
            argv, env=env, check=True, timeout=START_TIMEOUT, capture_output=True, stdin=subprocess.DEVNULL
        )
        self._wait_up(began + START_TIMEOUT)

    def _wait_up(self, deadline: float) -> None:
        while True:
            try:
                with urllib.request.urlopen(f"{self.address}/api/version", timeout=5) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"the Ray head's Jobs API did not answer at {self.address}")
            time.sleep(0.2)

    def pids(self) -> list[int]:
        """This head's processes: the user's whose command line names its temp dir."""
        found = []
        mark = self.temp_dir.encode()
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                if os.stat(f"/proc/{entry}").st_uid != os.getuid():
                    continue
                with open(f"/proc/{entry}/cmdline", "rb") as handle:
                    if mark in handle.read():
                        found.append(int(entry))
            except OSError:
                continue
        return found

    def stop(self, grace: float = 10.0) -> None:
        """Stop its processes, then remove its temp dir (its logs) once none is left."""
        self._stop_processes(grace)
        if not self.pids():
            shutil.rmtree(self.temp_dir, ignore_errors=True)

    def _stop_processes(self, grace: float) -> None:
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline and self.pids():
                time.sleep(0.1)

    def __enter__(self) -> RayHead:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
