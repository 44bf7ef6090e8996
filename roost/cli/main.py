"""The `roost` command line: the group, `--version`, and the commands of
`roost.cli.commands`, each module imported when one of its commands runs. Every command
but `daemon run|stop|status` starts roostd when it is not running. Errors go to stderr
with a non-zero exit; `--json` output is stable (README: JSON output).

Start-up is part of every command's wall time (the targets: `roost ls --json`, `reply`
and `run` within 60 ms with roostd up, README: Start-up), so the plain forms of those
never reach this module (roost.cli.entry runs them without click), and the command modules
import only click, the standard library and the light `views` at the top. The client, the protocol and the
socket are imported by `common.daemon()` (`roost --help` never loads them); rich, the
mailbox package and textual by the commands (and view functions) that use them.
`benchmarks/cli_bench.py` measures it, including which heavy modules each command loads.
"""

from __future__ import annotations

import sys
from typing import NoReturn

import click

from roost.cli.common import fail, usage_error
from roost.cli.groups import Group

COMMANDS = {
    "daemon": "daemon",
    **dict.fromkeys(("run", "ls", "show", "reply", "wait", "logs", "stop", "start", "rm", "mailbox"), "jobs"),
    "events": "events",
    "result": "results",
    **dict.fromkeys(("diff", "merge", "gc"), "worktrees"),
    "attach": "attach",
    **dict.fromkeys(("queue", "group"), "queue"),
    "view": "view",
    "web": "web",
    "acp": "acp",
    "mcp": "mcp",
    **dict.fromkeys(("inbox", "answer", "approve", "deny"), "inbox"),
    "agents": "agents",
    "schedule": "schedule",
    "search": "search",
    **dict.fromkeys(("budget", "usage"), "usage"),
    **dict.fromkeys(("install", "doctor", "notify", "demo"), "setup"),
}
"""Each command and its module in roost.cli.commands, imported only when the command runs
(or `roost --help` lists it): a command pays for its own module only."""

SHORT = {
    "acp": "Serve roost's jobs to editors over ACP (Zed, JetBrains, Neovim).",
    "agents": "Named agent definitions (TOML): list, show, create, check.",
    "answer": "Answer an inbox entry with TEXT or --choice N.",
    "approve": "Let a tool call waiting for approval run (--always: from now on).",
    "attach": "Open a job's session in pi in the foreground; quit to detach.",
    "budget": "Set or raise a job's budget (a job stopped by it continues).",
    "daemon": "Run, start, stop or inspect roostd.",
    "demo": "The showcase: real pi with roost's scripted model, no API key.",
    "deny": "Refuse a tool call waiting for approval (--reason TEXT).",
    "diff": "A worktree job's changes against its base (uncommitted too).",
    "doctor": "Check pi, node, the extension, the model, roostd and ROOST_HOME.",
    "events": "roostd's event log; --follow streams new events.",
    "gc": "Remove the worktrees of removed jobs and prune git's records.",
    "group": "Named groups, each with its own limit of jobs running at once.",
    "inbox": "What waits for you: questions, dialogs, budget stops, failures.",
    "install": "Install roost's pi extension where pi loads it.",
    "logs": "A job's transcript (a shell job: its output); -f follows it.",
    "ls": "List jobs.",
    "mailbox": "A job's pending mailbox items (--all: acknowledged ones too).",
    "mcp": "Serve roost's jobs to MCP clients (Claude Code, Codex, pi).",
    "merge": "Merge a worktree job's branch; on a conflict nothing changes.",
    "notify": "Desktop notifications (notify-send) for jobs that need you.",
    "queue": "The queued jobs in start order, with maxRunning and the groups.",
    "reply": "Send a user reply: prints delivered, queued, started or stopped.",
    "result": "Print a job's structured result (roost run --output-schema).",
    "rm": "Stop and remove jobs (and their worktrees; branches are kept).",
    "run": "Start a pi job with TASK (or a shell job); prints its id.",
    "schedule": "Runs that start by themselves: at times or when files change.",
    "search": "Search every job's conversation: words, phrases, retr*, AND/OR/NOT.",
    "show": "One job in detail.",
    "start": "Start a stopped or ended job again.",
    "stop": "Stop a job (messages never wake it; roost start does).",
    "usage": "Tokens and cost of every job, removed ones included.",
    "view": "The live agent view: the tree of jobs, their states and questions.",
    "wait": "Block until a job's run has settled (--any/--all: several jobs).",
    "web": "Serve roost in a browser; prints a one-time pairing link.",
}
"""`roost --help`'s line for each command, whole at 80 columns (click's default, the help's
first sentence, is cut at the width with `...`: mid-phrase for most)."""


class Commands(Group):
    """The `roost` group: its commands come from COMMANDS, registered on first use (alone,
    `roost` prints its help; an unknown command suggests the nearest: roost.cli.groups)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(COMMANDS) | set(self.commands))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            import importlib

            importlib.import_module(f"roost.cli.commands.{COMMANDS[cmd_name]}").register(self)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's listing, with each command's line from SHORT."""
        limit = formatter.width - 6 - max(len(name) for name in COMMANDS)
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, SHORT.get(name) or command.get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _print_version(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    # Light: package.json reads only (pi and node are not run), no heavy module.
    from roost.cli.doctor.report import version_text

    click.echo(version_text())
    ctx.exit()


@click.group(
    cls=Commands,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="Exit codes: 0 done, 1 refused or failed, 2 a usage error or an unknown job (docs: Exit codes).",
)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show roost's and pi's versions and exit.",
)
def cli() -> None:
    """roost: supervised background pi sessions that talk to each other."""


def usage_line(exc: click.UsageError) -> str:
    """A click usage error as one line: what is wrong, and where the help is (click's own
    display is three lines: usage, a hint, the error)."""
    import re

    message = exc.format_message().rstrip(".")
    command = exc.ctx.command if exc.ctx else None
    if (
        isinstance(exc, click.NoSuchOption)
        and command is not None
        and re.fullmatch(r"-(\d+\.?\d*|\.\d+)", exc.option_name)
    ):
        # `roost budget JOB -1`: a negative number reads as an option to click.
        from roost.cli.commands.usage import Positive

        numbers = [
            p.human_readable_name
            for p in command.params
            if isinstance(p, click.Argument) and isinstance(p.type, Positive)
        ]
        message = f"{exc.option_name}: a negative number is not accepted" + (
            f" ({' and '.join(numbers)} must be > 0)" if numbers else ""
        )
    where = exc.ctx.command_path if exc.ctx else "roost"
    return f"{message} (see {where} --help)"


def run_cli(command: click.Command, prog_name: str) -> NoReturn:
    """Run a click command with roost's error rule: every error is one line on stderr,
    exit 2 for a usage error, 1 for anything refused (README: Exit codes).

    Every write to stdout and stderr goes through the output layer (roost.display.output), which
    shows control characters as escapes; click is told not to strip escape sequences itself
    (`color=True`), so that a pipe gets them shown too, not silently dropped."""
    from roost.display.output import guard_streams

    guard_streams()
    try:
        code = command.main(prog_name=prog_name, standalone_mode=False, color=True)
    except click.UsageError as exc:
        usage_error(usage_line(exc))
    except click.ClickException as exc:
        fail(exc.format_message(), exc.exit_code)
    except click.Abort:
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)


def main() -> None:
    run_cli(cli, "roost")


def roostd_main() -> None:
    """`roostd`: `roost daemon run` under its own name (`roostd --help` prints help)."""
    from roost.cli.commands.daemon import daemon_run

    run_cli(daemon_run, "roostd")


if __name__ == "__main__":
    main()
