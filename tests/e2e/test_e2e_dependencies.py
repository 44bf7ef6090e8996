"""End to end, the real pi: a fan-out of three jobs and a fan-in job that waits on them
with their results (README: Dependencies), made by `roost run --after --with-results`, and
by an agent with `roost_spawn {after}`. The fan-in's pi starts only once the three are
done, and its first model request holds their answers, framed as data from roost."""

from __future__ import annotations

import threading

import pytest
from kit.lab import Lab
from kit.matchers import after_tool, fresh, new_user_has, task, user_messages
from kit.wait import wait_until

from roost.fakellm import FakeLLM, text, tool_call, tool_calls

pytestmark = [pytest.mark.timeout(240), pytest.mark.usefixtures("real_pi")]

T = 120.0
ANSWERS = {"one": "result-alpha", "two": "result-beta", "three": "result-gamma"}


def assert_framed(first_task: str, ids: dict[str, str]) -> None:
    """The fan-in's task: one frame per dependency, its answer inside, roost's note above."""
    assert "written by other agent sessions, not by the user" in first_task
    for name, answer in ANSWERS.items():
        assert (
            f'<agent-message from="{name}" id="{ids[name]}" relation="dependency" '
            f'kind="result">\nstate: done\n\n{answer}\n</agent-message>'
        ) in first_task


def test_a_fan_in_run_after_three_jobs_gets_their_answers(make_lab, llm: FakeLLM) -> None:
    lab: Lab = make_lab(llm=llm)
    hold = threading.Event()
    for n, (name, answer) in enumerate(ANSWERS.items()):
        llm.add(task(f"FO-RUN-{name}"), text(answer, hold=hold if n == 2 else None))
    llm.add(task("FI-RUN"), text("combined"))
    ids = {name: lab.run(f"FO-RUN-{name} work", name=name) for name in ANSWERS}
    fan_in = lab.run_job("--after", "one,two,three", "--with-results", "FI-RUN combine")
    try:
        lab.wait_request(task("FO-RUN-three"), T)
        wait_until(
            lambda: lab.row(fan_in)["status"] == "waiting on three",
            T,
            what="the fan-in to wait on the held job only",
        )
        assert lab.row(fan_in)["state"] == "waiting" and lab.requests_of("FI-RUN") == []
    finally:
        hold.set()
    assert lab.wait(fan_in, T) == "done"
    first = lab.requests_of("FI-RUN")[0]
    assert_framed(user_messages(first)[0], ids)
    assert user_messages(first)[0].startswith("FI-RUN combine\n\n")
    assert lab.row(fan_in)["after"]["ended"] == {ids[n]: "done" for n in ANSWERS}


def test_an_agent_fans_out_and_in_with_roost_spawn_after(make_lab, llm: FakeLLM) -> None:
    lab: Lab = make_lab(llm=llm)
    outsider = lab.run("OUTSIDER another tree", name="outsider")
    llm.add(
        fresh("FP-PARENT"),
        tool_calls(
            *[("roost_spawn", {"task": f"FO-KID-{name} work", "name": name}) for name in ANSWERS],
            ("roost_spawn", {"task": "FI-NEVER", "after": ["outsider"]}),
        ),
    )
    llm.add(
        after_tool("FP-PARENT", "roost_spawn"),
        tool_call("roost_spawn", {"task": "FI-KID combine", "name": "fan-in", "after": list(ANSWERS)}),
        times=1,
    )
    llm.add(after_tool("FP-PARENT", "roost_spawn"), text("spawned them"))
    llm.add(task("FP-PARENT") & new_user_has('kind="report"'), text("noted"))
    for name, answer in ANSWERS.items():
        llm.add(task(f"FO-KID-{name}"), text(answer))
    llm.add(task("FI-KID"), text("combined"))
    parent = lab.run("FP-PARENT fan out, then in")
    spawned = lab.wait_tool_results("FP-PARENT", "roost_spawn", 5)
    # Within the tree's reach only: a job of another tree is not the agent's to wait on.
    assert spawned[3]["text"].startswith("error: after: no agent named 'outsider' in your session tree"), (
        spawned[3]["text"]
    )
    assert "it starts when they are done" in spawned[4]["text"], spawned[4]["text"]
    assert lab.row(outsider)["state"] in ("done", "running", "starting")
    fan_in = wait_until(lambda: lab.job_named("fan-in"), T, what="the fan-in child")
    ids = {name: lab.job_named(name)["id"] for name in ANSWERS}  # type: ignore[index]
    assert fan_in["after"]["jobs"] == [ids[name] for name in ANSWERS]
    wait_until(lambda: lab.requests_of("FI-KID"), T, what="the fan-in's first request")
    assert lab.wait(fan_in["id"], T) == "done"
    first = lab.requests_of("FI-KID")[0]
    assert_framed(user_messages(first)[0], ids)
    assert lab.record(fan_in["id"])["links"]["parentPeer"] == parent
    # The parent hears from all four, the fan-in last.
    wait_until(
        lambda: len(lab.reports_seen("FP-PARENT")) == 4,
        T,
        lambda: f"four reports ({lab.reports_seen('FP-PARENT')})",
    )
    assert lab.reports_seen("FP-PARENT")[-1]["id"] == fan_in["id"]
