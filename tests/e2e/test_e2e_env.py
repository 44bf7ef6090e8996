"""End-to-end: an API key exported only where a job was created reaches the real pi.

The lab's models.json names the provider's key by an environment variable (pi resolves
`"apiKey": "$NAME"` on the 1.x line and a bare `"NAME"` on 0.73), and the scripted model
records each request's Authorization header. roostd is started by a command without the
variable, so only the job's own environment can carry it: `roost run` from a shell that
exports it, a foreground pi's `roost_spawn`, and its `/roost-bg`.
"""

from __future__ import annotations

import json
from pathlib import Path

from kit.lab import EXTENSION, Lab
from kit.matchers import after_tool, fresh, new_user_has, task
from kit.testpi import PiRpc
from kit.wait import wait_until

from roost.fakellm import text, tool_call
from roost.pi.locate import find_pi

T = 90.0
KEY_VAR = "MY_PROVIDER_KEY"
KEY = "sk-e2e-4b1d8c0f2a9e77"


def key_from_env(lab: Lab) -> None:
    """models.json: the fake provider's apiKey is the variable KEY_VAR, never a literal."""
    package = find_pi().package or ""
    reference = f"${KEY_VAR}" if package.startswith("@earendil-works/") else KEY_VAR
    path = lab.agent_dir / "models.json"
    models = json.loads(path.read_text())
    for provider in models["providers"].values():
        provider["apiKey"] = reference
    path.write_text(json.dumps(models, indent=2))
    assert KEY_VAR not in lab.env
    lab.roost_ok("daemon", "start")  # roostd's environment has no key


def test_an_api_key_exported_by_the_caller_reaches_pi(make_lab) -> None:
    lab = make_lab()
    key_from_env(lab)
    lab.llm.add(fresh("MK-ENVKEY"), text("got it"))
    job = lab.run_job("MK-ENVKEY say hi", env={KEY_VAR: KEY})
    request = lab.wait_request(fresh("MK-ENVKEY"), 60)
    assert request.authorization == f"Bearer {KEY}"
    assert lab.wait(job, T) == "done"


def foreground(lab: Lab) -> tuple[PiRpc, Path]:
    """A foreground pi with roost's extension whose environment (only) has the key."""
    session = lab.root / "fg" / "fg.jsonl"
    fg = lab.spawn_pi(session=session, extensions=[EXTENSION], extra_env={KEY_VAR: KEY})
    fg.get_state(timeout=T)
    return fg, session


def test_a_foreground_pis_child_gets_its_key(make_lab) -> None:
    lab = make_lab()
    key_from_env(lab)
    lab.llm.add(fresh("MK-FGENV"), tool_call("roost_spawn", {"task": "MK-KIDENV kid", "name": "env-kid"}))
    lab.llm.add(after_tool("MK-FGENV", "roost_spawn"), text("spawned"))
    lab.llm.add(fresh("MK-KIDENV"), text("kid done"))
    fg, _ = foreground(lab)
    fg.run_prompt("MK-FGENV spawn a kid", timeout=T)
    kid = lab.wait_request(fresh("MK-KIDENV"), 60)
    assert kid.authorization == f"Bearer {KEY}"


def test_roost_bg_keeps_the_pis_key(make_lab) -> None:
    """/roost-bg: the job that takes the session over runs with this pi's environment."""
    lab = make_lab()
    key_from_env(lab)
    lab.llm.add(fresh("MK-FGBG"), text("first answer"))
    lab.llm.add(task("MK-FGBG") & new_user_has("MK-BGENV"), text("background done"))
    fg, session = foreground(lab)
    fg.run_prompt("MK-FGBG hello", timeout=T)
    assert fg.send({"type": "prompt", "message": "/roost-bg MK-BGENV go on"}, timeout=30).get("success")
    fg.proc.wait(timeout=30)
    request = lab.wait_request(task("MK-FGBG") & new_user_has("MK-BGENV"), 60)
    assert request.authorization == f"Bearer {KEY}"
    job = wait_until(lambda: [r for r in lab.ls() if r["session"] == str(session)], 30, "the hand-off job")[
        0
    ]["id"]
    assert lab.show(job)["environment"]["source"] == "/roost-bg"
