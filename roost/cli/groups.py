"""roost's click groups (`roost` itself, and `agents`, `schedule`, `group`, `daemon`):

- with no COMMAND, a group runs its `default` (`roost agents` is `roost agents ls`), or,
  without one, prints its help on stdout and exits 0 (click's rule: the help as an error,
  exit 2);
- an unknown COMMAND is one usage line that suggests the nearest (`roost log`: did you
  mean `roost logs`?), from every command of the group, not only those loaded yet
  (click's suggestion reads `Group.commands`: the root's are registered on first use, so
  it never had one), and from the names other tools use (`ps`, `list`: `ls`).
"""

from __future__ import annotations

from typing import Any

import click

ALIASES = {
    "ps": "ls",
    "list": "ls",
    "dir": "ls",
    "log": "logs",
    "tail": "logs",
    "kill": "stop",
    "remove": "rm",
    "delete": "rm",
    "del": "rm",
    "send": "reply",
}
"""Names other tools give a command, and roost's for it (suggested where the group has it)."""


class Group(click.Group):
    """A roost group: `default` (a command's name) runs when no COMMAND is given."""

    def __init__(self, *args: Any, default: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.default = default

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args and not ctx.resilient_parsing:
            if self.default is None:
                click.echo(ctx.get_help())
                ctx.exit(0)
            args = [self.default]
        return super().parse_args(ctx, args)

    def format_help_text(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        super().format_help_text(ctx, formatter)
        if self.default is not None:
            with formatter.indentation():
                formatter.write_paragraph()
                formatter.write_text(f"With no COMMAND: {ctx.command_path} {self.default}.")

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except click.exceptions.NoSuchCommand as exc:
            message = f"No such command {exc.command_name!r}"
            near = self.nearest(ctx, exc.command_name)
            if near:
                message += (
                    "; did you mean " + " or ".join(f"{ctx.command_path} {name}" for name in near) + "?"
                )
            raise click.UsageError(message, ctx) from None

    def nearest(self, ctx: click.Context, name: str) -> list[str]:
        """The group's commands closest to `name` (at most three), an alias's first."""
        import difflib

        commands = self.list_commands(ctx)
        near = difflib.get_close_matches(name.lower(), commands, n=3)
        alias = ALIASES.get(name.lower())
        if alias in commands:
            near = [alias, *(other for other in near if other != alias)][:3]
        return near
