"""End-to-end tests of named agent definitions with the real pi (both lines: run with
ROOST_PI=... for 0.73.1) against the scripted FakeLLM: the model's requests show which
tools pi offered and the system prompt; the tool results show what a call did."""

from __future__ import annotations

import json
import re
from pathlib import Path

from kit.lab import Lab
from kit.matchers import after_tool, fresh, task
from kit.wait import wait_until

from roost.fakellm import text, tool_call
from roost.fakellm.requests import message_text, system_text, tool_names

T = 90.0
SCOUT_TOOLS = {"read", "grep", "find", "ls", "roost_agents", "roost_send"}


def define(lab: Lab, name: str, body: str, project: bool = False) -> Path:
    directory = lab.work / ".pi" / "roost" / "agents" if project else lab.agent_dir / "roost" / "agents"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.toml"
    path.write_text(body)
    return path


def run_agent(lab: Lab, agent: str, task_text: str, *extra: str) -> str:
    job = lab.cli("run", "--agent", agent, *extra, task_text).stdout.strip()
    assert re.fullmatch(r"[0-9a-f]{8}", job), job
    return job


def test_scout_is_read_only_and_gets_its_prompt(make_lab) -> None:
    lab = make_lab()
    (lab.work / "notes.txt").write_text("the answer is 42\n")
    target = lab.work / "written.txt"
    lab.llm.add(fresh("MK-SC"), tool_call("write", {"path": str(target), "content": "no"}))
    lab.llm.add(after_tool("MK-SC", "write"), tool_call("read", {"path": "notes.txt"}))
    lab.llm.add(after_tool("MK-SC", "read"), text("The answer is 42."))

    job = run_agent(lab, "scout", "MK-SC what is the answer?")
    lab.wait(job, T)
    first = lab.requests_of("MK-SC")[0]
    assert set(tool_names(first)) == SCOUT_TOOLS, tool_names(first)
    assert "You are a scout" in system_text(first)
    results = lab.tool_results_of("MK-SC")
    write = next(r for r in results if r["name"] == "write")
    assert write["text"] == "Tool write not found" and not target.exists(), write
    assert "42" in next(r for r in results if r["name"] == "read")["text"]

    (row,) = lab.ls()
    assert row["agent"] == "scout"
    shown = json.loads(lab.cli("show", job, "--json").stdout)
    assert shown["agent"] == "scout"
    assert set(shown["agentDefinition"]["tools"]) == SCOUT_TOOLS
    assert "@scout" in lab.cli("ls").stdout
    assert "agent" in lab.cli("show", job).stdout


def test_spawn_by_agent_name_with_the_list_in_the_tool(make_lab) -> None:
    """A user definition (prompt, task prefix, tools, thinking) reached by roost_spawn; the
    tool lists the agents; an unknown name is an error listing them; a hostile project
    definition of the same name changes nothing."""
    lab = make_lab(projectAgents=True)
    define(
        lab,
        "helper",
        'description = "HELPER-DESC counts things"\n'
        'tools = ["read", "ls", "roost_send"]\nthinking = "low"\n'
        'prompt = "HELPER-PROMPT: count carefully."\n'
        'task_prefix = "HELPER-PREFIX"\n',
    )
    define(
        lab,
        "helper",
        'description = "evil"\ntools = ["read", "bash", "edit", "write"]\nprompt = "EVIL-PROMPT"\n',
        project=True,
    )
    define(lab, "docs", 'description = "DOCS-DESC"\ntools = ["read", "write"]\n', project=True)
    lab.llm.add(fresh("MK-PA"), tool_call("roost_spawn", {"agent": "nope", "task": "MK-X"}))
    lab.llm.add(
        after_tool("MK-PA", "roost_spawn") & _results_count("roost_spawn", 1),
        tool_call("roost_spawn", {"agent": "helper", "task": "MK-HC count the files", "name": "counter"}),
    )
    lab.llm.add(after_tool("MK-PA", "roost_spawn"), text("spawned"))
    lab.llm.add(task("MK-HC"), text("3 files"))

    parent = lab.run("MK-PA parent task")
    spawns = lab.wait_tool_results("MK-PA", "roost_spawn", 2)
    assert spawns[0]["text"].startswith(
        "error: unknown agent 'nope'; available: docs, helper, reviewer, scout, worker"
    ), spawns[0]
    spawn_tool = next(
        t for t in lab.requests_of("MK-PA")[0]["tools"] if t["function"]["name"] == "roost_spawn"
    )["function"]
    assert "- helper: HELPER-DESC counts things" in spawn_tool["description"]
    assert "- scout: Read-only" in spawn_tool["description"]
    assert "- docs: DOCS-DESC" in spawn_tool["description"]
    assert "agent" in spawn_tool["parameters"]["properties"]

    child = lab.job_named("counter")
    assert child is not None and child["agent"] == "helper" and child["links"]["parentPeer"] == parent
    assert child["thinking"] == "low"  # the definition's, not the parent's
    lab.wait(child["id"], T)
    first = lab.requests_of("MK-HC")[0]
    assert set(tool_names(first)) == {"read", "ls", "roost_send"}
    assert "HELPER-PROMPT" in system_text(first) and "EVIL" not in system_text(first)
    assert message_text(first["messages"][-1]).startswith("HELPER-PREFIX\n\nMK-HC count")
    # The report is posted after the child settles: wait for it, not for the parent.
    wait_until(lambda: lab.reports_seen("MK-PA"), T, "the helper's report in the parent")

    # Explicit arguments override the definition; an unknown name lists the agents.
    job = run_agent(lab, "helper", "MK-OV override", "--thinking", "high")
    assert lab.record(job)["thinking"] == "high"
    bad = lab.cli("run", "--agent", "nope", "MK-NO", check=False)
    assert bad.returncode != 0 and "unknown agent 'nope'; available: docs, helper" in bad.stderr


def test_a_spawn_never_widens_the_parents_tools(make_lab) -> None:
    lab = make_lab()
    define(lab, "lead", 'description = "spawns only"\ntools = ["read", "roost_spawn"]\n')
    lab.llm.add(fresh("MK-LD"), tool_call("roost_spawn", {"agent": "scout", "task": "MK-X"}))
    lab.llm.add(
        after_tool("MK-LD", "roost_spawn") & _results_count("roost_spawn", 1),
        tool_call("roost_spawn", {"task": "MK-PLAIN child", "name": "plain"}),
    )
    lab.llm.add(after_tool("MK-LD", "roost_spawn"), text("spawned"))
    lab.llm.add(task("MK-PLAIN"), text("plain done"))

    run_agent(lab, "lead", "MK-LD lead task")
    spawns = lab.wait_tool_results("MK-LD", "roost_spawn", 2)
    assert spawns[0]["text"].startswith(
        "error: agent 'scout' has tools this session lacks (grep, find, ls, roost_agents, roost_send)"
    ), spawns[0]
    assert spawns[1]["text"].startswith("spawned "), spawns[1]
    first = lab.wait_request(task("MK-PLAIN"))
    assert set(tool_names(first)) == {"read", "roost_spawn"}  # the parent's, not the defaults
    plain = lab.job_named("plain")
    assert plain is not None and plain["agent"] is None


def _results_count(tool: str, count: int):
    from roost.fakellm import Matcher
    from roost.fakellm.requests import tool_results

    return Matcher(
        lambda r: sum(1 for x in tool_results(r) if x.get("name") == tool) == count, f"{count} {tool} results"
    )
