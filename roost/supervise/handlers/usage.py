"""roostd's usage operations: `budget` (`roost budget`) and `usage_note` (a worker's
budget warning or stop, which its parent hears of)."""

from __future__ import annotations

import logging
from typing import Any

from roost.job.record import JobRecord
from roost.job.states import ItemKind, JobKind
from roost.supervise import budget as budgets
from roost.supervise.core import Core, bind
from roost.usage import budget
from roost.wire.connection import Connection, Handler
from roost.wire.protocol import BAD_REQUEST, REFUSED, RequestError

log = logging.getLogger(__name__)


async def set_budget(core: Core, conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
    record = core.find_job(str(request["job"]))
    if record.kind != JobKind.PI:
        raise RequestError(REFUSED, f"job {record.id} is a shell job: it has no budget")
    amount = budgets.amount(request, "budget")
    tokens = budgets.amount(request, "budgetTokens", integer=True)
    turns = budgets.amount(request, "maxTurns", integer=True)
    if amount is None and tokens is None and turns is None:
        raise RequestError(BAD_REQUEST, "give a budget, budgetTokens or maxTurns")
    # On a root that has a tree budget and no budget of its own, AMOUNT is the tree's.
    tree = bool(request.get("tree")) or (
        amount is not None
        and not record.links.root_session
        and record.limits.tree_budget is not None
        and record.limits.budget is None
        and tokens is None
        and turns is None
    )
    if tree:
        if record.links.root_session:
            raise RequestError(
                REFUSED, f"job {record.id} is not a tree's root: its tree budget is set on the root"
            )
        if amount is None:
            raise RequestError(BAD_REQUEST, "a tree budget is an amount (budget)")
        record.limits.tree_budget = amount
    else:
        if amount is not None:
            record.limits.budget = amount
        if tokens is not None:
            record.limits.budget_tokens = tokens
        if turns is not None:
            record.limits.max_turns = turns
    record.save()
    if record.limits.tree_budget is not None and not record.links.root_session:
        budgets.lift_tree(core, record)
    if not budgets.send_limits(core, record, core.usage_book.tree_stopped.get(record.id)):
        proc = core.procs.get(record.id)
        if (proc is None or not proc.alive) and budget.is_stop_reason(record.error):
            core.start_worker(record, "budget raised")
    core.job_changed(record)
    return {"id": record.id, "tree": tree, "usage": budgets.row_usage(core, record)}


async def usage_note(core: Core, conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
    assert conn.job_id is not None
    record = core.jobs.get(conn.job_id)
    if record is None:
        return {}
    kind, text = request.get("kind"), str(request.get("text") or "")[:500]
    if kind == "exhausted":
        core.agents.job_ended(record, text)
    elif kind == "warn":
        await _tell_parent(core, record, budget.warning_text(text))
    else:
        raise RequestError(BAD_REQUEST, "kind must be warn or exhausted")
    return {}


def handlers(core: Core) -> dict[str, Handler]:
    return bind(core, {"budget": set_budget, "usage_note": usage_note})


async def _tell_parent(core: Core, child: JobRecord, text: str) -> None:
    from roost.agents.peers import relation

    router = core.agents
    if not child.links.spawned:
        return
    target = None
    for fg in router.foreground.values():
        if child.links.parent_session and fg.session == child.links.parent_session:
            target = router.foreground_peer(fg)
    parent = router.job_for_session(child.links.parent_session) if target is None else None
    if target is None and parent is not None:
        target = router.job_peer(parent)
    if target is None:
        return
    sender = router.job_peer(child)
    try:
        await router.deliver(target, ItemKind.MESSAGE, sender, relation(target, sender), text)
    except RequestError as exc:
        log.warning("job %s: budget warning not delivered to its parent: %s", child.id, exc.message)
