"""`roost inbox` and `roost answer`: the attention inbox (roostd's `inbox` and `answer`
ops, the same list `roost web` shows)."""

from __future__ import annotations

import click

from roost.cli.common import daemon, print_json


@click.command()
@click.option("--json", "as_json", is_flag=True,
              help="A JSON list: each entry's id, job {id, name}, kind, text (and options, since).")
def inbox(as_json: bool) -> None:
    """Everything that waits for you: questions, dialogs, budget stops, failures."""
    with daemon() as client:
        found = client.request("inbox")["entries"]
    if as_json:
        print_json(found)
        return
    from roost.cli.views import printable

    if not found:
        click.echo("nothing waits for you")
    for entry in found:
        job = entry["job"]
        click.echo(f"{entry['id']}  {printable(job['name'] or job['id'])}  {entry['kind']}: "
                   f"{printable(entry['text'])}")
        for number, option in enumerate(entry.get("options") or (), 1):
            click.echo(f"    {number}. {printable(option)}")


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
        from roost.cli.views import printable

        click.echo(f"already answered by {printable(result.get('by'))} at {result.get('at')}")
        return
    click.echo(f"{result['status']} ({result['job']})")


def register(group: click.Group) -> None:
    group.add_command(inbox)
    group.add_command(answer)
