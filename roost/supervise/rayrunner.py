"""`RayRunner`: a job's worker as a job of a Ray cluster, through its Jobs API.

Each start of the job is an attempt (supervise/attempts.py): submission id
`roost-<job>-<attempt>`, a fresh secret. The Ray job runs `python -m roost.worker.remote`
(roost.worker.remote), which reaches roostd's hub (supervise/remotehub.py) with the
secret and runs the ordinary worker against a mirror of the job's files. Only roost's own
variables go into the submission: the job's environment (its API keys) travels over the
proved connection, not through the dashboard.

All of Ray's calls block (HTTP): each attempt has one thread that submits (again and
again while the cluster cannot be reached, saying why), then polls the status every
POLL_SECONDS until the job ends, and hands the exit code to roostd's loop. Ray is imported
in that thread, on first use: a roostd with no Ray job never imports it.
"""

from __future__ import annotations

import asyncio
import logging
import shlex
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from roost.supervise import attempts
from roost.wire import remote as remotewire

log = logging.getLogger(__name__)

POLL_SECONDS = 0.5
RETRY_MAX_SECONDS = 30.0
DEFAULT_ADDRESS = "http://127.0.0.1:8265"


@dataclass(frozen=True)
class RayOptions:
    """The `runner` setting's Ray fields (roost.config)."""

    address: str = DEFAULT_ADDRESS
    python: str = "python3"
    num_cpus: float = 1.0
    resources: dict[str, float] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)


_clients: dict[str, Any] = {}
_clients_lock = threading.Lock()


def _client(address: str) -> Any:
    """The Jobs API client of `address`, made once (making one asks the head its version)."""
    with _clients_lock:
        client = _clients.get(address)
    if client is None:
        from ray.job_submission import JobSubmissionClient  # the optional extra: roost[ray]

        client = JobSubmissionClient(address)
        with _clients_lock:
            _clients[address] = client
    return client


def _forget_client(address: str) -> None:
    with _clients_lock:
        _clients.pop(address, None)


def warm_up(address: str) -> None:
    """Import Ray and make the client ahead of the first job (a thread of its own: Ray's
    import takes a second or more), when roost.json sends jobs to Ray."""

    def run() -> None:
        try:
            _client(address)
        except Exception as exc:  # the first job says it, with its retries
            log.info("the Ray cluster at %s is not reachable yet: %s", address, _short(exc))

    threading.Thread(target=run, name="ray warm-up", daemon=True).start()


class RayLaunch:
    """One attempt on the cluster (a runner.RemoteLaunch)."""

    pid = 0  # no process of this machine: its identity is its attempt (remote.json)
    start_time: float | None = None
    start_ticks: int | None = None
    boot_id: str | None = None

    def __init__(
        self,
        options: RayOptions,
        attempt: attempts.Attempt,
        submission: dict[str, Any],
        on_status: Callable[[str | None], None],
        job_dir: Any,
        submitted: bool = False,
    ) -> None:
        self.options = options
        self.attempt = attempt
        self.submission_id = attempt.submission
        self._submission = submission
        self._on_status = on_status  # a reason the cluster cannot be reached; None once it can
        self._job_dir = job_dir
        self._on_exit: Callable[[int | None], None] | None = None
        self._loop = asyncio.get_running_loop()
        self._stop = threading.Event()  # forget: stop watching, leave the Ray job alone
        self._kill = threading.Event()
        self._poke = threading.Event()  # wakes the thread's waits (a kill, a forget)
        self._submitted = submitted
        self._code: int | None = None
        self._thread: threading.Thread | None = None

    def on_exit(self, callback: Callable[[int | None], None]) -> None:
        self._on_exit = callback

    def go(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"ray {self.submission_id}", daemon=True)
        self._thread.start()

    def cancel(self) -> None:
        self._stop.set()
        self._poke.set()

    def wait(self) -> int | None:
        return self._code

    def kill(self) -> None:
        """Stop the Ray job (Ray sends SIGTERM, then SIGKILL); its end comes as usual. One
        never submitted (the cluster away) ends at once."""
        self._kill.set()
        self._poke.set()

    def forget(self) -> None:
        self._stop.set()
        self._poke.set()

    # -- the thread ------------------------------------------------------------------------
    def _say(self, reason: str | None) -> None:
        self._loop.call_soon_threadsafe(self._on_status, reason)

    def _run(self) -> None:
        client = None
        delay = 0.5
        while not self._stop.is_set():
            if self._kill.is_set() and not self._submitted:
                self._finish(-signal.SIGTERM)
                return
            try:
                if client is None:
                    client = _client(self.options.address)
                if not self._submitted:
                    self._submit(client)
                    self._say(None)
                code = self._watch(client)
            except Exception as exc:  # the cluster cannot be reached (or refused): try again
                client = None
                _forget_client(self.options.address)
                self._say(f"ray cluster unreachable: {_short(exc)}")
                log.warning("%s: %s; trying again in %.1fs", self.submission_id, _short(exc), delay)
                self._poke.wait(delay)
                self._poke.clear()
                delay = min(delay * 2, RETRY_MAX_SECONDS)
                continue
            if code is not _STILL:
                self._finish(code)
            return

    def _submit(self, client: Any) -> None:
        try:
            client.submit_job(submission_id=self.submission_id, **self._submission)
        except Exception as exc:
            if "already exists" not in str(exc):
                raise
        self._submitted = True
        attempts.mark_submitted(self._job_dir, self.attempt.attempt)
        log.info("submitted %s to %s", self.submission_id, self.options.address)

    def _watch(self, client: Any) -> Any:
        from ray.job_submission import JobStatus

        killed = False
        while not self._stop.is_set():
            if self._kill.is_set() and not killed:
                client.stop_job(self.submission_id)
                killed = True
            status = client.get_job_status(self.submission_id)
            if status in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED):
                info = client.get_job_info(self.submission_id)
                if status == JobStatus.STOPPED:
                    return -signal.SIGTERM
                code = info.driver_exit_code
                if code is None and status == JobStatus.FAILED:
                    log.warning("%s failed: %s", self.submission_id, info.message)
                    return 1
                return code
            self._poke.wait(POLL_SECONDS)
            self._poke.clear()
        return _STILL

    def _finish(self, code: int | None) -> None:
        self._code = code
        attempts.mark_ended(self._job_dir, self.attempt.attempt)
        self._loop.call_soon_threadsafe(self._ended)

    def _ended(self) -> None:
        if self._on_exit is not None and not self._stop.is_set():
            self._on_exit(self._code)


_STILL = object()


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 200 else text[:199] + "…"


class RayRunner:
    """Launches a job's worker on the Ray cluster of `options.address`."""

    KIND = "ray"

    def __init__(
        self,
        options: Callable[[], RayOptions],
        hub_address: Callable[[], tuple[str, str | None]],
        on_status: Callable[[str, str | None], None],
    ) -> None:
        self._options = options
        self._hub = hub_address  # (host:port as the node reaches it, roostd's certificate or None)
        self._on_status = on_status  # (job id, a reason it waits, or None)

    def submission(self, job_id: str, attempt: attempts.Attempt, options: RayOptions) -> dict[str, Any]:
        address, cert = self._hub()
        env = {
            **options.env,
            remotewire.ADDR_VAR: address,
            remotewire.JOB_VAR: job_id,
            remotewire.ATTEMPT_VAR: str(attempt.attempt),
            remotewire.SECRET_VAR: attempt.secret,
        }
        if cert is not None:
            env[remotewire.CERT_VAR] = cert
        submission: dict[str, Any] = {
            # exec: the remote end is the Ray job's process itself, not a child of Ray's shell
            # (a SIGKILLed shell left it, and its worker, running beside the next attempt).
            "entrypoint": f"exec {shlex.quote(options.python)} -m roost.worker.remote",
            "runtime_env": {"env_vars": env},
            "entrypoint_num_cpus": options.num_cpus,
            "metadata": {"roost_job": job_id, "attempt": str(attempt.attempt)},
        }
        if options.resources:
            submission["entrypoint_resources"] = dict(options.resources)
        return submission

    def launch_job(self, job_id: str, job_dir: Any) -> RayLaunch:
        options = self._options()
        attempt = attempts.next_attempt(job_dir, self.KIND, options.address, job_id)
        return RayLaunch(
            options,
            attempt,
            self.submission(job_id, attempt, options),
            lambda reason: self._on_status(job_id, reason),
            job_dir,
        )

    def adopt_job(self, job_id: str, job_dir: Any) -> RayLaunch | None:
        """The attempt a previous roostd submitted and did not see end: watched again."""
        current = attempts.load(job_dir)
        if current is None or current.runner != self.KIND or current.ended or not current.submitted:
            return None  # a new attempt starts instead (an unsubmitted one's secret is refused)
        options = self._options()
        if current.address != options.address:
            options = RayOptions(current.address, options.python, options.num_cpus, options.resources)
        return RayLaunch(
            options, current, {}, lambda reason: self._on_status(job_id, reason), job_dir, submitted=True
        )
