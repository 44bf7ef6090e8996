"""`roost demo`'s scripted model: the story's rules (`script`: every job's task carries a
marker its rules key on), the answer to anything else (`play_answer`: a new job or a reply in
a kept sandbox gets a short note, never an error), and the kept sandbox's model as a process
of its own (`serve_model`, `python -m roost.cli.demomodel ROOT PORT`)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from roost.fakellm import (
    FakeLLM,
    Reply,
    all_of,
    first_user_contains,
    last_is_tool_result,
    last_user_contains,
    text,
    tool_call,
    tool_calls,
)
from roost.fakellm.requests import envelopes

RUNAWAY_USAGE = (20000, 1000, 5000)  # prompt, completion, cached: about $0.06 a request


def script(llm: FakeLLM) -> None:
    """The scripted model: every job's task carries a marker its rules key on."""

    def job(marker: str, *rules: tuple[Any, Any]) -> None:
        for match, reply in rules:
            llm.add(
                all_of(first_user_contains(marker), match) if match else first_user_contains(marker), reply
            )

    # 1. A job that looks around, answers, and asks the user something.
    job(
        "[greeter]",
        (last_user_contains("yes"), text("Done: I wrote NOTES.md with a two-line summary.")),
        (
            last_is_tool_result("bash"),
            text(
                "The directory holds a README and a src/ folder.\n\nShall I write a short NOTES.md summary?"
            ),
        ),
        (last_user_contains("[greeter]"), tool_call("bash", {"command": "ls -a"})),
    )
    # 2. A builder busy in a long tool call, and a reviewer that messages it meanwhile.
    job(
        "[builder]",
        (
            last_user_contains("<agent-message"),
            text("Noted the reviewer's request: I will run the tests after the build."),
        ),
        (last_is_tool_result("bash"), text("Build finished.")),
        # The build runs until the demo says so (it creates .built), so the reviewer's
        # message surely lands while the tool runs, however slowly pi boots here.
        (
            last_user_contains("[builder]"),
            tool_call(
                "bash",
                {"command": ("for i in $(seq 300); do [ -e .built ] && break; sleep 0.1; done; echo built")},
            ),
        ),
    )
    job(
        "[reviewer]",
        (last_is_tool_result("roost_send"), text("Asked the builder to run the tests.")),
        (
            last_user_contains("send it now"),
            lambda req: tool_call(
                "roost_send",
                {"to": _job_id_in(req), "message": "Please run the unit tests before you finish."},
            ),
        ),
        (None, text("Ready to review.")),
    )
    # 3. A lead that spawns two children; kid-b asks the lead a question.
    job(
        "[lead]",
        (last_is_tool_result("roost_send"), text("Answered kid-b: JSON.")),
        (
            last_user_contains('kind="message"'),
            tool_call("roost_send", {"to": "kid-b", "message": "JSON, please."}),
        ),
        (
            last_user_contains('kind="report"'),
            lambda req: text("Report received from " + _reports_in_last(req) + "."),
        ),
        (last_is_tool_result("roost_spawn"), text("Two children are on it; their reports will come.")),
        (
            last_user_contains("[lead]"),
            tool_calls(
                ("roost_spawn", {"task": "[kid-a] Count the TODOs in the project.", "name": "kid-a"}),
                ("roost_spawn", {"task": "[kid-b] Export the findings.", "name": "kid-b"}),
            ),
        ),
    )
    # 5. A parent that spawns a child with a small budget; the child never stops by itself.
    job(
        "[saver]",
        (
            last_user_contains("ended:"),
            lambda req: text(
                "The spender was stopped by roost: " + _between(last_user(req), "ended: ", "\n")
            ),
        ),
        (last_is_tool_result("roost_spawn"), text("The spender is working within $0.25.")),
        (
            last_user_contains("[saver]"),
            tool_call(
                "roost_spawn",
                {
                    "task": "[spender] Keep refactoring until it is perfect.",
                    "name": "spender",
                    "budget": 0.25,
                },
            ),
        ),
        (None, text("Noted.")),
    )
    job(
        "[spender]",
        (None, lambda req: tool_call("bash", {"command": "echo refactoring"}, usage=RUNAWAY_USAGE)),
    )
    job("[kid-a]", (None, text("Found 3 TODOs: two in src/, one in README.")))
    # 5. A lead that gives two children a worktree each; both change the same line.
    job(
        "[wt-lead]",
        (
            last_user_contains('kind="report"'),
            lambda req: text("Report received from " + _reports_in_last(req) + "."),
        ),
        (last_is_tool_result("roost_spawn"), text("Two children, each in its own worktree.")),
        (
            last_user_contains("[wt-lead]"),
            tool_calls(
                (
                    "roost_spawn",
                    {"task": "[wt-fast] Make the retry count 5.", "name": "wt-fast", "worktree": True},
                ),
                (
                    "roost_spawn",
                    {"task": "[wt-safe] Make the retry count 1.", "name": "wt-safe", "worktree": True},
                ),
            ),
        ),
    )
    for marker, count in (("[wt-fast]", 5), ("[wt-safe]", 1)):
        job(
            marker,
            (last_is_tool_result("bash"), text(f"Set retries = {count} and committed it.")),
            (
                last_user_contains(marker),
                tool_call(
                    "bash",
                    {
                        "command": (
                            f"sed -i 's/^retries = .*/retries = {count}/' settings.ini && "
                            f"git commit -qam 'retries = {count}' && git log --oneline -1"
                        )
                    },
                ),
            ),
        )
    # 7. Two reviewers answer in a schema (one only after roost's note); a summary of both.
    job("[rev-api]", (None, text(json.dumps({"verdict": "approve", "issues": 0}))))
    job(
        "[rev-ui]",
        (
            last_user_contains("[roost] Your final answer is not valid"),
            text(json.dumps({"verdict": "request-changes", "issues": 2})),
        ),
        (None, text("Looks good overall, but two buttons overlap.")),
    )
    job("[summary]", (None, text('```json\n{"approve": 1, "request-changes": 1, "issues": 2}\n```')))
    job(
        "[kid-b]",
        (last_user_contains("JSON"), text("Exported the findings as findings.json.")),
        (last_is_tool_result("roost_send"), text("Asked the lead which format to use.")),
        (
            last_user_contains("[kid-b]"),
            tool_call("roost_send", {"to": "lead", "message": "Which format do you want: JSON or YAML?"}),
        ),
    )


def last_user(req: Any) -> str:
    from roost.fakellm import last_user_text

    return last_user_text(req) or ""


def _reports_in_last(req: Any) -> str:
    """Who sent the reports in the last user message: several can arrive in one turn."""
    senders = [env.get("from", "?") for env in envelopes(last_user(req)) if env.get("kind") == "report"]
    return " and ".join(senders) or "?"


def _between(value: str, start: str, end: str) -> str:
    head = value.find(start)
    if head < 0:
        return "?"
    head += len(start)
    return value[head : value.find(end, head)]


BUILDER: dict[str, str] = {}
"""The builder's job id, once the story has made it: the reviewer's message goes to it."""


def _job_id_in(req: Any) -> str:
    return BUILDER.get("id", "builder")


def play_answer(req: Any) -> Reply:
    """The scripted model's answer to what no scene's rule knows (a new job, a reply, in a
    kept sandbox): a short, sensible note, never an error. A message that ends in `?` is
    answered with a question back, so the job waits for a reply."""
    raw = last_user(req)
    last = " ".join(raw.split())
    if not last:  # a tool's result, or nothing to read
        return text("Done.")
    found = envelopes(raw)
    if found:
        env = found[-1]
        return text(f"Got a {env.get('kind', 'message')} from {env.get('from', 'another job')}.")
    quoted = last if len(last) <= 80 else last[:79] + "…"
    if last.endswith("?"):
        return text(
            f'You asked: "{quoted}" I am roost\'s scripted demo model, so I can only '
            "pretend to know.\n\nShall I pretend I checked?"
        )
    return text(
        f'Noted: "{quoted}". I am roost\'s scripted demo model (no real model, no '
        "API key): I answer every message with a note like this one; a message "
        "ending in ? gets a question back."
    )


def serve_model(root: Path, port: int) -> int:
    """The kept sandbox's scripted model (`python -m roost.cli.demomodel ROOT PORT`): the
    demo's rules and play_answer, on the port pi's models.json names, until SIGTERM or until
    ROOT (or its sandbox file) is gone."""
    import signal
    import threading

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    llm = FakeLLM(port=port, hold_timeout=300.0)
    script(llm)
    llm.set_default(play_answer)
    deadline = time.monotonic() + 10
    while True:  # the demo's own model has just let the port go
        try:
            llm.start()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    print(f"scripted model listening on {llm.base_url}", flush=True)
    try:
        while not stop.wait(2.0):
            if not root.is_dir():  # the sandbox was deleted: nothing left to answer
                break
    finally:
        llm.stop()
    return 0


def _main(argv: list[str]) -> int:
    if len(argv) == 2:
        return serve_model(Path(argv[0]), int(argv[1]))
    print("usage: python -m roost.cli.demomodel ROOT PORT", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
