"""`roost inbox` and `roost answer`: the attention inbox (roostd's `inbox` and `answer`
ops, the same list `roost web` shows)."""

from __future__ import annotations

import click

from roost.cli.common import daemon, print_json


@click.command()
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="A JSON list: each entry's id, job {id, name}, kind, text (and options, since).",
)
def inbox(as_json: bool) -> None:
    """Everything that waits for you: questions, dialogs, budget stops, failures."""
    with daemon() as client:
        found = client.request("inbox")["entries"]
    if as_json:
        print_json(found)
        return
    from roost.display.views import printable

    if not found:
        click.echo("nothing waits for you")
    for entry in found:
        job = entry["job"]
        click.echo(
            f"{entry['id']}  {printable(job['name'] or job['id'])}  {entry['kind']}: "
            f"{printable(entry['text'])}"
        )
        for number, option in enumerate(entry.get("options") or (), 1):
            click.echo(f"    {number}. {printable(option)}")
        if entry["kind"] == "approval":  # the call's whole input, escaped; then how to answer
            from roost.text.escapes import json_text

            click.echo(f"    in {printable(entry['cwd'])}")
            for line in json_text(entry["input"]).splitlines():
                click.echo(f"    {printable(line)}")
            click.echo(
                f"    roost approve {entry['id']} [--always] | roost deny {entry['id']} [--reason TEXT]"
            )


@click.command()
@click.argument("entry")
@click.argument("text", nargs=-1)
@click.option("--choice", type=click.IntRange(min=1), metavar="N", help="Pick a dialog's choice N.")
@click.option("--dismiss", is_flag=True, help="Take the entry out of the inbox, answering nothing.")
def answer(entry: str, text: tuple[str, ...], choice: int | None, dismiss: bool) -> None:
    """Answer an inbox entry (its id from `roost inbox`) with TEXT, or --choice N. A second
    answer to the same entry changes nothing and says who answered it."""
    from roost.cli.common import usage_error

    given = sum((bool(text), choice is not None, dismiss))
    if given != 1:
        usage_error("give the answer's TEXT, --choice N or --dismiss (one of them)")
    args: dict[str, object] = {"entry": entry, "by": "roost answer (CLI)"}
    if text:
        args["text"] = " ".join(text)
    elif choice is not None:
        args["choice"] = choice
    else:
        args["dismiss"] = True
    with daemon() as client:
        result = client.call("answer", args)
    if result["status"] == "already answered":
        from roost.display.views import printable

        click.echo(f"already answered by {printable(result.get('by'))} at {result.get('at')}")
        return
    click.echo(f"{result['status']} ({result['job']})")


@click.command()
@click.argument("entry")
@click.option(
    "--always",
    is_flag=True,
    help="Also allow such calls of this job from now on (bash: this exact command; "
    "another tool: every call of it).",
)
def approve(entry: str, always: bool) -> None:
    """Let a tool call waiting for approval run (ENTRY: its id in roost inbox)."""
    _decide(entry, "approve", always=always)


@click.command()
@click.argument("entry")
@click.option("--reason", metavar="TEXT", help="Why: the model reads it as the call's result.")
def deny(entry: str, reason: str | None) -> None:
    """Refuse a tool call waiting for approval; the model is told, the run goes on."""
    _decide(entry, "deny", reason=reason)


def _decide(entry: str, decision: str, **args: object) -> None:
    """Exit 0 when answered now, 1 when it already was (who and when), 2 when unknown."""
    from roost.cli.common import fail
    from roost.display.views import printable

    with daemon() as client:
        result = client.call("approval_answer", {"entry": entry, "decision": decision, "by": "cli", **args})
    if result["status"] == "already answered":
        fail(
            f"{entry} was already answered: {result.get('decision')} by "
            f"{printable(result.get('by'))} at {result.get('at')}"
        )
    rule = f"; from now on it allows {printable(result['rule'])}" if result.get("rule") else ""
    click.echo(f"{result['status']} ({result['job']}){rule}")


def register(group: click.Group) -> None:
    group.add_command(inbox)
    group.add_command(answer)
    group.add_command(approve)
    group.add_command(deny)
