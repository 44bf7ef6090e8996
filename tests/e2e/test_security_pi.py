"""Security probes that need a real pi running a real bash tool: no job secret reaches pi or
its tools, and nothing else can take the extension's place (the rest: tests/integration/
test_security.py, against the fake pi).
"""

from __future__ import annotations

import stat
from pathlib import Path

import psutil
from kit.jobs import error_code, raw_unix, request
from kit.lab import Lab
from kit.matchers import after_tool, fresh, new_user_has, task, wait_file_command
from kit.wait import wait_until

from roost.fakellm import text, tool_call


def test_no_job_secret_reaches_pi_or_its_tools_and_the_extension_cannot_be_replaced() -> None:
    lab = Lab(llm=True)
    try:
        gate = lab.root / "gate"
        probe = "tr '\\0' '\\n' < /proc/$PPID/environ; echo ---; env; echo ---; " + wait_file_command(gate)
        lab.llm.add(fresh("SEC-T1"), tool_call("bash", {"command": probe}))
        lab.llm.add(after_tool("SEC-T1", "bash"), text("probed"))
        lab.llm.add(task("SEC-T1") & new_user_has("AFTER-PROBE"), text("still connected"))
        job = lab.run("SEC-T1 probe the environment")
        lab.wait_request(fresh("SEC-T1"))
        record = lab.record(job)
        worker = record["process"]["workerPid"]
        pi = wait_until(lambda: psutil.Process(worker).children(), 60, "pi")[0]
        pi_environ = Path(f"/proc/{pi.pid}/environ").read_bytes().decode(errors="replace")
        token = record["token"]
        assert token not in pi_environ and "PI_JOB_TOKEN" not in pi_environ

        # A client that is not the worker's pi cannot replace the extension.
        raw = raw_unix(lab.job_dir(job) / "ext.sock")
        assert error_code(request(raw, op="ext_hello", pid=pi.pid)) == "unauthorized"
        raw.close()

        gate.touch()
        assert lab.wait(job) == "done"
        out = lab.tool_results_of("SEC-T1", "bash")[0]["text"]
        assert "ROOST_JOB_ID=" in out  # the probe did read pi's environment
        assert token not in out and "PI_JOB_TOKEN" not in out

        # The extension's channel still works after the probe: a reply reaches pi and a
        # message from roost's side is answered.
        assert lab.reply(job, "AFTER-PROBE") == "started"
        assert lab.wait(job) == "done"
        assert lab.record(job)["summary"].endswith("still connected")

        # Nowhere on disk where others could read it, and in no log.
        for path in [lab.roost_home, *lab.roost_home.rglob("*")]:
            assert stat.S_IMODE(path.lstat().st_mode) & 0o077 == 0, path
        for log in [lab.roost_home / "roostd.log", *lab.roost_home.glob("jobs/*/worker.log")]:
            if log.exists():
                assert token not in log.read_text(errors="replace"), log
    finally:
        print(lab.diagnostics())
        lab.close()
