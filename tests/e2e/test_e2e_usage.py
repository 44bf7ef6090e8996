"""Usage, cost and budgets with the real pi and the scripted model reporting usage
(issue 12). Runs on either pi line (ROOST_PI / ROOST_NODE pick it)."""

from __future__ import annotations

import json
import os
import re
import signal
from typing import Any

import pytest
from kit.matchers import after_tool, fresh, new_user_has, task
from kit.testpi import make_agent_dir
from kit.wait import wait_until

from roost.fakellm import text, tool_call
from roost.fakellm.requests import message_text, messages, tool_results
from roost.view.app import table_rows

T = 90.0
# Prices per million tokens (pi's models.json `cost`), and what every scripted request
# reports: 10000 prompt tokens of which 4000 cached, 2000 completion tokens.
PRICES = {"input": 10.0, "output": 40.0, "cacheRead": 1.0, "cacheWrite": 12.5}
USAGE = (10000, 2000, 4000)
PER_REQUEST = {"input": 6000, "output": 2000, "cacheRead": 4000, "cacheWrite": 0}
COST = (6000 * 10.0 + 2000 * 40.0 + 4000 * 1.0) / 1e6  # $0.144


def priced_lab(make_lab: Any, **settings: Any) -> Any:
    lab = make_lab(**settings)
    make_agent_dir(lab.agent_dir, lab.llm.base_url, cost=PRICES)
    return lab


def expected(requests: int) -> dict[str, Any]:
    return {**{k: v * requests for k, v in PER_REQUEST.items()}, "requests": requests}


def assert_figures(usage: dict[str, Any], requests: int, tree: int | None = None) -> None:
    for key, value in expected(requests).items():
        assert usage[key] == value, (key, usage)
    assert usage["cost"] == pytest.approx(COST * requests, abs=1e-9), usage
    assert usage["treeCost"] == pytest.approx(COST * (tree or requests), abs=1e-9), usage


def loop_steps(steps: int) -> Any:
    """A reply: `steps` bash calls, then a final text; each request reports USAGE."""

    def reply(request: dict[str, Any]) -> Any:
        done = len(tool_results(request))
        if done < steps:
            return tool_call("bash", {"command": f"echo step {done}"}, usage=USAGE)
        return text(f"finished {steps} steps", usage=USAGE)

    return reply


def test_figures_equal_what_the_model_reported_across_restarts(make_lab: Any) -> None:
    """Row, show, usage report and view agree with the model's usage; a roostd restart and
    a worker restart (which re-reads the session file) neither lose nor double anything;
    `roost usage` keeps a removed job's figures."""
    lab = priced_lab(make_lab)
    lab.llm.add(task("UA-1"), loop_steps(3))
    job = lab.run("UA-1 count my tokens", name="counter")
    assert lab.wait(job) == "done"
    row = lab.ls()[0]
    assert_figures(row["usage"], 4)
    assert len(lab.requests_of("UA-1")) == 4

    lab.cli("daemon", "stop")  # the worker lives on; roostd comes back with the next call
    assert_figures([r for r in lab.ls() if r["id"] == job][0]["usage"], 4)

    lab.cli("stop", job)
    lab.cli("daemon", "stop")  # no worker now: the figures come from job.json
    assert_figures([r for r in lab.ls() if r["id"] == job][0]["usage"], 4)
    lab.cli("start", job)
    lab.wait_state(job, "done")
    shown = json.loads(lab.cli("show", job, "--json").stdout)
    assert_figures(shown["usage"], 4)
    assert len(lab.requests_of("UA-1")) == 4  # the restart asked the model nothing

    # The same numbers in the CLI table, the show block, the JSON report and the view.
    cost_text = f"${COST * 4:.2f}"
    assert cost_text in lab.cli("ls").stdout
    assert cost_text in lab.cli("show", job).stdout
    report = json.loads(lab.cli("usage", "--json").stdout)
    [line] = [r for r in report["rows"] if r["key"] == job]
    assert line["cost"] == pytest.approx(COST * 4) and line["removed"] is False
    assert {k: line[k] for k in PER_REQUEST} == {k: v * 4 for k, v in PER_REQUEST.items()}
    view = dict(table_rows(lab.ls()))
    assert view[job][4].plain == cost_text  # the COST column, as in `roost ls`
    by_model = json.loads(lab.cli("usage", "--json", "--by", "model").stdout)
    assert by_model["rows"][0]["key"].endswith("fake-model")
    assert by_model["total"]["cost"] == pytest.approx(COST * 4)

    lab.cli("rm", job)
    report = json.loads(lab.cli("usage", "--json").stdout)
    [line] = [r for r in report["rows"] if r["key"] == job]
    assert line["removed"] is True and line["requests"] == 4
    assert line["cost"] == pytest.approx(COST * 4)
    assert "(rm)" in lab.cli("usage").stdout
    later = json.loads(lab.cli("usage", "--json", "--since", "2999-01-01").stdout)
    assert later["rows"] == []


def test_budget_warns_stops_reports_ended_and_raising_continues(make_lab: Any) -> None:
    """A child spawned with a budget of $1.00 spends $0.144 a request: one warning at 80%
    (to it and to its parent), stopped within one request of the limit, `failed` with the
    reason, the parent gets `ended:`; `roost budget` lets it continue."""
    lab = priced_lab(make_lab)
    llm = lab.llm
    llm.add(
        fresh("UB-P"),
        tool_call("roost_spawn", {"task": "UB-C spend money", "name": "spender", "budget": 1.0}),
    )
    llm.add(after_tool("UB-P", "roost_spawn"), text("spawned"))
    llm.add(task("UB-P") & new_user_has("LIST-PEERS"), tool_call("roost_agents", {}))
    llm.add(after_tool("UB-P", "roost_agents"), text("listed"))
    llm.add(task("UB-P"), text("noted"))
    after_raise = new_user_has("budget was raised") | new_user_has("keep going")
    llm.add(task("UB-C") & after_raise, text("finished after the raise", usage=(100, 10)))
    llm.add(task("UB-C"), lambda r: tool_call("bash", {"command": "echo spend"}, usage=USAGE))

    parent = lab.run("UB-P parent task", name="payer")
    child = wait_until(lambda: lab.job_named("spender"), T, "the child")["id"]
    record = lab.wait_state(child, "failed", timeout=T)
    # $0.144 a request: the 7th crosses $1.00 ($1.008); at most one more request was made
    # (cut short by the abort, so it reported nothing).
    assert record["error"] == "budget exhausted: $1.01 of $1.00", record
    child_requests = lab.requests_of("UB-C")
    assert 7 <= len(child_requests) <= 8, len(child_requests)
    row = [r for r in lab.ls() if r["id"] == child][0]
    assert row["state"] == "failed" and row["status"] == "budget exhausted: $1.01 of $1.00"
    assert row["usage"]["requests"] in (7, 8) and row["usage"]["budget"] == 1.0
    assert row["usage"]["cost"] == pytest.approx(COST * 7)

    # The warning: a note from roost in the child's session (not a user message), once.
    notes = [
        e
        for e in lab.session(child)
        if e.get("type") == "custom_message"
        and "you have used 80% of your budget" in json.dumps(e.get("content"))
    ]
    assert len(notes) == 1, notes
    assert "[roost]" in json.dumps(notes[0]["content"])

    def parent_saw(needle: str) -> bool:
        return any(
            needle in message_text(m)
            for r in lab.requests_of("UB-P")
            for m in messages(r)
            if m.get("role") == "user"
        )

    wait_until(lambda: parent_saw("you have used 80% of your budget"), T, "the parent's warning")
    wait_until(lambda: parent_saw("ended: budget exhausted: $1.01 of $1.00"), T, "the parent's ended: report")
    assert lab.wait(parent) == "done"

    # roost_agents shows each peer's cost.
    lab.reply(parent, "LIST-PEERS")
    [listing] = lab.wait_tool_results("UB-P", "roost_agents")
    assert re.search(
        rf'{child} "spender" child failed \(budget exhausted: \$1\.01 of \$1\.00\) '
        r"\$1\.01",
        listing["text"],
    ), listing
    assert lab.wait(parent) == "done"

    # No new run while over budget, not even after a worker restart: a reply waits.
    lab.cli("stop", child)
    lab.cli("start", child)
    record = lab.wait_state(child, "failed", timeout=T)
    assert record["error"] == "budget exhausted: $1.01 of $1.00", record
    assert lab.reply(child, "keep going") == "queued"
    assert len(lab.requests_of("UB-C")) == len(child_requests)
    assert lab.wait(child, timeout=10) == "failed"  # settled: nothing runs until raised
    waited = lab.roost("wait", child, "--timeout", "10")  # why, not its task; exit 1
    assert (waited.returncode, waited.stderr) == (
        1,
        f"roost: job {child} failed: budget exhausted: $1.01 of $1.00\n",
    ), waited
    assert lab.record(child)["usage"]["requests"] == row["usage"]["requests"]  # not doubled

    out = lab.cli("budget", child, "5").stdout
    assert "budget $5.00" in out
    lab.wait_request(task("UB-C") & new_user_has("budget was raised"), timeout=T)
    wait_until(
        lambda: (
            lab.record(child).get("error") is None and lab.record(child).get("state") in ("done", "running")
        ),
        T,
        "the raise",
    )


def test_spawn_over_the_tree_budget_is_refused_until_raised(make_lab: Any) -> None:
    lab = priced_lab(make_lab)
    llm = lab.llm
    llm.add(fresh("UC-P"), tool_call("roost_spawn", {"task": "UC-C child", "name": "pricey", "budget": 2.0}))
    llm.add(
        task("UC-P") & new_user_has("AGAIN"),
        tool_call("roost_spawn", {"task": "UC-C child", "name": "pricey", "budget": 2.0}),
    )
    llm.add(after_tool("UC-P", "roost_spawn"), text("tried"))
    llm.add(task("UC-C"), text("child ok"))
    parent = lab.cli("run", "--tree-budget", "0.5", "--name", "frugal", "UC-P root").stdout.strip()
    assert lab.wait(parent) == "done"
    [result] = lab.tool_results_of("UC-P", "roost_spawn")
    assert re.search(
        r"error: budget \$2\.00 exceeds what is left of the tree's budget "
        r"\(\$0\.\d\d\)",
        result["text"],
    ), result
    assert lab.job_named("pricey") is None
    root = [r for r in lab.ls() if r["id"] == parent][0]
    assert root["usage"]["treeBudget"] == 0.5

    lab.cli("budget", parent, "10", "--tree")
    lab.reply(parent, "AGAIN please")
    assert lab.wait(parent) == "done"
    results = lab.tool_results_of("UC-P", "roost_spawn")
    assert results[-1]["text"].startswith("spawned "), results
    child = lab.job_named("pricey")
    assert child is not None and child["limits"]["budget"] == 2.0
    bad = lab.cli("budget", child["id"], "3", "--tree", check=False)
    assert bad.returncode != 0 and "not a tree's root" in bad.stderr


def test_tree_budget_stops_the_whole_tree_and_survives_a_roostd_restart(make_lab: Any) -> None:
    """Two children of a root with a $1.00 tree budget spend until the tree's sum crosses
    it: roostd stops every job of the tree (at most one request each past the line); the
    root's row shows the tree's total, the same after a roostd restart; raising the tree
    budget lets the children continue."""
    lab = priced_lab(make_lab)
    llm = lab.llm
    llm.add(
        fresh("UD-P"),
        tool_call("roost_spawn", {"task": "UD-C1 spend", "name": "kid1"})
        + tool_call("roost_spawn", {"task": "UD-C2 spend", "name": "kid2"}),
    )
    llm.add(after_tool("UD-P", "roost_spawn"), text("spawned", usage=(100, 10)))
    llm.add(task("UD-P"), text("noted", usage=(100, 10)))
    raised = new_user_has("budget was raised")
    llm.add(task("UD-C1") & raised, text("kid1 finished", usage=(100, 10)))
    llm.add(task("UD-C2") & raised, text("kid2 finished", usage=(100, 10)))
    spend = lambda r: tool_call("bash", {"command": "sleep 0.2"}, usage=USAGE)  # noqa: E731
    llm.add(task("UD-C1"), spend)
    llm.add(task("UD-C2"), spend)

    root = lab.cli("run", "--tree-budget", "1", "--name", "treetop", "UD-P root").stdout.strip()
    kids = [wait_until(lambda n=n: lab.job_named(n), T, n)["id"] for n in ("kid1", "kid2")]
    for kid in kids:
        record = lab.wait_state(kid, "failed", timeout=T)
        assert record["error"].startswith("tree budget exhausted: $"), record
        assert record["error"].endswith(" of $1.00"), record
    rows = {r["id"]: r for r in lab.ls()}
    tree_cost = rows[root]["usage"]["treeCost"]
    assert tree_cost == pytest.approx(sum(r["usage"]["cost"] or 0 for r in rows.values()))
    # Past the line by at most one request of each live job of the tree.
    assert 1.0 <= tree_cost <= 1.0 + 2 * COST + 0.01, tree_cost
    spent = len(lab.requests_of("UD-C1")) + len(lab.requests_of("UD-C2"))
    # The root was warned once, by a framed note, when the tree reached 80 %.
    notes = wait_until(
        lambda: [
            e
            for e in lab.session(root)
            if e.get("type") == "custom_message" and "used 80% of your tree's budget" in json.dumps(e)
        ],
        T,
        "the tree budget warning",
    )
    assert len(notes) == 1, notes

    lab.cli("daemon", "stop")
    again = {r["id"]: r for r in lab.ls()}
    assert again[root]["usage"]["treeCost"] == pytest.approx(tree_cost)
    assert "$" in lab.cli("ls", "--tree").stdout
    assert len(lab.requests_of("UD-C1")) + len(lab.requests_of("UD-C2")) == spent

    out = lab.cli("budget", root, "5").stdout  # a tree root: AMOUNT is the tree's budget
    assert "tree budget $5.00" in out, out
    for marker in ("UD-C1", "UD-C2"):
        lab.wait_request(task(marker) & raised, timeout=T)
    for kid in kids:
        wait_until(lambda kid=kid: lab.record(kid).get("state") == "done", T, f"{kid} done")

    # Removing a child keeps its figures in the tree's total (no refund, not counted twice),
    # also after a roostd restart (then read from the usage log).
    removed_cost = {r["id"]: r for r in lab.ls()}[kids[0]]["usage"]["cost"]
    lab.cli("rm", kids[0])
    lab.wait(root)  # its `ended:` report about the removal runs a turn of the root

    def tree_total() -> tuple[float, float]:
        rows = {r["id"]: r for r in lab.ls()}
        own = rows[root]["usage"]["cost"] + rows[kids[1]]["usage"]["cost"]
        return rows[root]["usage"]["treeCost"], own + removed_cost

    shown, expected_total = tree_total()
    assert shown == pytest.approx(expected_total)
    lab.cli("daemon", "stop")
    shown, expected_total = tree_total()
    assert shown == pytest.approx(expected_total)
    tree = json.loads(lab.cli("usage", "--json", "--by", "tree").stdout)
    assert [r["cost"] for r in tree["rows"]] == [pytest.approx(expected_total)]


def test_unpriced_model_token_budget_and_turn_cap(make_lab: Any) -> None:
    """Without prices: `—` for the cost, tokens counted, --budget-tokens and --max-turns
    stop the run; bad budget input is refused with a clear error."""
    lab = make_lab()  # models.json without `cost`
    lab.llm.add(task("UE-"), lambda r: tool_call("bash", {"command": "echo t"}, usage=USAGE))
    tokens = lab.cli("run", "--budget-tokens", "30000", "UE-1 tokens").stdout.strip()
    turns = lab.cli("run", "--max-turns", "2", "UE-2 turns").stdout.strip()
    record = lab.wait_state(tokens, "failed", timeout=T)
    assert record["error"] == "token budget exhausted: 36000 of 30000 tokens", record
    record = lab.wait_state(turns, "failed", timeout=T)
    assert record["error"] == "turn limit reached: 2 of 2 model requests", record
    assert len(lab.requests_of("UE-2")) <= 3
    row = [r for r in lab.ls() if r["id"] == tokens][0]
    assert row["usage"]["cost"] is None and row["usage"]["treeCost"] is None
    assert row["usage"]["input"] == 3 * 6000 or row["usage"]["requests"] == 4
    shown = lab.cli("show", tokens).stdout
    assert "no prices" in shown

    for args, message in ((["--budget", "0"], "0"), (["--max-turns", "x"], "x")):
        bad = lab.cli("run", *args, "UE-bad", check=False)
        assert bad.returncode != 0 and message in bad.stderr
    bad = lab.cli("budget", tokens, check=False)
    assert bad.returncode != 0 and "give an AMOUNT" in bad.stderr
    bad = lab.cli("budget", "nosuchjob", "5", check=False)
    assert bad.returncode != 0 and "no job" in bad.stderr
    bad = lab.cli("usage", "--since", "last week", check=False)
    assert bad.returncode != 0 and "YYYY-MM-DD" in bad.stderr


def test_a_budget_raised_while_the_worker_is_away_reaches_it_when_it_reconnects(
    make_lab: Any,
) -> None:
    """The raise reaches only job.json while the worker cannot hear it (here: stopped with
    SIGSTOP across a roostd restart); the worker learns it when it connects again."""
    lab = priced_lab(make_lab)
    llm = lab.llm
    llm.add(task("UE-J") & new_user_has("budget was raised"), text("resumed", usage=(100, 10)))
    llm.add(task("UE-J"), lambda r: tool_call("bash", {"command": "echo spend"}, usage=USAGE))
    job = lab.cli("run", "--budget", "0.5", "--name", "away", "UE-J spend").stdout.split()[0]
    record = lab.wait_state(job, "failed", timeout=T)
    assert record["error"] == "budget exhausted: $0.58 of $0.50", record
    worker = record["process"]["workerPid"]
    os.kill(worker, signal.SIGSTOP)
    try:
        lab.cli("daemon", "stop")
        assert "budget $5.00" in lab.cli("budget", job, "5").stdout  # a new roostd, unheard
    finally:
        os.kill(worker, signal.SIGCONT)
    lab.wait_request(task("UE-J") & new_user_has("budget was raised"), timeout=T)
    wait_until(lambda: lab.record(job).get("error") is None, T, "the raise to lift the stop")
    assert lab.record(job)["process"]["workerPid"] == worker  # the same worker: it heard it on reconnect
