"""`roost mcp` with an independent client, the MCP Inspector's CLI mode (npm
`@modelcontextprotocol/inspector`, installed by scripts/setup into .runtime/inspector and
run with a node >= 22.19: the one setup put in the pi prefix when there is one, not
ROOST_NODE, which on the old pi line is the system node that runs pi 0.73.1), against the real pi and roost's
scripted model: it lists the tools, then run_job -> wait_for_jobs -> show_job, each call a
process of its own (a new MCP session every time: the cursor carries the wait across)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from kit.lab import REPO_DIR, Lab
from kit.matchers import fresh

from roost.pi.locate import node_binary, parse_version, prefix_node

pytestmark = pytest.mark.usefixtures("real_pi")

INSPECTOR = (
    REPO_DIR
    / ".runtime"
    / "inspector"
    / "node_modules"
    / "@modelcontextprotocol"
    / "inspector"
    / "clients"
    / "launcher"
    / "build"
    / "index.js"
)


@pytest.fixture(scope="module")
def inspector() -> list[str]:
    if not INSPECTOR.is_file():
        pytest.fail(
            f"these tests need the MCP Inspector in {INSPECTOR.parents[4]}: run scripts/setup", pytrace=False
        )
    # The prefix's node first: ROOST_NODE is the node that runs pi, and the old pi line's
    # pass sets it to the system node (older than the Inspector needs).
    local = prefix_node()
    candidates = [str(local)] if local is not None else []
    candidates.append(node_binary())
    seen: list[str] = []
    for node in dict.fromkeys(candidates):
        try:
            version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout
        except OSError:
            version = ""
        have = parse_version(version)
        if have is not None and have >= (22, 19, 0):
            return [node, str(INSPECTOR), "--cli"]
        seen.append(f"{node} is {version.strip() or 'not runnable'}")
    pytest.fail(
        f"the MCP Inspector needs node >= 22.19: {'; '.join(seen)} (scripts/setup "
        "installs one into the pi prefix)",
        pytrace=False,
    )


def call(lab: Lab, inspector: list[str], *args: str) -> Any:
    """One Inspector run against `roost mcp` (stdio), its JSON answer. The Inspector starts
    the server with the variables named by -e (an MCP client passes few of its own)."""
    names = [
        f"{k}={v}"
        for k, v in lab.env.items()
        if k.startswith(("ROOST_", "PI_")) or k in ("HOME", "PYTHONUNBUFFERED")
    ]
    argv = [
        *inspector,
        # 15 s by default: a loaded 2-core machine (a whole suite beside) can take longer
        # to start the server and answer; the test is about what it answers.
        "--connect-timeout",
        "120000",
        *(x for n in names for x in ("-e", n)),
        "--cwd",
        str(lab.work),
        sys.executable,
        str(REPO_DIR / "scripts" / "roost"),
        "mcp",
        *args,
    ]
    proc = subprocess.run(
        argv,
        env={**lab.env, "MCP_CATALOG_PATH": str(lab.home / "mcp.json")},
        cwd=lab.work,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    return json.loads(proc.stdout)


def tool(lab: Lab, inspector: list[str], tool_name: str, /, **args: Any) -> dict[str, Any]:
    pairs = [f"{k}={json.dumps(v) if not isinstance(v, str) else v}" for k, v in args.items()]
    answer = call(
        lab,
        inspector,
        "--method",
        "tools/call",
        "--tool-name",
        tool_name,
        *(["--tool-arg", *pairs] if pairs else []),
    )
    assert not answer.get("isError"), answer
    return dict(answer["structuredContent"])


def test_the_inspector_runs_waits_and_shows(lab: Lab, inspector: list[str]) -> None:
    lab.llm.add(fresh("MK-MCP"), "The answer is 42.")
    listed = call(lab, inspector, "--method", "tools/list")
    names = {t["name"] for t in listed["tools"]}
    assert {
        "list_jobs",
        "show_job",
        "run_job",
        "wait_for_jobs",
        "job_result",
        "reply_to_job",
        "send_message",
        "stop_job",
        "read_inbox",
    } <= names
    started = tool(lab, inspector, "run_job", task="MK-MCP what is the answer?", name="asker")
    job, cursor = started["id"], started["cursor"]
    events: list[dict[str, Any]] = []
    for _ in range(10):
        waited = tool(lab, inspector, "wait_for_jobs", jobs=[job], cursor=cursor, until="settled")
        events += waited["events"]
        cursor = waited["cursor"]
        if waited["reached"]:
            break
    assert waited["reached"] and waited["jobs"][0]["state"] == "done", waited
    assert [e["to"] for e in events if e["type"] == "job.state"][-1] == "done"
    shown = tool(lab, inspector, "show_job", job="asker")
    assert shown["id"] == job and shown["state"] == "done"
    assert "The answer is 42." in shown["transcript"]
    assert "MK-MCP what is the answer?" in shown["transcript"]


def test_pi_connects_to_roost_mcp(roost_env: Lab, real_pi: list[str]) -> None:
    """pi 1.x is an MCP client too: `pi mcp add roost -- roost mcp` (docs/guides/mcp.md),
    then `pi mcp list` connects and lists roost's tools."""
    lab = roost_env

    def pi(*args: str) -> str:
        proc = subprocess.run(
            [*real_pi, *args], env=lab.env, cwd=lab.work, capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
        return proc.stdout

    if "mcp" not in pi("--help"):
        pytest.skip("this pi has no MCP client (pi 0.73.1)")
    pi("mcp", "add", "roost", "--", sys.executable, str(REPO_DIR / "scripts" / "roost"), "mcp")
    listed = pi("mcp", "list")
    assert "roost: connected" in listed, listed
    for name in ("list_jobs", "show_job", "run_job", "wait_for_jobs", "reply_to_job", "send_message"):
        assert name in listed
