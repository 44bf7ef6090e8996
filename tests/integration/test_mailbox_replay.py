"""A replayed mailbox item (issue 34, docs/reference/mailbox.md), against a real roostd, its worker and
the fake pi: a delivered reply copied back into the job's `mailbox/new/` under a seq never
handed out, its "seq" field rewritten to agree, mode 0644, reaches pi once; the copy waits
in bad/ with a `.why`, and every file of the mailbox is 0600."""

from __future__ import annotations

import json
import os
import stat

import pytest
from kit.jobs import run_job, settle
from kit.lab import Lab
from kit.wait import wait_until


def user_texts(env: Lab, job: str) -> list[str]:
    return [
        json.dumps(e["message"]["content"])
        for e in env.session(job)
        if e.get("type") == "message" and e["message"]["role"] == "user"
    ]


@pytest.mark.parametrize("worker", ["warm", "reaped"])
def test_a_replayed_reply_reaches_pi_once(fake_pi_env: Lab, worker: str) -> None:
    env = fake_pi_env
    env.configure(warmSeconds=600 if worker == "warm" else 1)
    job = run_job(env, "soon idle")
    settle(env, job)
    env.roost_ok("reply", job, "deploy it")
    settle(env, job)
    box = env.job_dir(job) / "mailbox"
    acked = wait_until(
        lambda: [i for i in env.mailbox_files(job, "cur") if i["text"] == "deploy it"],
        20,
        what="the reply to be acked",
    )
    if worker == "reaped":
        wait_until(lambda: env.show(job)["state"] == "reaped", 20, what="the reaper")

    item = dict(acked[0], seq=9999)  # the forgery: name and seq agree
    staged = env.root / "replayed.json"
    staged.write_text(json.dumps(item) + "\n")
    os.chmod(staged, 0o644)
    os.rename(staged, box / "new" / "000000009999.json")
    why = box / "bad" / "000000009999.json.why"
    if worker == "warm":  # the watching worker quarantines it at once
        wait_until(why.exists, 20, what="the replay to be quarantined")

    env.roost_ok("reply", job, "after it")  # a reaped job's new worker meets the replay first
    settle(env, job)
    wait_until(
        lambda: any("after it" in t for t in user_texts(env, job)), 20, what="the next reply to reach pi"
    )
    texts = user_texts(env, job)
    assert sum("deploy it" in t for t in texts) == 1, texts
    assert why.read_text().startswith(f"replay: it repeats acknowledged item {acked[0]['seq']}")
    assert not (box / "new" / "000000009999.json").exists()
    wait_until(lambda: not os.listdir(box / "new"), 20, what="the mailbox to be emptied")
    files = [box / "seq"] + [p for sub in ("cur", "bad") for p in (box / sub).iterdir()]
    modes = {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in files}
    assert set(modes.values()) == {"0o600"}, modes
