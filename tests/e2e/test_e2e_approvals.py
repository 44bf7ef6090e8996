"""End-to-end approvals (docs/guides/approvals.md) with the real pi and the scripted model:
a bash/write call that must ask waits (the job `needs_input`, an inbox entry of kind
approval) until `roost approve`/`deny`; a denial is the call's result; kills of roostd
and of the worker while a call waits lose nothing and run nothing twice."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from kit.lab import Lab
from kit.matchers import after_tool, fresh, new_user_has, task
from kit.wait import wait_until

from roost.fakellm import text, tool_call, tool_calls

T = 90.0


def pending(lab: Lab, job: str, count: int = 1) -> list[dict]:
    """The job's open approval entries, once there are `count`."""

    def found() -> list[dict] | None:
        entries = [
            e for e in lab.cli_json("inbox", "--json") if e["kind"] == "approval" and e["job"]["id"] == job
        ]
        return entries if len(entries) >= count else None

    return wait_until(found, T, lambda: f"{count} approval(s) of {job}\n{lab.diagnostics()}")


def events(lab: Lab, kind: str) -> list[dict]:
    path = lab.roost_home / "events.jsonl"
    if not path.exists():
        return []
    return [e for line in path.read_text().splitlines() if (e := json.loads(line))["type"] == kind]


def test_ask_waits_for_approve_and_deny_reaches_the_model(make_lab, tmp_path: Path) -> None:
    lab = make_lab()
    work = tmp_path / "work"
    work.mkdir()
    marker = work / "ran.txt"
    command = f"echo once >> {marker}"
    lab.llm.add(fresh("MK-APPR"), tool_call("bash", {"command": command}))
    lab.llm.add(after_tool("MK-APPR", "bash"), tool_call("write", {"path": "../x.txt", "content": "no"}))
    lab.llm.add(after_tool("MK-APPR", "write"), text("all done"))
    job = lab.run_job("--approvals", "ask", "MK-APPR go", cwd=work)
    entry = pending(lab, job)[0]
    assert entry["tool"] == "bash" and entry["input"] == {"command": command}
    assert entry["cwd"] == str(work)
    row = lab.wait_state(job, "needs_input")
    assert row["status"] == f"approve bash: {command}"
    assert not marker.exists()  # nothing ran before the answer
    requested = events(lab, "approval.requested")
    assert requested and requested[-1]["entry"] == entry["id"]

    assert lab.roost_ok("approve", entry["id"]).startswith("approved")
    again = lab.roost("approve", entry["id"])  # answered at most once: who and when
    assert again.returncode == 1 and "already answered: approved by cli" in again.stderr
    assert lab.roost("deny", "ffffffff").returncode == 2

    write = pending(lab, job)[0]  # the second call asks in turn
    assert write["tool"] == "write" and write["id"] != entry["id"]
    assert lab.roost_ok("deny", write["id"], "--reason", "stay in your folder").startswith("denied")
    assert lab.wait(job, T) == "done"
    assert marker.read_text() == "once\n"  # ran exactly once
    assert not (tmp_path / "x.txt").exists()
    results = lab.wait_tool_results("MK-APPR", "write")
    assert "stay in your folder" in json.dumps(results)
    answered = events(lab, "approval.answered")
    assert [(e["decision"], e["by"]) for e in answered] == [("approved", "cli"), ("denied", "cli")]


def test_several_calls_of_one_message_each_get_an_entry_and_always_allows(make_lab, tmp_path: Path) -> None:
    """pi 1.6 asks for every call of one assistant message before it runs any: the second
    entry appears once the first is answered; --always allows the exact command from then on."""
    lab = make_lab()
    work = tmp_path / "w"
    work.mkdir()
    log = work / "log.txt"
    one, two = f"echo one >> {log}", f"echo two >> {log}"
    lab.llm.add(fresh("MK-MULTI"), tool_calls(("bash", {"command": one}), ("bash", {"command": two})))
    lab.llm.add(after_tool("MK-MULTI", "bash"), tool_call("bash", {"command": one}), times=1)
    lab.llm.add(after_tool("MK-MULTI", "bash"), text("finished"))
    job = lab.run_job("--approvals", "ask", "MK-MULTI go", cwd=work)
    first = pending(lab, job)[0]
    assert first["input"]["command"] == one
    out = lab.roost_ok("approve", first["id"], "--always")
    assert "from now on it allows bash:echo one >> " in out
    second = wait_until(
        lambda: [e for e in pending(lab, job) if e["id"] != first["id"]], T, "the second call's own entry"
    )[0]
    assert second["input"]["command"] == two
    lab.roost_ok("approve", second["id"])
    assert lab.wait(job, T) == "done"  # the third call (`one` again) ran unasked: --always
    lines = log.read_text().splitlines()  # siblings run concurrently once both are decided
    assert sorted(lines[:2]) == ["one", "two"] and lines[2:] == ["one"]
    assert lab.show(job)["approvals"]["allow"] == [f"bash:{one}"]


def test_deny_rule_and_timeout(make_lab, tmp_path: Path) -> None:
    lab = make_lab()
    lab.llm.add(fresh("MK-DENYRULE"), tool_call("bash", {"command": "git push origin main"}))
    lab.llm.add(after_tool("MK-DENYRULE", "bash"), tool_call("bash", {"command": "echo hi"}), times=1)
    lab.llm.add(after_tool("MK-DENYRULE", "bash"), text("ok"))
    job = lab.run_job(
        "--deny",
        "bash:git push*",
        "--ask",
        "bash:echo*",
        "--approval-timeout",
        "0.05",
        "MK-DENYRULE go",
        cwd=tmp_path,
    )
    assert lab.wait(job, T) == "done"  # denied by the rule at once, then timed out (3 s)
    results = json.dumps(lab.tool_results_of("MK-DENYRULE", "bash"))
    assert "deny bash:git push*" in results
    assert "approval timed out" in results
    answered = events(lab, "approval.answered")
    assert [(e["decision"], e["by"]) for e in answered] == [("denied", "timeout")]


@pytest.mark.parametrize("answered", ["while away", "once asked again"])
def test_a_pending_call_survives_kills_of_roostd_and_of_the_worker(
    make_lab, tmp_path: Path, answered: str
) -> None:
    """After the worker's kill the restarted run makes the same call again and takes over the
    pending entry: answered while no worker waited for it, or once it was asked again."""
    lab = make_lab()
    marker = tmp_path / "ran.txt"
    command = f"echo ran >> {marker}"
    lab.llm.add(fresh("MK-KILL"), tool_call("bash", {"command": command}))
    lab.llm.add(after_tool("MK-KILL", "bash"), text("done after the kills"))
    job = lab.run_job("--approvals", "ask", "MK-KILL go", cwd=tmp_path)
    entry = pending(lab, job)[0]
    os.kill(lab.daemon_pid(), signal.SIGKILL)  # roostd: the entry is on disk
    lab.start_daemon()
    assert pending(lab, job)[0]["id"] == entry["id"]
    # The restarted worker continues the run: the model makes the same call again, which
    # takes over the pending entry (same id).
    lab.llm.add(
        task("MK-KILL") & new_user_has("Continue the task"),
        tool_call("bash", {"command": command}),
        times=1,
        first=True,
    )
    # pi saves the assistant message (its tool call) a moment after asking: a worker killed
    # before that leaves a session whose run does not look cut short (not approvals' part).
    wait_until(lambda: '"toolCall"' in json.dumps(lab.session(job)), T, "the call in the session")
    worker = lab.show(job)["worker"]["pid"]
    os.kill(worker, signal.SIGKILL)  # the worker (its pi goes with it): the call never ran
    if answered == "while away":
        lab.roost_ok("approve", entry["id"])
    wait_until(lambda: lab.show(job)["worker"]["pid"] not in (None, worker), T, "a new worker")
    # The restarted worker continues the run (the killed worker's loss decided nothing: the
    # call was aborted with the run, toolgate.ts), and the model makes the call again.
    again = task("MK-KILL") & new_user_has("Continue the task")
    lab.wait_request(again)
    if answered == "once asked again":
        assert pending(lab, job)[0]["id"] == entry["id"]  # the same entry, still pending
        assert not marker.exists()
        lab.roost_ok("approve", entry["id"])
    assert lab.wait(job, T) == "done"
    assert marker.read_text() == "ran\n"  # exactly once
    assert lab.roost("approve", entry["id"]).returncode == 1


def test_a_call_not_made_again_after_a_restart_is_closed(make_lab, tmp_path: Path) -> None:
    lab = make_lab()
    lab.llm.add(fresh("MK-LOST"), tool_call("bash", {"command": "echo lost"}))
    lab.llm.add(task("MK-LOST"), text("moved on"))
    job = lab.run_job("--approvals", "ask", "MK-LOST go", cwd=tmp_path)
    entry = pending(lab, job)[0]
    os.kill(lab.show(job)["worker"]["pid"], signal.SIGKILL)
    assert lab.wait(job, T) == "done"
    wait_until(
        lambda: not [e for e in lab.cli_json("inbox", "--json") if e["kind"] == "approval"],
        T,
        "the lost call's entry closed",
    )
    again = lab.roost("approve", entry["id"])
    assert again.returncode == 1 and "denied by roost" in again.stderr


def test_a_spawned_child_keeps_its_parents_rules(make_lab, tmp_path: Path) -> None:
    lab = make_lab()
    lab.llm.add(fresh("MK-PARENTAP"), tool_call("roost_spawn", {"task": "MK-CHILDAP kid", "name": "ap-kid"}))
    lab.llm.add(after_tool("MK-PARENTAP", "roost_spawn"), text("spawned"))
    lab.llm.add(fresh("MK-CHILDAP"), tool_call("bash", {"command": "echo child"}))
    lab.llm.add(after_tool("MK-CHILDAP", "bash"), text("kid done"))
    parent = lab.run_job("--approvals", "ask", "--deny", "write:outside", "MK-PARENTAP go", cwd=tmp_path)
    kid = wait_until(lambda: lab.job_named("ap-kid"), T, "the child")
    policy = lab.show(kid["id"])["approvals"]
    assert policy["mode"] == "ask" and "write:outside" in policy["deny"]
    entry = pending(lab, kid["id"])[0]  # the roost_spawn call itself was not asked
    assert entry["input"] == {"command": "echo child"}
    assert lab.wait(parent, T) == "done"


def test_the_view_inbox_pane_approves_and_denies(
    make_lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`roost view`'s inbox pane (textual's pilot): a approves, x denies, by `view`."""
    import asyncio

    from kit.pilot import until

    from roost.view.app import ViewApp
    from roost.view.inbox import InboxScreen

    lab = make_lab()
    marker = tmp_path / "ran.txt"
    lab.llm.add(fresh("MK-VIEWAP"), tool_call("bash", {"command": f"echo view >> {marker}"}))
    lab.llm.add(after_tool("MK-VIEWAP", "bash"), tool_call("bash", {"command": "echo nope"}), times=1)
    lab.llm.add(after_tool("MK-VIEWAP", "bash"), text("view done"))
    job = lab.run_job("--approvals", "ask", "MK-VIEWAP go", cwd=tmp_path)
    first = pending(lab, job)[0]
    for key in ("ROOST_HOME", "PI_CODING_AGENT_DIR", "HOME"):
        monkeypatch.setenv(key, lab.env[key])
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)

    async def scenario() -> None:
        app = ViewApp()
        async with app.run_test(size=(120, 30)) as pilot:
            await pilot.press("i")
            pane = await until(
                pilot, lambda: isinstance(app.screen, InboxScreen) and app.screen, "the inbox pane"
            )
            assert [e["id"] for e in pane.entries] == [first["id"]]
            await pilot.press("a")
            await until(pilot, lambda: pane.outcomes == ["approved"], "the approval")
            await until(
                pilot,
                lambda: (
                    (pane.action_reload() or True) and pane.entries and pane.entries[0]["id"] != first["id"]
                ),
                "the second call",
                timeout=60,
            )
            await pilot.press("x")
            await until(pilot, lambda: len(pane.outcomes) == 2, "the denial")
            assert pane.outcomes[1] == "denied"

    asyncio.run(scenario())
    assert lab.wait(job, T) == "done"
    assert marker.read_text() == "view\n"
    again = lab.roost("approve", first["id"])
    assert again.returncode == 1 and "approved by view" in again.stderr


def test_the_notify_hook_fires_on_a_request(make_lab, tmp_path: Path) -> None:
    lab = make_lab()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "notify-send"
    tool.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$*\" >> {tmp_path}/notified\n")
    tool.chmod(0o755)
    lab.env["PATH"] = f"{bin_dir}:{lab.env['PATH']}"
    assert "on for" in lab.roost_ok("notify", "--enable")
    lab.roost("daemon", "stop")  # a running roostd: the hooks are read at its start
    lab.llm.add(fresh("MK-NOTIFYAP"), tool_call("bash", {"command": "echo notify me"}))
    lab.llm.add(after_tool("MK-NOTIFYAP", "bash"), text("ok"))
    lab.llm.add(task("MK-NOTIFYAP"), text("ok"))  # the reply steered in
    job = lab.run_job("--approvals", "ask", "--name", "notifier", "MK-NOTIFYAP go", cwd=tmp_path)
    entry = pending(lab, job)[0]
    notified = tmp_path / "notified"
    said = wait_until(lambda: notified.exists() and notified.read_text(), T, "a notification")
    assert "roost: notifier asks for approval" in said
    assert f"approve bash: echo notify me (roost approve {entry['id']}" in said
    assert "needs input" not in said  # one notification for one call
    # Neither a reply nor `roost answer` answers an approval: only approve/deny do.
    assert lab.reply(job, "approve it please") in ("queued", "delivered")
    refused = lab.roost("answer", entry["id"], "yes")
    assert refused.returncode == 1 and "is an approval" in refused.stderr
    assert [e["id"] for e in pending(lab, job)] == [entry["id"]]
    lab.roost_ok("deny", entry["id"])
    assert lab.wait(job, T) == "done"
