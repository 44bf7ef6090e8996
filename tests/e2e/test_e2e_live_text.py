"""End to end (the real pi): the scripted model streams its answer slowly; roostd's
partials grow with it (the job's status `writing`), a running bash tool shows as `running
bash` with its command, and everything is gone from roostd's memory once the message
ends, the complete answer in the session file and nothing of it in the mailbox."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from kit.lab import Lab
from kit.wait import wait_until

from roost.fakellm import FakeLLM, last_is_tool_result, last_user_contains, text, tool_call

pytestmark = [pytest.mark.timeout(240), pytest.mark.usefixtures("real_pi")]

WORDS = " ".join(f"live{i:02d}" for i in range(24))


def _texts(seen: list[dict[str, Any] | None]) -> list[str]:
    return [
        "".join(b.get("text", "") for b in (p.get("message") or {}).get("content") or []) for p in seen if p
    ]


def test_a_slow_answer_and_a_tool_stream_through_roostd(make_lab: Callable[..., Lab], llm: FakeLLM) -> None:
    lab = make_lab(llm=llm)
    llm.add(last_user_contains("LIVE-GO"), tool_call("bash", {"command": "sleep 2; echo tool-ok"}), times=1)
    llm.add(last_is_tool_result("bash"), text(WORDS, chunk_size=7, chunk_delay=0.25))
    lab.start_daemon()
    client = lab.client()
    client.request("follow_partials")
    seen: list[dict[str, Any] | None] = []
    statuses: list[str] = []

    def read() -> None:
        try:
            for event in client.events():
                if event.get("event") == "partial":
                    seen.append(event["partial"])
        except Exception:
            return

    threading.Thread(target=read, daemon=True).start()
    job = lab.run("LIVE-GO run the tool, then answer")

    def running_bash() -> bool:
        statuses.append(lab.show(job)["status"])
        return statuses[-1] == "running bash"

    wait_until(running_bash, 60, what="status running bash")
    wait_until(lambda: any(p and p.get("tools") for p in seen), 30, what="the tool in a partial")
    tool = next(p for p in seen if p and p.get("tools"))["tools"][0]
    assert tool["name"] == "bash" and "sleep 2; echo tool-ok" in tool["summary"]
    wait_until(lambda: any("live05" in t for t in _texts(seen)), 60, what="the text growing")
    wait_until(lambda: lab.show(job)["status"] == "writing", 30, what="status writing")
    assert lab.wait(job) == "done"
    texts = [t for t in _texts(seen) if t.startswith("live00")]
    assert len(texts) >= 3 and all(b.startswith(a) for a, b in zip(texts, texts[1:], strict=False))
    assert not texts[0].endswith("live23")  # seen before it was complete
    wait_until(lambda: seen[-1] is None, 30, what="the partial dropped")
    assert lab.request("follow_partials")["partials"] == {}
    assert WORDS in lab.roost_ok("logs", job)
    for path in (lab.job_dir(job) / "mailbox").rglob("*"):
        if path.is_file():
            assert b"live05" not in path.read_bytes(), path
    client.interrupt()
    client.close()
