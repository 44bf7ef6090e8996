"""`roost budget` and `roost usage`, and the budget options of `roost run`."""

from __future__ import annotations

import math
from typing import Any, TypeVar

import click

from roost.cli.common import daemon, print_json, usage_error
from roost.usage import GROUPS

F = TypeVar("F")


class Positive(click.ParamType):
    """A number > 0 (a finite amount, or a whole count), refused in words a person reads:
    click's FloatRange says "'abc' is not a valid float range"."""

    def __init__(self, whole: bool) -> None:
        self.whole = whole
        self.name = "count" if whole else "amount"
        self.wanted = "a whole number >= 1, e.g. 20" if whole else "a number > 0, e.g. 2.50"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return value
        try:
            number: float = int(value) if self.whole else float(value)
        except ValueError:
            self.fail(f"{value!r} is not {self.wanted}", param, ctx)
        if not math.isfinite(number) or number <= 0:
            self.fail(f"{value} is not {self.wanted}", param, ctx)
        return number


POSITIVE = Positive(whole=False)
POSITIVE_INT = Positive(whole=True)


class OldSpelling(click.Option):
    """An option whose names after the first are old spellings: still accepted, not shown
    in --help (one spelling per flag across commands)."""

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        names, self.opts = self.opts, self.opts[:1]
        try:
            return super().get_help_record(ctx)
        finally:
            self.opts = names

    def get_error_hint(self, ctx: click.Context | None) -> str:
        return f"'{self.opts[0]}'"


def run_options(func: F) -> F:
    """`roost run`'s budget options."""
    for option in reversed(
        (
            click.option(
                "--budget",
                type=POSITIVE,
                default=None,
                help="Stop the job once it has cost this much (the model's currency).",
            ),
            click.option(
                "--budget-tokens",
                type=POSITIVE_INT,
                default=None,
                help="Stop the job after this many tokens (models without prices).",
            ),
            click.option(
                "--max-turns",
                type=POSITIVE_INT,
                default=None,
                help="Stop the job after this many model requests.",
            ),
            click.option(
                "--tree-budget",
                type=POSITIVE,
                default=None,
                help="A budget the job shares with every child it spawns.",
            ),
        )
    ):
        func = option(func)  # type: ignore[type-var]
    return func


def run_args(
    budget: float | None, budget_tokens: int | None, max_turns: int | None, tree_budget: float | None
) -> dict[str, object]:
    return {"budget": budget, "budgetTokens": budget_tokens, "maxTurns": max_turns, "treeBudget": tree_budget}


@click.command("budget")
@click.argument("job")
@click.argument("amount", type=POSITIVE, required=False)
@click.option(
    "--budget-tokens",
    "--tokens",
    "tokens",
    cls=OldSpelling,
    type=POSITIVE_INT,
    default=None,
    help="A budget in tokens (as roost run --budget-tokens).",
)
@click.option("--max-turns", type=POSITIVE_INT, default=None, help="A cap on model requests.")
@click.option(
    "--tree-budget",
    type=POSITIVE,
    default=None,
    help="Set the tree budget of JOB, a tree's root (as roost run --tree-budget).",
)
@click.option(
    "--tree",
    is_flag=True,
    hidden=True,
    help="The old spelling of --tree-budget: AMOUNT is the tree's budget.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the job's id and usage as JSON.")
def budget_cmd(
    job: str,
    amount: float | None,
    tokens: int | None,
    max_turns: int | None,
    tree_budget: float | None,
    tree: bool,
    as_json: bool,
) -> None:
    """Set (or raise) JOB's budget to AMOUNT; a job stopped by its budget continues.

    On a tree root with a tree budget and no budget of its own, AMOUNT is the tree's."""
    from roost.usage.show import format_cost

    if tree_budget is not None:
        if amount is not None or tree:
            usage_error("give AMOUNT or --tree-budget X, not both")
        amount, tree = tree_budget, True
    if amount is None and tokens is None and max_turns is None:
        usage_error("give an AMOUNT, --tree-budget X, --budget-tokens N or --max-turns N")
    if tree and amount is None:
        usage_error("--tree needs an AMOUNT")
    with daemon() as client:
        result = client.request(
            "budget", job=job, budget=amount, budgetTokens=tokens, maxTurns=max_turns, tree=tree
        )
    if as_json:
        print_json(result)
        return
    usage = result["usage"]
    tree = bool(result.get("tree"))
    what = (
        f"tree budget {format_cost(usage['treeBudget'])}"
        if tree
        else ", ".join(
            part
            for part in (
                f"budget {format_cost(usage['budget'])}" if usage["budget"] is not None else "",
                f"{usage['budgetTokens']} tokens" if usage["budgetTokens"] is not None else "",
                f"{usage['maxTurns']} requests" if usage["maxTurns"] is not None else "",
            )
            if part
        )
    )
    click.echo(f"{result['id']}: {what} (spent {format_cost(usage['cost'])})")


@click.command("usage")
@click.option("--since", metavar="DATE", help="Only from this day on (YYYY-MM-DD, UTC).")
@click.option(
    "--by",
    type=click.Choice(GROUPS),
    default="job",
    show_default=True,
    help="One row per job, tree, model or UTC day.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def usage_cmd(since: str | None, by: str, as_json: bool) -> None:
    """Tokens and cost of every job, removed ones included."""
    from roost.pi.transcript import read_entries
    from roost.usage import log as usage_log
    from roost.usage import summary
    from roost.usage.show import format_cost, format_tokens

    try:
        day = summary.parse_since(since)
    except ValueError as exc:
        usage_error(str(exc))
    with daemon() as client:
        rows = client.request("list")["jobs"]
    lines = summary.live_lines(rows, read_entries) + list(usage_log.read())
    result = summary.report(lines, by=by, since=day)
    if as_json:
        print_json(result)
        return
    if not result["rows"]:
        click.echo("no usage recorded" + (f" since {day}" if day else ""))
        return
    from roost.display.output import field

    labels = []
    for row in result["rows"]:
        label = row["key"]
        if by == "job":
            label = f"{row['key']} {row.get('name') or ''}".strip()
            if row.get("removed"):
                label += " (rm)"
        elif by == "tree":
            label = str(row.get("name") or row["key"])
        labels.append(field(label))
    width = max([24, *(len(label) for label in labels)])  # a name is never cut
    click.echo(
        f"{by.upper():<{width}} {'REQ':>5} {'INPUT':>8} {'OUTPUT':>8} {'CACHE R':>8} "
        f"{'CACHE W':>8} {'COST':>10}"
    )

    def line(label: str, row: dict[str, Any]) -> str:
        tokens = [format_tokens(int(row[key])) for key in ("input", "output", "cacheRead", "cacheWrite")]
        return (
            f"{label:<{width}} {row['requests']:>5} "
            + " ".join(f"{t:>8}" for t in tokens)
            + f" {format_cost(row['cost']):>10}"
        )

    for label, row in zip(labels, result["rows"], strict=True):
        click.echo(line(label, row))
    click.echo(line("total", result["total"]))


def register(group: click.Group) -> None:
    group.add_command(budget_cmd)
    group.add_command(usage_cmd)
