"""Kill at every step of the delivery path: nothing accepted is lost or doubled.

The real pi (whichever is selected: the default 1.x, or 0.73.1 in CI's second pass), real
roostd and workers, the scripted model. For each step an item passes on its way into pi
(roost.faults: `posted`, `sent`, `taken`, `before_ack`, `after_ack`), for a user reply
and for an agent message (`roost_send` from another job), with the receiver idle or in the
middle of a tool, the worker — or, separately, its pi — is SIGKILLed exactly there. Then:

- lost: the receiver's model never got the item;
- duplicated: the item shows more than once in one model request, or in the session file.

Both must be 0. The counts are printed as JSON (run with -s to see them).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from kit.lab import Lab
from kit.matchers import new_user_texts, wait_file_command
from kit.wait import wait_until

from roost.fakellm import Reply, first_user_contains, text, tool_call
from roost.fakellm.requests import message_text, messages
from roost.faults import POINTS, TARGETS
from roost.pi.compat import features_of
from roost.pi.locate import find_pi

T = 90.0
KINDS = ("reply", "message")
MODES = ("idle", "busy")


class SenderReceiver:
    """A sender job and a receiver job on a Lab; the receiver's model is scripted by one
    function."""

    def __init__(self, lab: Lab) -> None:
        self.lab = lab
        self.fault = lab.root / "fault.json"
        lab.llm.add(first_user_contains("KR-RECEIVER"), self._receiver)
        lab.llm.add(first_user_contains("KS-SENDER"), self._sender)
        self.receiver = lab.run("KR-RECEIVER: answer every message", name="receiver")
        self.sender = lab.run("KS-SENDER: send what you are told", name="sender")
        assert lab.wait(self.receiver) == "done" and lab.wait(self.sender) == "done"

    def _receiver(self, request: Mapping[str, Any]) -> Reply:
        for line in new_user_texts(request):
            busy = re.search(r"BUSY-(\d+)", line)
            if busy:
                inside = self.lab.root / f"inside-{busy.group(1)}"
                go = self.lab.root / f"go-{busy.group(1)}"
                return tool_call("bash", {"command": f"touch '{inside}'; {wait_file_command(go)}"})
        return text("noted")

    def _sender(self, request: Mapping[str, Any]) -> Reply:
        last = messages(request)[-1]
        order = re.search(r"SEND (ITEM-\S+)", message_text(last)) if last.get("role") == "user" else None
        if order:
            return tool_call("roost_send", {"to": self.receiver, "message": order.group(1)})
        return text("sent")

    def worker_pid(self) -> int | None:
        pid = self.lab.record(self.receiver).get("process", {}).get("workerPid")
        return pid if isinstance(pid, int) else None

    def run_case(self, n: int, point: str, target: str, kind: str, mode: str) -> dict[str, Any]:
        lab, llm = self.lab, self.lab.llm
        tag = f"ITEM-{n}-{point}-{target}-{kind}-{mode}"
        if mode == "busy":
            since = len(llm.requests)
            lab.reply(self.receiver, f"BUSY-{n}")
            llm.wait_for_request(lambda r: f"BUSY-{n}" in " ".join(new_user_texts(r)), T, since=since)
            wait_until((lab.root / f"inside-{n}").exists, T, "the receiver to be inside its tool")
        before = self.worker_pid()
        self.fault.write_text(
            json.dumps({"point": point, "target": target, "text": tag, "job": self.receiver})
        )
        if kind == "reply":
            word = lab.reply(self.receiver, tag)
            assert word in ("delivered", "queued", "started"), word
        else:
            lab.reply(self.sender, f"SEND {tag}")
        go = lab.root / f"go-{n}"
        if mode == "busy" and point in ("taken", "before_ack", "after_ack"):
            # A steer is taken only once the tool batch is over: let the tool end as soon as
            # the item is in the mailbox (the worker hands it to pi within milliseconds).
            wait_until(
                lambda: any(
                    tag in i.get("text", "")
                    for i in lab.mailbox_files(self.receiver, "new") + lab.mailbox_files(self.receiver, "cur")
                ),
                T,
                "the item to be posted",
            )
            go.touch()
        fired = Path(f"{self.fault}.fired")
        wait_until(fired.exists, T, f"the fault at {point} to fire")
        fired.unlink()
        wait_until(
            lambda: (pid := self.worker_pid()) is not None and pid != before,
            T,
            "the receiver's worker to be restarted",
        )
        go.touch()  # the tool of a busy receiver may finish now
        llm.wait_for_request(lambda r: tag in message_text_all(r), T)
        wait_until(
            lambda: lab.record(self.receiver).get("state") in ("done", "needs_input"),
            T,
            "the receiver to settle",
        )
        lab.wait(self.receiver)
        if kind == "message":
            lab.wait(self.sender)
        requests = lab.requests_of("KR-RECEIVER")
        received = [r for r in requests if tag in message_text_all(r)]
        doubled_in_request = [
            r.index for r in received if sum(tag in message_text(m) for m in messages(r)) > 1
        ]
        in_session = sum(
            tag in json.dumps(e)
            for e in lab.session(self.receiver)
            if e.get("type") in ("message", "custom_message")
        )
        pending = [i for i in lab.mailbox_files(self.receiver, "new") if tag in i.get("text", "")]
        return {
            "tag": tag,
            "lost": not received,
            "duplicated": bool(doubled_in_request) or in_session > 1,
            "in_session": in_session,
            "pending": len(pending),
        }


def message_text_all(request: Mapping[str, Any]) -> str:
    return "\n".join(message_text(m) for m in messages(request))


@pytest.fixture
def pair() -> Iterator[SenderReceiver]:
    # Every case crashes the receiver once: a short window keeps the backoff at its first step.
    lab = Lab(
        llm=True,
        settings={
            "agentExternalMessages": True,
            "restartBackoffSeconds": 0.05,
            "restartWindowSeconds": 0.5,
            "restartMaxCrashes": 1000,
        },
    )
    lab.env["ROOST_FAULTS"] = str(lab.root / "fault.json")
    try:
        yield SenderReceiver(lab)
    finally:
        print(lab.diagnostics())
        lab.close()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", KINDS)
def test_a_kill_at_any_step_of_delivery_loses_and_doubles_nothing(
    pair: SenderReceiver, kind: str, mode: str
) -> None:
    results = []
    kills: Counter[str] = Counter()
    n = 0
    for target in TARGETS:
        for point in POINTS:
            n += 1
            results.append(pair.run_case(n, point, target, kind, mode))
            kills[target] += 1
    summary = {
        "pi": features_of(find_pi()).label,
        "kind": kind,
        "mode": mode,
        "items": len(results),
        "kills": dict(kills),
        "lost": sum(r["lost"] for r in results),
        "duplicated": sum(r["duplicated"] for r in results),
    }
    print(json.dumps(summary))
    bad = [r for r in results if r["lost"] or r["duplicated"] or r["in_session"] != 1 or r["pending"]]
    assert not bad, (summary, bad)
