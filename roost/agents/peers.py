"""Peers, relations, reach and name resolution: pure logic, no processes.

A peer is a background job (id = job id) or a connected foreground pi (id = `f` + 7 hex).
One session file can have several records over time; lists collapse them into one peer,
preferring the live holder: connected foreground > live job > ended job.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from roost.job.states import PeerKind

PEER_ID = re.compile(r"^f[0-9a-f]{7}$")

RANK_FOREGROUND, RANK_LIVE_JOB, RANK_ENDED_JOB = 0, 1, 2


@dataclass
class Peer:
    id: str
    name: str
    kind: PeerKind
    session: str | None
    state: str
    cwd: str
    live: bool
    status: str = ""
    summary: str = ""
    question: str | None = None
    parent_session: str | None = None
    parent_peer: str | None = None
    root_session: str | None = None
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def rank(self) -> int:
        if self.kind == PeerKind.FOREGROUND:
            return RANK_FOREGROUND
        return RANK_LIVE_JOB if self.live else RANK_ENDED_JOB

    @property
    def root(self) -> str | None:
        return self.root_session or self.session

    def row(self, relation: str) -> dict[str, object]:
        return {
            "id": self.id,
            "name": self.name,
            "relation": relation,
            "state": self.state,
            "status": self.status,
            "summary": self.summary,
            "question": self.question,
            "cwd": self.cwd,
            "cost": self.extra.get("cost"),
        }


def collapse(peers: Iterable[Peer]) -> list[Peer]:
    """One peer per session file (the best ranked); session-less peers stay as they are."""
    best: dict[str, Peer] = {}
    loose: list[Peer] = []
    for peer in peers:
        if peer.session is None:
            loose.append(peer)
            continue
        current = best.get(peer.session)
        if current is None or peer.rank < current.rank:
            best[peer.session] = peer
    return list(best.values()) + loose


def relation(viewer: Peer, other: Peer) -> str:
    """What `other` is to `viewer`: parent, child, sibling, tree or external."""
    if (
        other.parent_session
        and other.parent_session == viewer.session
        or (other.parent_peer and other.parent_peer == viewer.id)
    ):
        return "child"
    if (
        viewer.parent_session
        and viewer.parent_session == other.session
        or (viewer.parent_peer and viewer.parent_peer == other.id)
    ):
        return "parent"
    if (viewer.parent_session and viewer.parent_session == other.parent_session) or (
        viewer.parent_peer and viewer.parent_peer == other.parent_peer
    ):
        return "sibling"
    if viewer.root is not None and viewer.root == other.root:
        return "tree"
    return "external"


class ResolveError(Exception):
    """An unknown, ambiguous or unreachable target (the message says which)."""


def reachable(viewer: Peer, peers: Iterable[Peer], external_allowed: bool) -> list[tuple[Peer, str]]:
    """Peers `viewer` may list: its tree, plus external ones when allowed; never itself."""
    out = []
    for peer in collapse(peers):
        if peer.id == viewer.id or (viewer.session and peer.session == viewer.session):
            continue
        rel = relation(viewer, peer)
        if rel == "external" and not external_allowed:
            continue
        out.append((peer, rel))
    return out


def resolve(viewer: Peer, target: str, peers: list[Peer], external_allowed: bool) -> tuple[Peer, str]:
    """The peer `target` names (an id, or an exact name unique within the tree)."""
    target = target.strip()
    if not target:
        raise ResolveError("no target given")
    collapsed = collapse(peers)
    if target == viewer.id:
        raise ResolveError("you cannot send a message to yourself")
    by_id = [p for p in collapsed if p.id == target]
    if not by_id:  # an older record of a session answers for the session's current peer
        by_id = [p for p in peers if p.id == target]
        if by_id and by_id[0].session:
            by_id = [p for p in collapsed if p.session == by_id[0].session]
    if by_id:
        peer = by_id[0]
        if viewer.session and peer.session == viewer.session:
            raise ResolveError("you cannot send a message to yourself")
        rel = relation(viewer, peer)
        if rel == "external" and not external_allowed:
            raise ResolveError(
                f"{target} is outside your session tree; messages to other trees are off "
                "(agentExternalMessages in ~/.pi/agent/roost.json)"
            )
        return peer, rel
    named = [
        (p, relation(viewer, p))
        for p in collapsed
        if p.name == target and p.id != viewer.id and not (viewer.session and p.session == viewer.session)
    ]
    in_tree = [(p, rel) for p, rel in named if rel != "external"]
    if len(in_tree) == 1:
        return in_tree[0]
    if len(in_tree) > 1:
        ids = ", ".join(sorted(p.id for p, _ in in_tree))
        raise ResolveError(f"the name {target!r} is ambiguous ({ids}): use an id")
    if named:
        raise ResolveError(
            f"no agent named {target!r} in your session tree; agents outside it are reached by exact id only"
        )
    raise ResolveError(f"no agent with id or name {target!r} (see roost_agents)")
