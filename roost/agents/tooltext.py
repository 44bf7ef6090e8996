"""The text of every agent tool's result (`roost_agents`, `roost_send`, `roost_spawn`): built
here, once, for roostd's answer; the extension only prints it, so every text is roost's, in Python."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from roost.job.states import Outcome
from roost.usage.show import format_cost


def peer_line(peer: Mapping[str, Any]) -> str:
    """One peer: `ID "NAME" RELATION STATE (status) $COST — summary ? question`."""
    line = f'{peer["id"]} "{peer["name"]}" {peer["relation"]} {peer["state"]}'
    if peer.get("status"):
        line += f" ({peer['status']})"
    if isinstance(peer.get("cost"), int | float):
        line += f" {format_cost(peer['cost'])}"
    if peer.get("summary"):
        line += f" — {peer['summary']}"
    if peer.get("question"):
        line += f" ? {peer['question']}"
    return line


def peers_text(peers: Iterable[Mapping[str, Any]]) -> str:
    lines = [peer_line(peer) for peer in peers]
    return "\n".join(lines) if lines else "no other agent sessions you can reach"


def send_text(outcome: Outcome, relation: str, peer_id: str, name: str) -> str:
    """The outcome word first (a script or a model matches on it: README, Agent tools),
    then whom it went to."""
    return f'{outcome.value} ({relation}) → {peer_id} "{name}"'


def spawn_text(
    job_id: str,
    name: str,
    worktree: Mapping[str, Any] | None = None,
    position: int | None = None,
    waiting: str | None = None,
) -> str:
    where = f" in worktree {worktree['path']} on branch {worktree['branch']}" if worktree else ""
    if waiting is not None:  # `after`: it starts once its dependencies are done
        return (
            f'{waiting}: spawned {job_id} "{name}"{where}; it starts when they are done, '
            "with their answers. Its report will arrive by itself when it ends a turn; "
            "do not poll."
        )
    if position is not None:  # past a limit: it starts when a slot (or its tree) has room
        return (
            f'queued (position {position}): spawned {job_id} "{name}"{where}; it starts '
            "when there is room. Its report will arrive by itself when it ends a turn; "
            "do not poll."
        )
    return (
        f'spawned {job_id} "{name}"{where}. Its report will arrive by itself when it ends '
        "a turn; do not poll."
    )
