"""roostd's search operations: `search` (`roost search`, the web's and the view's search,
an MCP tool) and `search_reindex` (`roost search --reindex`). The index is
`supervise/searchkeeper.py`'s; the query language and the row are roost.search's."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from roost.search.entryscan import KINDS
from roost.search.ftsquery import BadQuery, fts_query, parse_since
from roost.supervise import searchkeeper
from roost.supervise.core import Core, bind
from roost.wire.connection import Connection, Handler
from roost.wire.protocol import BAD_REQUEST, NOT_FOUND, RequestError

LIMIT, LIMIT_MAX = 20, 1000


def _pick(jobs: list[dict[str, Any]], ref: str) -> dict[str, Any]:
    """A job of the index's table by id, id prefix or name (the newest of a name)."""
    exact = [job for job in jobs if job["id"] == ref] or [job for job in jobs if job["name"] == ref]
    if exact:
        return exact[-1]
    prefixed = [job for job in jobs if job["id"].startswith(ref)]
    if len(prefixed) == 1:
        return prefixed[0]
    raise RequestError(NOT_FOUND, f"no job {ref!r}")


def _tree(jobs: list[dict[str, Any]], root: str) -> set[str]:
    children: dict[str, list[str]] = {}
    for job in jobs:
        if job["parent"]:
            children.setdefault(job["parent"], []).append(job["id"])
    found, todo = set(), [root]
    while todo:
        job_id = todo.pop()
        if job_id not in found:
            found.add(job_id)
            todo.extend(children.get(job_id, ()))
    return found


def _scope(
    core: Core, request: dict[str, Any], jobs: list[dict[str, Any]]
) -> tuple[list[str] | None, list[str]]:
    """The jobs a search looks in (None: all of them) and those it leaves out: a search of
    every job names the few it leaves out (the removed ones) rather than the many it keeps."""
    everything = bool(request.get("all"))
    narrowed = any(request.get(key) for key in ("job", "tree", "cwd"))
    if not narrowed:
        return None, [] if everything else [job["id"] for job in jobs if job["id"] not in core.jobs]
    if not everything:
        jobs = [job for job in jobs if job["id"] in core.jobs]
    for key in ("job", "tree"):
        if request.get(key):
            ref = str(request[key])
            try:
                chosen = core.find_job(ref).id
            except RequestError:
                if not everything:
                    raise
                chosen = _pick(jobs, ref)["id"]
            wanted = {chosen} if key == "job" else _tree(jobs, chosen)
            jobs = [job for job in jobs if job["id"] in wanted]
    if request.get("cwd"):
        cwd = os.path.normpath(str(request["cwd"]))
        jobs = [job for job in jobs if job["cwd"] == cwd or job["cwd"].startswith(cwd.rstrip("/") + "/")]
    return [job["id"] for job in jobs], []


async def search(core: Core, conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
    kinds = request.get("kinds") or []
    if not isinstance(kinds, list) or any(kind not in KINDS for kind in kinds):
        raise RequestError(BAD_REQUEST, f"kinds: each one of {', '.join(KINDS)}")
    limit = request.get("limit", LIMIT)
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= LIMIT_MAX:
        raise RequestError(BAD_REQUEST, f"limit: a number from 1 to {LIMIT_MAX}")
    try:
        query = fts_query(str(request["query"]))
        since = parse_since(str(request["since"])) if request.get("since") else None
    except BadQuery as exc:
        raise RequestError(BAD_REQUEST, str(exc)) from None
    path = core.search.path
    jobs = await asyncio.to_thread(searchkeeper.job_table, path)
    scope, leave_out = _scope(core, request, jobs)
    try:
        rows = await asyncio.to_thread(
            searchkeeper.search,
            path,
            query=query,
            jobs=scope,
            exclude=leave_out,
            kinds=kinds,
            since=since,
            limit=limit,
        )
    except BadQuery as exc:
        raise RequestError(BAD_REQUEST, str(exc)) from None
    named = {job["id"]: job for job in jobs}
    for row in rows:
        job = named.get(row["job"]) or {}
        row["name"] = job.get("name") or row["job"]
        row["cwd"] = job.get("cwd")
        row["removed"] = row["job"] not in core.jobs
    return {"query": query, "results": rows}


async def search_reindex(core: Core, conn: Connection, request: dict[str, Any]) -> dict[str, Any]:
    return await core.search.reindex()


def handlers(core: Core) -> dict[str, Handler]:
    return bind(core, {"search": search, "search_reindex": search_reindex})
