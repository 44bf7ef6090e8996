"""Background tasks (roost/tasks.py): kept until done, their failure logged, cancelled by
their owner; and the worker starts none it does not keep."""

from __future__ import annotations

import ast
import asyncio
import gc
import logging
import weakref
from pathlib import Path

import pytest

from roost.tasks import Tasks, first_of

ROOT = Path(__file__).resolve().parents[2] / "roost"
log = logging.getLogger("roost.test")


def test_a_task_nothing_else_refers_to_is_kept_until_it_is_done() -> None:
    async def scenario() -> None:
        tasks = Tasks(log)
        # The task waits on a future only it knows: nothing but `tasks` holds it (the loop
        # keeps weak references), so a collection would destroy it mid-flight.
        gate: weakref.ref[asyncio.Future[None]] | None = None

        async def waits() -> None:
            nonlocal gate
            future = asyncio.get_running_loop().create_future()
            gate = weakref.ref(future)
            await future

        task = weakref.ref(tasks.spawn(waits(), "waiting"))
        await asyncio.sleep(0)
        gc.collect()
        assert task() is not None and tasks.running == 1
        assert gate is not None
        future = gate()
        assert future is not None
        kept = task()
        assert kept is not None
        future.set_result(None)
        await kept
        await asyncio.sleep(0)  # its done callbacks
        assert tasks.running == 0  # let go once done

    asyncio.run(scenario())


def test_a_failure_is_logged_with_what_failed_and_a_cancel_is_not(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        tasks = Tasks(log)

        async def fails() -> None:
            raise RuntimeError("the socket is gone")

        tasks.spawn(fails(), "sending worker_update")
        forever = tasks.spawn(asyncio.Event().wait(), "waiting forever")
        await asyncio.sleep(0)
        forever.cancel()
        await asyncio.sleep(0)

    with caplog.at_level(logging.ERROR, logger="roost.test"):
        asyncio.run(scenario())
    assert [r.getMessage() for r in caplog.records] == [
        "sending worker_update failed: RuntimeError('the socket is gone')"
    ]
    assert caplog.records[0].exc_info is not None  # with its traceback


def test_cancel_all_ends_every_task_still_running() -> None:
    async def scenario() -> None:
        tasks = Tasks(log)
        ended: list[str] = []

        async def runs(name: str) -> None:
            try:
                await asyncio.Event().wait()
            finally:
                ended.append(name)

        tasks.spawn(runs("a"), "a")
        tasks.spawn(runs("b"), "b")
        await asyncio.sleep(0)
        await tasks.cancel_all()
        assert sorted(ended) == ["a", "b"] and tasks.running == 0
        await tasks.cancel_all()  # nothing left: a no-op

    asyncio.run(scenario())


def test_one_done_waits_for_the_first_to_end_and_returns_at_once_when_none_runs() -> None:
    async def scenario() -> None:
        tasks = Tasks(log)
        await asyncio.wait_for(tasks.one_done(), 5)  # none running: at once
        first, never = asyncio.Event(), asyncio.Event()
        tasks.spawn(first.wait(), "first")
        tasks.spawn(never.wait(), "never")
        waiting = asyncio.ensure_future(tasks.one_done())
        await asyncio.sleep(0)
        assert not waiting.done() and tasks.running == 2
        first.set()
        await asyncio.wait_for(waiting, 5)
        assert tasks.running == 1  # the ended one already let go (the backpressure's count)
        await tasks.cancel_all()

    asyncio.run(scenario())


def test_cancel_ends_every_task_but_the_one_calling_it() -> None:
    async def scenario() -> None:
        tasks = Tasks(log)
        ended: list[str] = []

        async def waits() -> None:
            try:
                await asyncio.Event().wait()
            finally:
                ended.append("waits")

        async def closes() -> str:
            tasks.cancel()  # as Connection.close called from a send of its own
            return "closed"

        other = tasks.spawn(waits(), "waits")
        await asyncio.sleep(0)
        closing = tasks.spawn(closes(), "closes")
        assert await closing == "closed"  # not cancelled by its own call
        await asyncio.sleep(0)
        assert other.cancelled() and ended == ["waits"] and tasks.running == 0
        tasks.cancel()  # nothing left: a no-op

    asyncio.run(scenario())


def test_first_of_leaves_nothing_behind() -> None:
    async def scenario() -> None:
        done = asyncio.Event()
        slow = asyncio.ensure_future(asyncio.Event().wait())
        done.set()
        await first_of(slow, done.wait())
        await asyncio.sleep(0)
        assert slow.cancelled()
        # Every other task of the loop is gone too (the waiter of `done` was one).
        assert asyncio.all_tasks() == {asyncio.current_task()}

    asyncio.run(scenario())


def _unkept_tasks(path: Path) -> list[int]:
    """Lines of `path` that start a task (ensure_future, create_task) without keeping it:
    the call's value is not assigned."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    kept = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None
    }
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("ensure_future", "create_task")
        and id(node) not in kept
    ]


def test_the_worker_starts_no_task_it_does_not_keep() -> None:
    """Fire-and-forget goes through roost.tasks.Tasks.spawn (kept, its failure logged)."""
    found = {
        str(p.relative_to(ROOT)): lines
        for p in sorted((ROOT / "worker").glob("*.py"))
        if (lines := _unkept_tasks(p))
    }
    assert found == {}


def test_an_unkept_task_is_found(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text(
        "import asyncio\nt = asyncio.create_task(f())\nasyncio.ensure_future(g())\nloop.create_task(h())\n"
    )
    assert _unkept_tasks(source) == [3, 4]


def _bare_tasks(path: Path) -> list[int]:
    """Lines of `path` where a task is started as a statement of its own (its value
    dropped at once): `asyncio.ensure_future(...)`, `create_task(...)` of anything."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Attribute | ast.Name)
        and getattr(node.value.func, "attr", getattr(node.value.func, "id", None))
        in ("ensure_future", "create_task")
    ]


def test_roost_starts_no_task_as_a_bare_statement() -> None:
    """Nowhere in roost, its tests and benchmarks is a task started and dropped (roostd's too:
    a report, a pushed frame, a follow): a task nothing keeps may be collected, and its failure
    is never seen (a test's server collected mid-test reset its client's connection)."""
    top = ROOT.parent
    found = {
        str(p.relative_to(top)): lines
        for folder in (ROOT, top / "tests", top / "benchmarks")
        for p in sorted(folder.rglob("*.py"))
        if (lines := _bare_tasks(p))
    }
    assert found == {}


def _task_keepers(path: Path) -> list[int]:
    """Lines of `path` that keep tasks by hand, Tasks' work done again: a set of tasks
    (`set[asyncio.Task[...]]`), or a done callback that lets a task go (`add_done_callback(
    x.discard)`)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Name)
            and node.value.id == "set"
            and "Task" in ast.unparse(node.slice)
        ):
            found.add(node.lineno)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "add_done_callback"
            and "discard" in ast.unparse(node.args)
        ):
            found.add(node.lineno)
    return sorted(found)


def test_no_module_keeps_its_own_set_of_tasks() -> None:
    """roost.tasks.Tasks keeps every background task (a connection's requests, roostd's
    accept loop and hooks, an ACP session's refreshes): kept until done, a failure logged."""
    found = {
        str(p.relative_to(ROOT)): lines
        for p in sorted(ROOT.rglob("*.py"))
        if p != ROOT / "tasks.py" and (lines := _task_keepers(p))
    }
    assert found == {}


def test_a_task_keeper_is_found(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text(
        "import asyncio\nrunning: set[asyncio.Task[None]] = set()\nnames: set[str] = set()\n"
        "t.add_done_callback(running.discard)\nt.add_done_callback(partial(_done, conn, tasks))\n"
    )
    assert _task_keepers(source) == [2, 4]


def test_a_bare_task_is_found(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text(
        "import asyncio\nt = asyncio.create_task(f())\n"
        "asyncio.ensure_future(g())\nloop.create_task(h())\n"
        "ensure_future(i())\nfutures = [asyncio.ensure_future(a) for a in x]\n"
    )
    assert _bare_tasks(source) == [3, 4, 5]
