"""Jobs with long conversations, written directly (no pi ran): job.json records (as roostd
writes them) and pi-like session files of N entries each, for the search index's tests and
its benchmark (benchmarks/search_bench.py). Deterministic: a job number gives the same file every time."""

from __future__ import annotations

import json
import os
import random
import secrets
from datetime import UTC, datetime, timedelta
from pathlib import Path

from roost.job.record import JobRecord
from roost.job.states import JobKind, JobState

WORDS = [
    "payment",
    "retry",
    "banner",
    "invoice",
    "cache",
    "parser",
    "token",
    "schema",
    "migration",
    "deploy",
    "queue",
    "worker",
    "socket",
    "report",
    "review",
    "branch",
    "merge",
    "commit",
    "test",
    "failure",
    "timeout",
    "latency",
    "memory",
    "index",
    "search",
    "module",
    "import",
    "config",
    "option",
    "budget",
    "model",
    "session",
    "answer",
    "question",
    "result",
    "message",
    "tool",
    "shell",
    "file",
    "folder",
    "build",
    "release",
    "version",
    "bug",
    "fix",
    "feature",
    "refactor",
    "rename",
    "delete",
    "update",
    "create",
    "check",
    "verify",
    "measure",
    "compare",
]
START = datetime(2026, 11, 1, tzinfo=UTC)
_SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "si", "pe", "da", "gu", "fi"]
STOPWORDS = [
    "the",
    "to",
    "of",
    "and",
    "a",
    "in",
    "is",
    "it",
    "that",
    "for",
    "on",
    "with",
    "as",
    "this",
    "be",
    "at",
    "by",
    "not",
    "are",
    "from",
    "or",
    "we",
    "can",
    "if",
    "will",
    "you",
    "i",
    "have",
    "an",
    "but",
    "so",
    "do",
    "was",
    "all",
    "there",
    "when",
    "which",
    "then",
    "one",
    "now",
    "also",
    "more",
    "just",
    "what",
    "no",
    "out",
    "up",
    "use",
]
VOCABULARY = [*STOPWORDS, *WORDS, *(a + b + c for a in _SYLLABLES for b in _SYLLABLES for c in _SYLLABLES)]
"""Some 1,800 words, drawn by Zipf's law (the n-th word 1/n as often as the first), as text
is: English's little words first and in most entries, then the words a person searches
for (`payment`: in one entry of ten or so), then rarer ones."""
_WEIGHTS = [1 / (rank + 1) for rank in range(len(VOCABULARY))]


def entry(n: int, rng: random.Random, when: datetime, size: int) -> dict[str, object]:
    """The n-th entry of a session: a user message, an assistant answer or a tool result."""
    text = " ".join(rng.choices(VOCABULARY, _WEIGHTS, k=size // 7))
    stamp = when.strftime("%Y-%m-%dT%H:%M:%S.000Z")
    role = ("user", "assistant", "toolResult")[n % 3]
    message: dict[str, object] = {
        "role": role,
        "content": [{"type": "text", "text": text}],
        "timestamp": int(when.timestamp() * 1000),
    }
    if role == "assistant":
        message["stopReason"] = "stop"
    if role == "toolResult":
        message["toolName"] = "bash"
    return {
        "type": "message",
        "id": f"{n:08x}",
        "parentId": f"{n - 1:08x}" if n else None,
        "timestamp": stamp,
        "message": message,
    }


def session_text(seed: int, entries: int, size: int = 330) -> str:
    rng = random.Random(seed)
    when = START + timedelta(hours=seed)
    lines = [
        json.dumps(
            {
                "type": "session",
                "version": 3,
                "id": f"s{seed}",
                "timestamp": when.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
                "cwd": "/tmp",
                "systemPrompt": "You are an expert coding assistant " * 50,
            }
        )
    ]
    for n in range(entries):
        lines.append(json.dumps(entry(n, rng, when + timedelta(seconds=n), size)))
    return "\n".join(lines) + "\n"


def write_jobs(roost_home: Path, cwd: Path, count: int, entries: int) -> list[str]:
    """`count` done pi jobs of `entries` entries each (roostd down); their ids."""
    before = os.environ.get("ROOST_HOME")
    os.environ["ROOST_HOME"] = str(roost_home)  # where JobRecord.save writes
    try:
        return _write(roost_home, cwd, count, entries)
    finally:
        if before is None:
            del os.environ["ROOST_HOME"]
        else:
            os.environ["ROOST_HOME"] = before


def _write(roost_home: Path, cwd: Path, count: int, entries: int) -> list[str]:
    taken: set[str] = set()
    for n in range(count):
        job_id = secrets.token_hex(4)
        while job_id in taken:
            job_id = secrets.token_hex(4)
        taken.add(job_id)
        session = roost_home / "jobs" / job_id / "session.jsonl"
        record = JobRecord(
            id=job_id,
            name=f"job-{n}",
            kind=JobKind.PI,
            cwd=str(cwd),
            state=JobState.DONE,
            task=f"task {n}",
            summary=f"job {n}",
            session=str(session),
        )
        record.dir.mkdir(parents=True, exist_ok=True)
        record.save()
        session.write_text(session_text(n, entries))
        session.chmod(0o600)
    return sorted(taken)
