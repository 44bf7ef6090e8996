"""A remote job's attempts: `jobs/<id>/remote.json` (0600, roostd's only).

Each start of a job on a remote runner is a new attempt with its own number, its
engine's id (Ray's submission id) and its own secret, the one credential its remote end
proves itself with (roost.wire.remote). The file names the current attempt only: the
secret of an earlier one is refused from the moment the next is made. `ended` says that
roostd saw the attempt's end, so a roostd that starts later does not adopt it again.
"""

from __future__ import annotations

import hmac
import json
import secrets
from dataclasses import asdict, dataclass
from pathlib import Path

from roost.host.fsutil import atomic_write_json

FILE_NAME = "remote.json"


@dataclass
class Attempt:
    runner: str
    attempt: int
    secret: str
    submission: str
    address: str
    ended: bool = False
    submitted: bool = False  # the engine took it: a later roostd may adopt it

    def proves(self, attempt: object, secret: object) -> bool:
        return (
            not self.ended
            and attempt == self.attempt
            and isinstance(secret, str)
            and hmac.compare_digest(secret.encode(), self.secret.encode())
        )


def load(job_dir: Path) -> Attempt | None:
    try:
        data = json.loads((job_dir / FILE_NAME).read_text(encoding="utf-8"))
        return Attempt(
            runner=str(data["runner"]),
            attempt=int(data["attempt"]),
            secret=str(data["secret"]),
            submission=str(data["submission"]),
            address=str(data["address"]),
            ended=bool(data.get("ended", False)),
            submitted=bool(data.get("submitted", False)),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def save(job_dir: Path, attempt: Attempt) -> None:
    atomic_write_json(job_dir / FILE_NAME, asdict(attempt))


def next_attempt(job_dir: Path, runner: str, address: str, job_id: str) -> Attempt:
    """A new attempt, saved (the earlier one's secret no longer works)."""
    last = load(job_dir)
    number = (last.attempt if last is not None else 0) + 1
    attempt = Attempt(runner, number, secrets.token_urlsafe(32), f"roost-{job_id}-{number}", address)
    save(job_dir, attempt)
    return attempt


def mark_submitted(job_dir: Path, number: int) -> None:
    current = load(job_dir)
    if current is not None and current.attempt == number and not current.submitted:
        current.submitted = True
        save(job_dir, current)


def mark_ended(job_dir: Path, number: int) -> None:
    current = load(job_dir)
    if current is not None and current.attempt == number and not current.ended:
        current.ended = True
        save(job_dir, current)
