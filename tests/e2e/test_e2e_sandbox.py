"""End-to-end sandbox (docs/guides/sandbox.md) with the real pi, the real bwrap and the
scripted model: a `roost run --sandbox` job's bash writes only in its directory and a
private /tmp, cannot read ~/.ssh or another job's files, sees no API key variable, has no
network unless --sandbox-network host, and runs in its own pid namespace; write/edit
outside its directory are refused; its child is sandboxed too; no bwrap, no job."""

from __future__ import annotations

import json
import socket
import uuid
from pathlib import Path

import pytest
from kit.lab import Lab
from kit.matchers import after_tool, fresh

from roost import sandbox
from roost.fakellm import text, tool_call

T = 90.0

try:
    sandbox.check()
    HAVE_BWRAP = True
except sandbox.SandboxError:
    HAVE_BWRAP = False
needs_bwrap = pytest.mark.skipif(not HAVE_BWRAP, reason="no working bwrap (package bubblewrap)")


def probe_command(work: Path, outside: Path, lab: Lab, other: str, port: int, tmp: Path) -> str:
    """One bash call that reports what it could do, a KEY=value line each (`tmp`: a file
    in /tmp it writes)."""
    return "\n".join(
        [
            f"echo in > {work}/in.txt && echo W_IN=ok || echo W_IN=no",
            f"echo out > {outside}/out.txt 2>/dev/null && echo W_OUT=ok || echo W_OUT=no",
            f"cat {lab.home}/.ssh/id_test 2>/dev/null && echo SSH=read || echo SSH=no",
            f"ls {lab.roost_home}/jobs/{other} >/dev/null 2>&1 && echo OTHER=seen || echo OTHER=no",
            "env | grep -q SECRET-VALUE && echo KEYS=seen || echo KEYS=no",
            f"(exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo NET=ok || echo NET=no",
            f"echo tmp > {tmp} && echo TMP=ok || echo TMP=no",
            "echo PID=$$",
        ]
    )


def report(lab: Lab, marker: str) -> dict[str, str]:
    results = lab.wait_tool_results(marker, "bash")
    body = json.dumps(results[0])
    out = {}
    for word in ("W_IN", "W_OUT", "SSH", "OTHER", "KEYS", "NET", "TMP", "PID"):
        start = body.index(f"{word}=") + len(word) + 1
        end = start
        while end < len(body) and body[end].isalnum():
            end += 1
        out[word] = body[start:end]
    return out


@pytest.fixture
def tmp_probe():
    path = Path(f"/tmp/roost-sandbox-probe-{uuid.uuid4().hex}")
    yield path
    path.unlink(missing_ok=True)


@pytest.fixture
def listener():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    yield server.getsockname()[1]
    server.close()


@needs_bwrap
@pytest.mark.parametrize("network", ["none", "host"])
def test_sandboxed_bash_is_contained(
    make_lab, tmp_path: Path, listener: int, tmp_probe: Path, network: str
) -> None:
    lab = make_lab()
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    (lab.home / ".ssh").mkdir(exist_ok=True)
    (lab.home / ".ssh" / "id_test").write_text("PRIVATE-KEY\n")
    other = lab.run_job("--shell", "--", "true")
    lab.wait(other)
    marker = f"MK-BOX-{network}"
    lab.llm.add(
        fresh(marker),
        tool_call("bash", {"command": probe_command(work, outside, lab, other, listener, tmp_probe)}),
    )
    lab.llm.add(
        after_tool(marker, "bash"), tool_call("write", {"path": str(outside / "w.txt"), "content": "no"})
    )
    lab.llm.add(after_tool(marker, "write"), text("all done"))
    extra = ["--sandbox-network", "host"] if network == "host" else []
    job = lab.run_job(
        "--sandbox",
        *extra,
        f"{marker} go",
        cwd=work,
        env={
            "OPENAI_API_KEY": "sk-SECRET-VALUE",
            "MY_SERVICE_TOKEN": "SECRET-VALUE",
            "ROOST_TEST_PLAIN": "visible",
        },
    )
    assert lab.wait(job, T) == "done"
    seen = report(lab, marker)
    assert seen["W_IN"] == "ok" and (work / "in.txt").read_text() == "in\n"
    assert seen["W_OUT"] == "no" and not (outside / "out.txt").exists()
    assert seen["SSH"] == "no" and seen["OTHER"] == "no" and seen["KEYS"] == "no"
    assert seen["TMP"] == "ok" and not tmp_probe.exists()
    assert seen["NET"] == ("ok" if network == "host" else "no")
    assert int(seen["PID"]) < 10  # its own pid namespace
    written = json.dumps(lab.wait_tool_results(marker, "write"))
    assert "sandbox: write" in written and "outside the job's writable folders" in written
    assert not (outside / "w.txt").exists()
    row = lab.cli_json("show", job, "--json")
    assert row["sandbox"] == {"network": network, "writable": []}
    assert f"bubblewrap, network {network}" in lab.roost_ok("show", job)
    assert lab.cli_json("show", other, "--json")["sandbox"] is None


@needs_bwrap
def test_unsandboxed_job_is_not_contained(make_lab, tmp_path: Path, listener: int, tmp_probe: Path) -> None:
    """The same probe without --sandbox: what the sandbox takes away is there (the test
    above cannot pass by accident)."""
    lab = make_lab()
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    (lab.home / ".ssh").mkdir(exist_ok=True)
    (lab.home / ".ssh" / "id_test").write_text("PRIVATE-KEY\n")
    other = lab.run_job("--shell", "--", "true")
    lab.wait(other)
    lab.llm.add(
        fresh("MK-OPEN"),
        tool_call("bash", {"command": probe_command(work, outside, lab, other, listener, tmp_probe)}),
    )
    lab.llm.add(after_tool("MK-OPEN", "bash"), text("all done"))
    job = lab.run_job("MK-OPEN go", cwd=work, env={"OPENAI_API_KEY": "sk-SECRET-VALUE"})
    assert lab.wait(job, T) == "done"
    seen = report(lab, "MK-OPEN")
    assert (seen["W_OUT"], seen["SSH"], seen["OTHER"], seen["KEYS"], seen["NET"]) == (
        "ok",
        "read",
        "seen",
        "seen",
        "ok",
    )
    assert tmp_probe.exists()  # the machine's /tmp


@needs_bwrap
def test_child_of_a_sandboxed_job_is_sandboxed(make_lab, tmp_path: Path) -> None:
    lab = make_lab()
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    lab.llm.add(fresh("MK-PARENT"), tool_call("roost_spawn", {"task": "MK-CHILD write"}))
    lab.llm.add(after_tool("MK-PARENT", "roost_spawn", news=True), text("spawned"))
    lab.llm.add(
        fresh("MK-CHILD"),
        tool_call("bash", {"command": f"echo out > {outside}/child.txt && echo W_OUT=ok || echo W_OUT=no"}),
    )
    lab.llm.add(after_tool("MK-CHILD", "bash"), text("child done"))
    parent = lab.run_job("--sandbox", "--sandbox-network", "host", "MK-PARENT go", cwd=work)
    results = json.dumps(lab.wait_tool_results("MK-CHILD", "bash"))
    assert "W_OUT=no" in results and not (outside / "child.txt").exists()
    rows = {r["id"]: r for r in lab.cli_json("ls", "--json")}
    child = next(r for r in rows.values() if r["id"] != parent)
    assert child["sandbox"] == {"network": "host", "writable": []}


def test_sandbox_refused_without_bwrap(make_lab, tmp_path: Path) -> None:
    """Never silently unsandboxed: no bwrap (ROOST_BWRAP names a missing file, or PATH has
    none), no job (exit 1, naming the package)."""
    lab = make_lab()
    missing = lab.roost("run", "--sandbox", "MK-NOBOX go", env={"ROOST_BWRAP": str(tmp_path / "no-bwrap")})
    assert missing.returncode == 1, missing
    assert "bubblewrap" in missing.stderr and "ROOST_BWRAP" in missing.stderr
    empty = tmp_path / "bin"
    empty.mkdir()
    nopath = lab.roost("run", "--sandbox", "MK-NOBOX go", env={"PATH": str(empty)})
    assert nopath.returncode == 1, nopath
    assert "bwrap is not installed" in nopath.stderr and "bubblewrap" in nopath.stderr
    assert lab.cli_json("ls", "--json") == []


@needs_bwrap
def test_bwrap_gone_before_the_start_fails_the_job(make_lab, tmp_path: Path) -> None:
    """A job sandboxed at `run` whose bwrap is gone when it starts fails, naming the
    package; its task never reaches a pi without the sandbox."""
    bwrap = tmp_path / "bwrap"
    bwrap.symlink_to(sandbox.check())
    lab = make_lab(env={"ROOST_BWRAP": str(bwrap)})  # roostd's, as ROOST_PI
    flag = tmp_path / "go"
    first = lab.run_job("--shell", "--", "sh", "-c", f"while [ ! -e {flag} ]; do sleep 0.05; done")
    job = lab.run_job("--sandbox", "--after", first, "MK-GONE go")
    bwrap.unlink()
    flag.touch()
    assert lab.wait(job, T) == "failed"
    row = lab.cli_json("show", job, "--json")
    assert "bubblewrap" in json.dumps(row)
    assert not lab.requests_of("MK-GONE")


def _sleepers(tag: str) -> list[int]:
    out = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and (proc / "cmdline").read_bytes() == b"sleep\0" + tag.encode() + b"\0":
                out.append(int(proc.name))
        except OSError:
            continue
    return out


@needs_bwrap
def test_a_sandboxed_command_dies_with_the_job(make_lab, tmp_path: Path) -> None:
    """`roost stop` while a sandboxed command runs: nothing of the sandbox is left."""
    from kit.wait import wait_until

    lab = make_lab()
    tag = f"{300 + uuid.uuid4().int % 600}.{uuid.uuid4().int % 1000}"
    lab.llm.add(fresh("MK-STOP"), tool_call("bash", {"command": f"sleep {tag}"}))
    lab.llm.add(after_tool("MK-STOP", "bash"), text("slept"))
    job = lab.run_job("--sandbox", "MK-STOP go", cwd=tmp_path)
    wait_until(lambda: _sleepers(tag), T, lambda: f"the sandboxed sleep {tag} to start")
    lab.roost_ok("stop", job)
    wait_until(lambda: not _sleepers(tag), T, lambda: f"sleep {tag} to end: {_sleepers(tag)}")


@needs_bwrap
def test_sandbox_refuses_before_approvals_and_bounds_a_child_s_cwd(make_lab, tmp_path: Path) -> None:
    """With --approvals ask, a write outside is refused by the sandbox without asking
    anyone; a child spawned outside the parent's writable folders is refused."""
    lab = make_lab()
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    lab.llm.add(fresh("MK-ORDER"), tool_call("write", {"path": str(outside / "w.txt"), "content": "no"}))
    lab.llm.add(
        after_tool("MK-ORDER", "write"), tool_call("roost_spawn", {"task": "MK-KID go", "cwd": str(outside)})
    )
    lab.llm.add(after_tool("MK-ORDER", "roost_spawn"), text("done"))
    job = lab.run_job("--sandbox", "--approvals", "ask", "MK-ORDER go", cwd=work)
    written = json.dumps(lab.wait_tool_results("MK-ORDER", "write"))
    assert "sandbox: write" in written
    spawned = json.dumps(lab.wait_tool_results("MK-ORDER", "roost_spawn"))
    assert "works inside its parent's writable folders" in spawned
    assert lab.wait(job, T) == "done"
    assert not [e for e in lab.cli_json("inbox", "--json") if e["kind"] == "approval"]
    assert [r["id"] for r in lab.cli_json("ls", "--json")] == [job]
