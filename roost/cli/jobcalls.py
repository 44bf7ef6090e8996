"""What `roost ls`, `roost reply`, `roost run` and `roost wait JOB` do once their arguments
are known, without click: their click commands (roost.cli.commands.jobs) and the entry's
quick path (roost.cli.entry) both call these, so the two print and exit alike."""

from __future__ import annotations

import sys

from roost.cli.common import daemon, echo, fail, print_json

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a CLI start-up cost)

if TYPE_CHECKING:
    from typing import Any


def list_jobs(as_json: bool, tree: bool = False, group: str = "dir", wide: bool = False) -> None:
    if as_json:
        with daemon() as client:  # roostd makes the document (its `list` op's `text`)
            result = client.request("list", text=True, tree=tree)
        if "text" in result:
            echo(result["text"])
        else:  # a roostd from before `text`
            from roost.job.tree import tree_order

            print_json(tree_order(result["jobs"]) if tree else result["jobs"])
        return
    with daemon() as client:
        rows = client.request("list")["jobs"]
    from roost.display import views

    views.print_table(rows, group=group, tree=tree, wide=wide)


def reply(job: str, text: str) -> None:
    with daemon() as client:
        result = client.request("reply", job=job, text=text, by="roost reply (CLI)")
    if result["status"] == "already answered":  # as `roost answer` says it
        from roost.display.views import printable

        echo(f"already answered by {printable(result.get('by'))} at {result.get('at')}")
        return
    echo(result["status"])
    if result.get("why"):  # queued on a failed job: nothing runs until it is started again
        from roost.display.views import printable

        echo(
            f"roost: job {result['id']} failed: {printable(result['why'])}; the reply waits "
            f"in its mailbox (`roost start {result['id']}` delivers it)",
            err=True,
        )
    if result["status"] == "stopped":
        fail(f"job {result['id']} is stopped; `roost start {result['id']}` first")


def pi_task(task: str, cwd: str) -> dict[str, Any]:
    """The `run` request of `roost run TASK` with no option."""
    return {
        "name": None,
        "cwd": cwd,
        "group": None,
        "priority": None,
        "task": task,
        "model": None,
        "thinking": None,
        "agent": None,
        "budget": None,
        "budgetTokens": None,
        "maxTurns": None,
        "treeBudget": None,
    }


def start(args: dict[str, Any], shell: bool) -> None:
    """Send `run` (with the caller's environment) and print the new job's id."""
    from roost.job.env import caller_env

    args["env"] = caller_env()  # the job runs with it (README: A job's environment)
    with daemon() as client:
        result = client.request("run", **args)
    echo(result["id"])
    if result.get("state") == "failed":  # a dependency had failed already
        from roost.display.output import field

        echo(field(f"roost: job {result['id']} failed at once: {result.get('error')}"), err=True)
    if result.get("position") is not None:
        echo(f"roost: job {result['id']} is queued (position {result['position']})", err=True)
    import os.path

    from roost.host.homes import agent_dir

    theirs, ours = result.get("agentDir"), agent_dir()
    if not shell and theirs is not None and os.path.normpath(theirs) != os.path.normpath(ours):
        echo(
            f"roost: note: the job's pi uses roostd's agent dir {theirs}, "
            f"not {ours} (PI_CODING_AGENT_DIR here); to change it, "
            "`roost daemon stop` and run again from this shell",
            err=True,
        )


def wait_one(job: str, timeout: float | None) -> None:
    """`roost wait JOB [--timeout S]`: the state once the job's current run has settled."""
    with daemon() as client:
        # The daemon answers `settled: false` at `timeout`; our socket waits a little longer.
        result = client.call(
            "wait", {"job": job, "timeout": timeout}, None if timeout is None else timeout + 30
        )
    row = result["row"]
    if not result["settled"]:
        echo(f"roost: timed out; job {row['id']} is {row['state']}", err=True)
        sys.exit(1)
    echo(row["state"])
    if row["state"] == "failed":  # why, and what to do (stdout stays one word); exit 1
        from roost.display.views import printable

        reason = row.get("error") or row.get("status") or row.get("summary")
        echo(f"roost: job {row['id']} failed" + (f": {printable(reason)}" if reason else ""), err=True)
        sys.exit(1)
