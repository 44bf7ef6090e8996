"""roostd's side of usage and budgets: rows, budgets at run/spawn, the tree budget, `rm`
(its ops, `budget` and `usage_note`, are in handlers/usage.py; its state is `UsageBook`).

The worker meters its own job (roost.usage.meter) and reports the figures; roostd keeps
them in the job record (saved with the record's next persisted change, and recomputed from
the session file by every worker start), sums trees, enforces a root's tree budget (the sum
crosses processes, so only roostd can), and logs a removed job's figures (roost.usage.log).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from roost.job.states import JobKind, JobState
from roost.usage import budget
from roost.usage import log as usage_log
from roost.usage.account import Usage, from_entries
from roost.usage.show import format_cost
from roost.wire import protocol
from roost.wire.protocol import BAD_REQUEST, REFUSED, RequestError

if TYPE_CHECKING:
    from roost.job.record import JobRecord
    from roost.supervise.base import JobTable

log = logging.getLogger(__name__)


def tree_key(record: JobRecord) -> str:
    return record.links.root_session or record.session or record.id


def own(record: JobRecord) -> Usage:
    return Usage.from_json(record.usage)


def tree_root(daemon: JobTable, key: str) -> JobRecord | None:
    for record in daemon.jobs.values():
        if record.session == key and not record.links.root_session:
            return record
    return None


class _Sums:
    """Every tree's sum and each session's children, from one pass over the jobs."""

    def __init__(self, daemon: JobTable) -> None:
        self.trees: dict[str, Usage] = {}
        self.children: dict[str, list[JobRecord]] = {}
        for record in daemon.jobs.values():
            self.trees.setdefault(tree_key(record), Usage()).add_usage(own(record))
            if record.links.parent_session:
                self.children.setdefault(record.links.parent_session, []).append(record)


_sums: _Sums | None = None


@contextmanager
def many_rows(daemon: JobTable) -> Iterator[None]:
    """Around the rows of many jobs at once (the `list` op): each tree's sum and the
    children index are made once, not for every row (1,000 jobs: a thousand steps, not a
    million). Only around code that does not await: no job changes meanwhile."""
    global _sums
    _sums = _Sums(daemon)
    try:
        yield
    finally:
        _sums = None


def _children(daemon: JobTable) -> dict[str, list[JobRecord]]:
    if _sums is not None:
        return _sums.children
    children: dict[str, list[JobRecord]] = {}
    for other in daemon.jobs.values():
        if other.links.parent_session:
            children.setdefault(other.links.parent_session, []).append(other)
    return children


def tree_usage(daemon: JobTable, key: str) -> Usage:
    """The root and every descendant, removed ones included."""
    total = Usage()
    if _sums is not None:
        total.add_usage(_sums.trees.get(key, Usage()))
    else:
        for record in daemon.jobs.values():
            if tree_key(record) == key:
                total.add_usage(own(record))
    removed = daemon.usage_book.removed.get(key)
    if removed is not None:
        total.add_usage(removed)
    return total


def subtree_usage(daemon: JobTable, record: JobRecord) -> Usage:
    """A job and its live descendants (a root: its whole tree, removed jobs included)."""
    if not record.links.root_session and record.session:
        return tree_usage(daemon, record.session)
    children = _children(daemon)
    total, stack, seen = Usage(), [record], set()
    while stack:
        job = stack.pop()
        if job.id in seen:
            continue
        seen.add(job.id)
        total.add_usage(own(job))
        stack.extend(children.get(job.session or "", []))
    return total


def row_usage(daemon: JobTable, record: JobRecord) -> dict[str, Any]:
    """JobRow `usage` (README: JSON output)."""
    mine = own(record).to_json()
    tree = subtree_usage(daemon, record)
    return {
        "input": mine["input"],
        "output": mine["output"],
        "cacheRead": mine["cacheRead"],
        "cacheWrite": mine["cacheWrite"],
        "cost": mine["cost"],
        "treeCost": round(tree.cost, 6) if tree.priced else None,
        "requests": mine["requests"],
        "treeTokens": tree.tokens,
        "budget": record.limits.budget,
        "budgetTokens": record.limits.budget_tokens,
        "maxTurns": record.limits.max_turns,
        "treeBudget": record.limits.tree_budget,
    }


def amount(request: dict[str, Any], key: str, integer: bool = False) -> Any:
    try:
        return budget.check_amount(request.get(key), key, integer)
    except ValueError as exc:
        raise RequestError(BAD_REQUEST, str(exc)) from None


def blocked(record: JobRecord) -> bool:
    """The job is stopped by a budget (its worker starts no run until it is raised)."""
    return record.state == JobState.FAILED and budget.is_stop_reason(record.error)


def apply_budget(daemon: JobTable, record: JobRecord, request: dict[str, Any]) -> None:
    """Set a new job's limits from a run/spawn request and the user's defaults; a spawn
    over what is left of its tree's budget is refused (RequestError)."""
    settings = daemon.settings()
    requested = amount(request, "budget")
    record.limits.budget_tokens = amount(request, "budgetTokens", integer=True)
    record.limits.max_turns = amount(request, "maxTurns", integer=True)
    default = settings.defaultJobBudget if (settings.defaultJobBudget or 0) > 0 else None
    if not record.links.spawned:
        tree = amount(request, "treeBudget")
        default_tree = settings.defaultTreeBudget
        record.limits.tree_budget = (
            tree if tree is not None else (float(default_tree) if default_tree and default_tree > 0 else None)
        )
        record.limits.budget = (
            requested if requested is not None else (float(default) if default is not None else None)
        )
        return
    if request.get("treeBudget") is not None:
        raise RequestError(BAD_REQUEST, "treeBudget is set on a tree's root, not on a child")
    key = tree_key(record)
    root = tree_root(daemon, key)
    left = None
    if root is not None and root.limits.tree_budget is not None:
        spent = tree_usage(daemon, key)
        left = root.limits.tree_budget - (spent.cost if spent.priced else 0.0)
    value, refusal = budget.child_budget(requested, default, left)
    if refusal:
        raise RequestError(REFUSED, refusal)
    record.limits.budget = value


def send_limits(
    daemon: JobTable, record: JobRecord, tree_reason: str | None = None, tree_warning: str | None = None
) -> bool:
    """Tell the job's worker its limits (and why its tree stops it, or a tree warning);
    False when no worker is connected to hear it."""
    proc = daemon.procs.get(record.id)
    if proc is None or not proc.connected or proc.conn is None:
        return False
    extra = {"treeWarning": tree_warning} if tree_warning else {}
    proc.conn.spawn(
        proc.conn.send(
            protocol.event(
                "budget",
                budget=record.limits.budget,
                budgetTokens=record.limits.budget_tokens,
                maxTurns=record.limits.max_turns,
                treeExhausted=tree_reason,
                **extra,
            )
        ),
        f"sending job {record.id} its limits",
    )
    return True


def tree_reason(daemon: JobTable, record: JobRecord) -> str | None:
    """Why the job's tree stops it now (its tree budget is used up), or None."""
    stopped = daemon.usage_book.tree_stopped.get(record.id)
    if stopped:
        return stopped
    root = tree_root(daemon, tree_key(record))
    if root is None or root.limits.tree_budget is None:
        return None
    spent = tree_usage(daemon, tree_key(record))
    if not spent.priced or spent.cost < root.limits.tree_budget:
        return None
    return f"tree budget exhausted: {format_cost(spent.cost)} of {format_cost(root.limits.tree_budget)}"


def worker_connected(daemon: JobTable, record: JobRecord) -> None:
    """A worker (re)connected: it learns the limits as they are now, since a change made
    while it was away (a raised budget, a tree stopped or lifted) reached only job.json."""
    if record.kind == JobKind.PI:
        send_limits(daemon, record, tree_reason(daemon, record))


def after_usage(daemon: JobTable, record: JobRecord) -> None:
    """A job's figures changed: stop its tree's live jobs once the tree's budget is used."""
    key = tree_key(record)
    root = tree_root(daemon, key)
    if root is None or root.limits.tree_budget is None:
        return
    spent = tree_usage(daemon, key)
    if not spent.priced:
        return
    if spent.cost < root.limits.tree_budget:
        _tree_warning(daemon, root, spent)
        return
    reason = f"tree budget exhausted: {format_cost(spent.cost)} of {format_cost(root.limits.tree_budget)}"
    stopped = daemon.usage_book.tree_stopped
    for member in daemon.jobs.values():
        if (
            tree_key(member) == key
            and member.id not in stopped
            and member.kind == JobKind.PI
            and send_limits(daemon, member, reason)
        ):
            stopped[member.id] = reason
            log.info("job %s: %s", member.id, reason)


def _tree_warning(daemon: JobTable, root: JobRecord, spent: Usage) -> None:
    """Once per tree (per roostd): the root gets a framed note at `budgetWarnAt`."""
    assert root.limits.tree_budget is not None
    line = budget.warning(
        spent, budget.Limits(budget=root.limits.tree_budget), daemon.settings().budgetWarnAt
    )
    warned = daemon.usage_book.tree_warned
    if line is None or root.id in warned:
        return
    if send_limits(daemon, root, None, line.replace("your budget", "your tree's budget")):
        warned.add(root.id)


def lift_tree(daemon: JobTable, root: JobRecord) -> None:
    key = tree_key(root)
    spent = tree_usage(daemon, key)
    if root.limits.tree_budget is not None and spent.priced and spent.cost >= root.limits.tree_budget:
        return
    daemon.usage_book.tree_warned.discard(root.id)
    stopped = daemon.usage_book.tree_stopped
    # Every live job of the tree, not only those this roostd stopped: a restarted roostd
    # does not know which workers an earlier one told.
    for member in list(daemon.jobs.values()):
        if tree_key(member) == key and member.kind == JobKind.PI:
            stopped.pop(member.id, None)
            if member is not root:
                send_limits(daemon, member, None)


def recount(daemon: JobTable, record: JobRecord) -> None:
    """The session comes back from a foreground pi (`roost attach`, `/roost-bg`): the job's
    figures are its session's from its start, what that pi spent included. A worker that
    starts later reads the same file again (the sum, never twice)."""
    if record.kind != JobKind.PI or not record.session:
        return
    from roost.pi.transcript import read_entries

    counted = from_entries(read_entries(record.session))
    if counted.requests == 0 and record.usage is None:
        return  # nothing spent yet: the row stays as a fresh job's
    record.usage = counted.to_json()
    after_usage(daemon, record)


def on_removed(daemon: JobTable, record: JobRecord) -> None:
    """Before `rm` deletes the job's directory: keep its figures in the usage log."""
    if record.kind != JobKind.PI or not record.session:
        return
    from roost.pi.transcript import read_entries

    removed = daemon.usage_book.removed  # loaded before the append: the new lines are added once
    try:
        entries = read_entries(record.session)
        lines = usage_log.lines_for(
            {
                "id": record.id,
                "name": record.name,
                "session": record.session,
                "rootSession": record.links.root_session,
            },
            entries,
        )
        usage_log.append(lines)
    except OSError as exc:
        log.error("job %s: could not keep its usage in %s: %s", record.id, usage_log.log_path(), exc)
        return
    for line in lines:
        removed.setdefault(tree_key(record), Usage()).add_usage(Usage.from_json(line))
    daemon.usage_book.tree_stopped.pop(record.id, None)
