"""roost acp's updates (roost.acp.updates): a streamed message arrives as partials, then
whole in the session file, and its client gets each character once; a tool call's title
follows its arguments as they stream in; agent-message look-alikes and terminal control
never reach the editor raw."""

from __future__ import annotations

import pytest

pytest.importorskip("acp")

from roost.acp.updates import Shown


def _partial(text: str, calls: list[dict] | None = None, tools: list[dict] | None = None) -> dict:
    content = [{"type": "text", "text": text}] + (calls or [])
    return {"message": {"timestamp": 1, "content": content}, "tools": tools or []}


def _texts(updates: list) -> str:
    return "".join(u.content.text for u in updates if u.session_update == "agent_message_chunk")


def test_streamed_then_saved_each_character_once() -> None:
    shown = Shown()
    sent = shown.partial(_partial("hel")) + shown.partial(_partial("hello wo"))
    sent += shown.partial(_partial("hello"))  # an older partial: nothing
    saved = {
        "type": "message",
        "message": {
            "role": "assistant",
            "timestamp": 1,
            "stopReason": "stop",
            "content": [{"type": "text", "text": "hello world"}],
        },
    }
    sent += shown.entry(saved) + shown.entry(saved)
    assert _texts(sent) == "hello world"
    assert [u.content.text for u in sent] == ["hel", "lo wo", "rld"]


def test_a_tool_call_title_follows_its_arguments_and_its_result() -> None:
    shown = Shown()
    call = {"type": "toolCall", "id": "c1", "name": "bash", "summary": ""}
    first = shown.partial(_partial("", [call]))
    assert [(u.session_update, u.title) for u in first] == [("tool_call", "bash")]
    grown = shown.partial(
        _partial(
            "",
            [{**call, "summary": "make test"}],
            tools=[{"id": "c1", "name": "bash", "summary": "make test"}],
        )
    )
    assert [(u.session_update, u.title, u.status) for u in grown] == [
        ("tool_call_update", "bash make test", None),
        ("tool_call_update", None, "in_progress"),
    ]
    done = shown.entry(
        {
            "type": "message",
            "message": {
                "role": "toolResult",
                "toolCallId": "c1",
                "toolName": "bash",
                "isError": True,
                "content": [{"type": "text", "text": "\x1b[31mboom <agent-message from=x>"}],
            },
        }
    )
    [result] = done
    assert result.status == "failed"
    body = result.content[0].content.text
    assert "\x1b" not in body and "<agent-message" not in body and "boom" in body


def test_the_clients_own_prompt_is_not_echoed_but_others_are() -> None:
    shown = Shown()
    shown.prompts.append("from the editor")

    def user(text: str) -> dict:
        return {"type": "message", "message": {"role": "user", "content": text}}

    assert shown.entry(user("from the editor")) == []
    [other] = shown.entry(user("from the cli"))
    assert other.session_update == "user_message_chunk" and other.content.text == "from the cli"


def test_thinking_is_a_thought_chunk() -> None:
    shown = Shown()
    message = {
        "timestamp": 2,
        "content": [{"type": "thinking", "thinking": "let me see"}, {"type": "text", "text": "yes"}],
    }
    sent = shown.partial({"message": message, "tools": []})
    assert [(u.session_update, u.content.text) for u in sent] == [
        ("agent_thought_chunk", "let me see"),
        ("agent_message_chunk", "yes"),
    ]


def test_a_clipped_partial_loses_no_character() -> None:
    shown = Shown()
    whole = "x" * 100_005
    sent = shown.partial(_partial(whole[:99_999] + "…"))  # streaming's BLOCK_MAX cut
    saved = {
        "type": "message",
        "message": {"role": "assistant", "timestamp": 1, "content": [{"type": "text", "text": whole}]},
    }
    sent += shown.entry(saved)
    assert _texts(sent) == whole
