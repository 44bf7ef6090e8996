"""The worker's live text (roost.worker.streaming): pi's message_update events, delta-only
on pi 1.x and with the whole message on 0.x, become coalesced partials."""

from __future__ import annotations

import asyncio
from typing import Any

from roost.worker.streaming import Streamer


def run(
    events: list[dict[str, Any]], interval: float = 0.08, pause: float = 0.0, settle: float | None = None
) -> list[dict[str, Any] | None]:
    """What the streamer sent for `events` (`pause` s apart), `settle` s after the last one
    (two intervals unless given)."""
    sent: list[dict[str, Any] | None] = []

    async def feed() -> None:
        streamer = Streamer(sent.append, interval=interval)
        for event in events:
            streamer.on_event(event)
            await asyncio.sleep(pause)
        await asyncio.sleep(interval * 2 if settle is None else settle)

    asyncio.run(feed())
    return sent


def delta(kind: str, index: int = 0, **fields: Any) -> dict[str, Any]:
    return {
        "type": "message_update",
        "usage": {},
        "assistantMessageEvent": {"type": kind, "contentIndex": index, **fields},
    }


def text_of(partial: dict[str, Any] | None) -> str:
    assert partial is not None and partial["message"] is not None
    return "".join(b.get("text", "") for b in partial["message"]["content"])


def test_pi_1x_deltas_are_rebuilt_into_the_message_so_far() -> None:
    events = [
        {"type": "message_start", "message": {"role": "assistant", "content": [], "timestamp": 7}},
        delta("thinking_start"),
        delta("thinking_delta", delta="hm"),
        delta("thinking_end", content="hmm"),
        delta("text_start", 1),
        delta("text_delta", 1, delta="Hel"),
        delta("text_delta", 1, delta="lo"),
        delta("toolcall_start", 2, id="c1", toolName="bash"),
        delta("toolcall_delta", 2, delta='{"command": "ls'),
        delta("toolcall_end", 2, toolCall={"id": "c1", "name": "bash", "arguments": {"command": "ls -la"}}),
    ]
    sent = run(events, interval=0.01, pause=0.02)
    last = sent[-1]
    assert last is not None and last["message"]["timestamp"] == 7
    assert last["message"]["content"] == [
        {"type": "thinking", "thinking": "hmm"},
        {"type": "text", "text": "Hello"},
        {"type": "toolCall", "id": "c1", "name": "bash", "summary": "ls -la"},
    ]
    summaries = [b["summary"] for p in sent if p for b in p["message"]["content"] if b["type"] == "toolCall"]
    assert '{"command": "ls' in summaries  # its arguments as they stream


def test_pi_0x_whole_messages_and_coalescing_and_the_end() -> None:
    events = [{"type": "message_start", "message": {"role": "assistant", "content": []}}]
    events += [
        {
            "type": "message_update",
            "message": {"role": "assistant", "content": [{"type": "text", "text": "w" * n}]},
            "assistantMessageEvent": {"type": "text_delta", "delta": "w"},
        }
        for n in range(1, 41)
    ]
    events += [{"type": "message_end", "message": {"role": "assistant", "content": []}}, {"type": "turn_end"}]
    sent = run(events, interval=0.5)  # forty deltas at once: the first, then one more
    assert len(sent) == 2 and text_of(sent[0]) == "w" and sent[1] is None
    # The message's end clears it only at pi's next event (by then the file has it).
    sent = run(events[:-1], interval=0.0)
    assert sent[-1] is not None


def test_a_running_tool_is_sent_at_once_and_dropped_when_it_ends() -> None:
    events = [
        {
            "type": "tool_execution_start",
            "toolCallId": "c",
            "toolName": "bash",
            "args": {"command": "make   test"},
        },
        {"type": "tool_execution_end", "toolCallId": "c", "toolName": "bash"},
    ]
    sent = run(events, interval=10, settle=0.5)  # both at once: well within the interval
    assert sent[0] is not None and sent[0]["tools"][0]["summary"] == "make test"
    assert sent[0]["message"] is None and sent[1] is None
