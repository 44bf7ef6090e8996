"""etc/supervisord.conf with the real supervisord: roostd is restarted, the jobs survive.

supervisord (from the venv's `supervisor` package) runs roostd from the shipped config with
its paths from the environment; a real pi job (its model response held, so a run is in
flight) and a shell job run under it; roostd is SIGKILLed; supervisord must start a new
one that re-adopts both workers without restarting them.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from kit.lab import Lab
from kit.matchers import user_messages
from kit.wait import kill, pi_under, pid_alive, wait_until

from roost.fakellm import FakeLLM, last_user_contains, text

pytestmark = [pytest.mark.timeout(150), pytest.mark.usefixtures("real_pi")]

REPO = Path(__file__).resolve().parents[2]
CONF = REPO / "etc" / "supervisord.conf"
BIN = Path(sys.executable).parent


class Supervisor:
    """supervisord -n with etc/supervisord.conf, its paths in `sv_dir`."""

    def __init__(self, lab: Lab, sv_dir: Path) -> None:
        sv_dir.mkdir(parents=True, exist_ok=True)
        self.dir = sv_dir
        self.env = dict(
            lab.env,
            ROOST_BIN=str(BIN / "roost"),
            ROOST_SUPERVISOR_DIR=str(sv_dir),
        )
        self.output = open(sv_dir / "supervisord.out", "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [str(BIN / "supervisord"), "-n", "-c", str(CONF)],
            env=self.env,
            cwd=sv_dir,
            stdin=subprocess.DEVNULL,
            stdout=self.output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def ctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(BIN / "supervisorctl"), "-c", str(CONF), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=30,
        )

    def roostd_pid(self) -> int | None:
        """The pid supervisorctl reports for a RUNNING roostd."""
        out = self.ctl("status", "roostd").stdout
        if "RUNNING" not in out or "pid " not in out:
            return None
        return int(out.split("pid ", 1)[1].split(",", 1)[0])

    def log(self) -> str:
        parts = []
        for name in ("supervisord.out", "roostd.log"):
            path = self.dir / name
            if path.exists():
                parts.append(f"--- {name} ---\n{path.read_text(errors='replace')[-4000:]}")
        return "\n".join(parts)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.output.close()


@pytest.fixture(scope="module", autouse=True)
def _tools_installed() -> None:
    for tool in ("supervisord", "supervisorctl", "roost"):
        if not (BIN / tool).exists():
            pytest.fail(f"{BIN / tool} is missing: pip install -e '.[test]'", pytrace=False)


def test_supervisord_restarts_a_killed_roostd_and_jobs_survive(tmp_path: Path, llm: FakeLLM) -> None:
    lab = Lab(llm=llm)
    sv = Supervisor(lab, tmp_path / "sv")
    hold = threading.Event()
    llm.add(last_user_contains("TASK-SV"), text("ANSWER-SV-1", hold=hold))
    llm.add(last_user_contains("REPLY-SV"), text("ANSWER-SV-2"))
    try:
        # supervisord started roostd: it answers (`daemon status` never starts one itself).
        status = wait_until(
            lambda: (s := lab.daemon_status())["running"] and s, 30, "roostd under supervisord to answer"
        )
        first_pid = status["pid"]
        # supervisord calls it RUNNING only after `startsecs` (1 s) of life.
        wait_until(
            lambda: sv.roostd_pid() == first_pid, 15, f"supervisord to report roostd pid {first_pid} RUNNING"
        )
        assert status["socket"] == str(lab.roost_home / "roostd.sock")

        pi_job = lab.run_job("TASK-SV")
        shell_job = lab.run_job("--shell", "--", "sleep", "120")
        llm.wait_for_request(last_user_contains("TASK-SV"), timeout=60)
        lab.wait_state(pi_job, "running")
        pi_worker = lab.show(pi_job, cli=True)["worker"]["pid"]
        shell_worker = wait_until(
            lambda: lab.show(shell_job, cli=True)["worker"]["pid"], 15, "the shell job's worker"
        )
        assert lab.row(shell_job)["state"] == "running"
        pi_procs = pi_under(pi_worker)
        assert pi_procs, "the pi job's worker has no pi"

        kill(first_pid)

        second_pid = wait_until(
            lambda: (pid := sv.roostd_pid()) not in (None, first_pid) and pid,
            30,
            f"supervisord to restart roostd\n{sv.log()}",
        )
        status = wait_until(
            lambda: (s := lab.daemon_status())["running"] and s, 30, "the new roostd to answer"
        )
        assert status["pid"] == second_pid
        assert status["jobs"] == 2

        # The workers were never touched: same pids, alive, adopted by the new roostd.
        assert pid_alive(pi_worker) and pid_alive(shell_worker)
        assert all(p.is_running() for p in pi_procs)
        rows = {row["id"]: row for row in lab.ls()}
        assert set(rows) == {pi_job, shell_job}
        assert rows[pi_job]["state"] == "running"
        assert rows[shell_job]["state"] == "running"
        wait_until(
            lambda: lab.show(pi_job, cli=True)["worker"]["state"] == "running",
            15,
            "the pi job's worker to reconnect",
        )
        assert lab.show(pi_job, cli=True)["worker"]["pid"] == pi_worker
        assert lab.show(shell_job, cli=True)["worker"]["pid"] == shell_worker

        # The run in flight settles under the new roostd, and the job takes a reply.
        hold.set()
        assert lab.wait(pi_job) == "done"
        assert lab.row(pi_job)["summary"] == "ANSWER-SV-1"
        assert lab.cli("reply", pi_job, "REPLY-SV").stdout.strip() == "started"
        assert lab.wait(pi_job) == "done"
        last = llm.wait_for_request(last_user_contains("REPLY-SV"), timeout=5)
        assert user_messages(last) == ["TASK-SV", "REPLY-SV"]
        assert lab.show(pi_job, cli=True)["worker"]["pid"] == pi_worker

        # A clean shutdown of supervisord stops roostd (TERM) and leaves the jobs running.
        shutdown = sv.ctl("shutdown")
        assert shutdown.returncode == 0, shutdown.stdout + shutdown.stderr
        assert sv.proc.wait(30) == 0
        wait_until(lambda: not pid_alive(second_pid), 15, "roostd to exit")
        assert not (lab.roost_home / "roostd.sock").exists()
        assert pid_alive(pi_worker) and pid_alive(shell_worker)
        assert "roostd" in (sv.dir / "roostd.log").read_text()

        # A roostd started by the CLI adopts them again.
        rows = {row["id"]: row for row in lab.ls()}
        assert rows[pi_job]["state"] == "done"
        assert lab.show(shell_job, cli=True)["worker"]["pid"] == shell_worker
    finally:
        hold.set()
        sv.stop()
        with contextlib.suppress(Exception):
            lab.close()
