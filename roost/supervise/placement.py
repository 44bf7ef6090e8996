"""Which runner starts a job's worker: `Placement`, the runner roostd launches through.

A job runs where `roost run --runner` said (kept in `jobs/<id>/placement.json`), else
where its agent definition's `runner` says, else where roost.json's `runner.kind` says:
`local` (runner.LocalRunner, the default, with its spare worker) or `ray`
(supervise/rayrunner.py). Shell jobs always run locally. The first
remote job starts roostd's remote hub (supervise/remotehub.py); a roostd that finds a
remote attempt it did not see end (supervise/attempts.py) starts it too and adopts the
attempt, so the remote end reconnects to it. Nothing of Ray is imported for a local job.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

from roost.host import paths
from roost.host.fsutil import atomic_write_json
from roost.job.states import JobKind, JobState
from roost.supervise import attempts
from roost.supervise.remotehub import RemoteHub
from roost.supervise.runner import Launched, LocalRunner, RemoteLaunch, WorkerSpec
from roost.wire.requests import RunnerKind

if TYPE_CHECKING:
    import asyncio

    from roost.job.record import JobRecord
    from roost.supervise.base import JobTable
    from roost.supervise.rayrunner import RayOptions, RayRunner

log = logging.getLogger(__name__)

FILE_NAME = "placement.json"
KINDS: tuple[str, ...] = get_args(RunnerKind)
WAITS = "runner"
"""The key of a job's `queue` that says it waits for its remote runner's cluster (the reason)."""


def choose(job_dir: Path, kind: str) -> None:
    """Pin a job to a runner (`roost run --runner`)."""
    if kind not in KINDS:
        raise ValueError(f"unknown runner {kind!r} (expected one of {', '.join(KINDS)})")
    paths.ensure_dir(job_dir)  # a job just made: its folder may come with its first save
    atomic_write_json(job_dir / FILE_NAME, {"runner": kind})


def chosen(job_dir: Path) -> str | None:
    try:
        kind = json.loads((job_dir / FILE_NAME).read_text(encoding="utf-8"))["runner"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return kind if kind in KINDS else None


class Placement:
    def __init__(
        self,
        table: JobTable,
        local: LocalRunner,
        serve_link: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
    ) -> None:
        self.local = local
        self._table = table
        self._settings = table.settings
        self.hub = RemoteHub(
            self._find,
            table.mailbox,
            serve_link,
            lambda record: table.job_changed(record, persist=False),
            self._git_remote,
        )
        self._ray: RayRunner | None = None

    def _find(self, job_id: str) -> JobRecord | None:
        return self._table.jobs.get(job_id)

    # -- what roostd asks of its runner ------------------------------------------------------
    def prepare(self) -> None:
        self.local.prepare()
        if self._settings().runner.get("kind") == "ray":  # Ray's import, ahead of the first job
            from roost.supervise.rayrunner import warm_up

            warm_up(self._ray_options().address)

    def close(self) -> None:
        self.local.close()
        self.hub.close()

    def worker_up(self, job_id: str) -> None:
        self.local.worker_up(job_id)

    def kind_of(self, record: JobRecord) -> str:
        if record.kind == JobKind.SHELL:
            return "local"
        by_definition = (record.agent_def or {}).get("runner")
        if by_definition not in KINDS:
            by_definition = None
        return chosen(record.dir) or by_definition or str(self._settings().runner.get("kind") or "local")

    def launch(self, spec: WorkerSpec) -> Launched:
        record = self._find(spec.job_id)
        if record is None or self.kind_of(record) == "local":
            return self.local.launch(spec)
        self._start_hub()
        return self._ray_runner().launch_job(record.id, record.dir)

    def adopt(self, record: JobRecord) -> RemoteLaunch | None:
        """A remote attempt a previous roostd left running, watched again (None: none)."""
        if isinstance(record.queue, dict) and WAITS in record.queue:
            # It waited for its cluster when the last roostd went: an ordinary queued job
            # now (the queue starts it, a new attempt), never left out of the queue for good.
            record.queue = {k: v for k, v in record.queue.items() if k != WAITS}
        current = attempts.load(record.dir)
        if current is None or current.ended or current.runner != "ray":
            return None
        self._start_hub()
        return self._ray_runner().adopt_job(record.id, record.dir)

    def _git_remote(self) -> str | None:
        """The git remote a worktree job's node clones from and pushes to (runner
        `"worktrees": "node"`; supervise/nodegit.py); None: the node shares the filesystem."""
        runner = self._settings().runner
        return str(runner.get("gitRemote") or "origin") if runner.get("worktrees") == "node" else None

    # -- the remote parts, made on first use --------------------------------------------------
    def _start_hub(self) -> None:
        if self.hub.started:
            return
        runner = self._settings().runner
        tls = runner.get("tls")
        self.hub.start(
            str(runner.get("listen") or "127.0.0.1:0"),
            runner.get("advertise"),
            dict(tls) if isinstance(tls, dict) else None,
        )

    def _ray_runner(self) -> RayRunner:
        if self._ray is None:
            from roost.supervise.rayrunner import RayRunner

            self._ray = RayRunner(
                self._ray_options, lambda: (self.hub.address, self.hub.cert_pem), self._status
            )
        return self._ray

    def _ray_options(self) -> RayOptions:
        from roost.supervise.rayrunner import RayOptions

        runner: dict[str, Any] = self._settings().runner
        defaults = RayOptions()
        return RayOptions(
            address=str(runner.get("address") or defaults.address),
            python=str(runner.get("python") or defaults.python),
            num_cpus=float(runner.get("numCpus", defaults.num_cpus)),
            resources={str(k): float(v) for k, v in (runner.get("resources") or {}).items()},
            env={str(k): str(v) for k, v in (runner.get("env") or {}).items()},
        )

    def _status(self, job_id: str, reason: str | None) -> None:
        """The cluster cannot be reached (`reason`): the job waits `queued` with the reason
        (`queue.runner`: the queue's pump leaves it to its runner), its items in its
        mailbox; it can again (None): the job is `starting` again, its attempt submitted."""
        record = self._find(job_id)
        if record is None:
            return
        info = record.queue if isinstance(record.queue, dict) else {}
        if reason is not None:
            status = f"waiting: {reason}"
            if record.state == JobState.STARTING:
                record.queue = {**info, WAITS: reason}
                self._table.set_state(record, JobState.QUEUED, reason, status=status)
            elif record.state == JobState.QUEUED and info.get(WAITS) and record.status != status:
                record.status = status
                self._table.job_changed(record, persist=False)
        elif record.state == JobState.QUEUED and WAITS in info:
            record.queue = {k: v for k, v in info.items() if k != WAITS}
            self._table.set_state(record, JobState.STARTING, "its cluster answers", status="starting")
