"""Integration (fake pi): input that is not what it claims (docs/security.md, door 3).

A lone surrogate (`"\\ud800"`, which JSON's escapes let in) in any field of any op is
refused with `bad_request` and kept nowhere, so `roost ls` keeps answering; a
`peer_register` with one is answered. Names are NFKC-normalised; bidi controls, invisible
characters, letters of two scripts and look-alikes of another job's name are refused.
"""

from __future__ import annotations

import json
import os

import pytest
from kit.jobs import Raw, raw_unix, run_job, settle, status_is
from kit.lab import Lab
from kit.wait import wait_until

from roost.wire.protocol import DAEMON_OPS

LONE = "\ud800"


def lone_frames(env: Lab) -> list[dict]:
    """Every op, named by a lone surrogate (with what it needs to reach its handler), and
    the same surrogate deeper: in a task, a command, an environment key and value."""
    base = {
        "cwd": str(env.work),
        "pid": os.getpid(),
        "session": None,
        "task": "t",
        "to": "nobody",
        "message": "m",
        "job": "nojob",
        "text": "t",
        "jobs": [],
        "until": "done",
        "token": "x",
        "state": "done",
        "kind": "note",
        "reason": "r",
    }
    frames = []
    for op in DAEMON_OPS.values():
        args = {k: base[k] for k in (*op.required, *op.optional) if k in base}
        frames.append({"op": op.name, **args, "name": LONE})
    frames += [
        {"op": "run", "cwd": str(env.work), "task": "fix " + LONE},
        {"op": "run", "cwd": str(env.work), "shell": True, "command": ["echo", LONE]},
        {"op": "run", "cwd": str(env.work), "task": "t", "env": {"A": LONE}},
        {"op": "run", "cwd": str(env.work), "task": "t", "env": {LONE: "x"}},
        {"op": "peer_register", "pid": os.getpid(), "session": None, "cwd": LONE},
    ]
    return frames


def test_a_lone_surrogate_in_any_op_is_refused_and_ls_still_answers(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    env.roost_ok("daemon", "start")
    raw = Raw(env)
    for number, frame in enumerate(lone_frames(env), 1):
        answer = raw.send(json.dumps({"id": number, **frame}).encode() + b"\n")
        assert answer["type"] == "response" and answer["id"] == number, (frame["op"], answer)
        assert answer["ok"] is False and answer["error"]["code"] == "bad_request", (frame, answer)
        assert "not valid Unicode" in answer["error"]["message"]
    # The same connection, and every other client, still gets answers.
    assert raw.send(b'{"id": "after", "op": "list"}\n')["result"] == {"jobs": []}
    raw.close()
    assert json.loads(env.cli("ls", "--json", timeout=20).stdout) == []
    assert env.cli("ls", timeout=20).returncode == 0
    jobs = env.roost_home / "jobs"
    assert not jobs.exists() or list(jobs.iterdir()) == []  # nothing was kept


def test_a_job_with_valid_non_ascii_names_and_text_still_lists(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    job = run_job(env, "réparer 数学 😀", "--name", "réparer-😀")
    rows = json.loads(env.cli("ls", "--json", timeout=20).stdout)
    assert [r["name"] for r in rows] == ["réparer-😀"] and rows[0]["id"] == job


def refusal(env: Lab, name: str) -> str:
    done = env.roost("run", "--name", name, "some task")
    assert done.returncode != 0, (name, done.stdout)
    return done.stderr


@pytest.mark.parametrize(
    "name, why",
    [
        ("report\u202efdp.exe", "bidi"),
        ("a\u2066b", "bidi"),
        ("a\u200fb", "bidi"),
        ("zero\u200bwidth", "invisible"),
        ("join\u200dme", "invisible"),
        ("cgj\u034fx", "invisible"),
        ("hangul\u3164filler", "invisible"),
        ("vs\ufe0fx", "invisible"),
        ("tag\U000e0041", "invisible"),
        ("pаypal", "mixes letters"),  # Latin with a Cyrillic а
    ],
)
def test_names_with_bidi_invisible_or_mixed_script_characters_are_refused(
    fake_pi_env: Lab,
    name: str,
    why: str,
) -> None:
    assert why in refusal(fake_pi_env, name)
    assert json.loads(fake_pi_env.roost_ok("ls", "--json")) == []


def test_a_lookalike_of_a_jobs_name_is_refused_and_names_are_nfkc(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    scope = run_job(env, "task one", "--name", "scope")
    full = run_job(env, "task two", "--name", "ｆｕｌｌ")  # fullwidth: kept as NFKC "full"
    assert env.show(full)["name"] == "full"
    for imitation in (
        "ѕсоре",  # all Cyrillic: one script, the same skeleton
        "fu1l",
        "fuII",
    ):  # a digit and capitals that read as l
        err = refusal(env, imitation)
        assert "looks like" in err, (imitation, err)
    assert scope in refusal(env, "ѕсоре")  # it says which job it imitates
    assert "taken" in refusal(env, "ｓｃｏｐｅ")  # NFKC first: that is "scope" itself
    assert sorted(r["name"] for r in json.loads(env.roost_ok("ls", "--json"))) == ["full", "scope"]


def test_peer_register_names_follow_the_same_rule(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    run_job(env, "task", "--name", "scope")  # roostd is up from here
    raw = Raw(env)
    for number, name in enumerate(["peer\u202eevil", "pe\u200ber", "ѕсоре"], 1):
        answer = raw.send(
            json.dumps(
                {"id": number, "op": "peer_register", "pid": os.getpid(), "session": None, "name": name}
            ).encode()
            + b"\n"
        )
        assert answer["ok"] is False and answer["error"]["code"] == "bad_request", (name, answer)
    answer = raw.send(
        json.dumps(
            {"id": 9, "op": "peer_register", "pid": os.getpid(), "session": None, "name": "ｍｙ ｐｉ"}
        ).encode()
        + b"\n"
    )
    assert answer["ok"] and answer["result"]["name"] == "my pi", answer
    # Without a session name, the folder's name; one that is not a name costs the pi
    # nothing but the name: it goes by its peer id.
    for number, folder in enumerate(["/w/pro\u200bject", "/w/ѕсоре", "/w/ok-dir"], 10):
        answer = raw.send(
            json.dumps(
                {"id": number, "op": "peer_register", "pid": os.getpid(), "session": None, "cwd": folder}
            ).encode()
            + b"\n"
        )
        assert answer["ok"], (folder, answer)
        expected = "ok-dir" if folder == "/w/ok-dir" else answer["result"]["id"]
        assert answer["result"]["name"] == expected, (folder, answer)
    raw.close()


def test_a_models_text_cut_mid_surrogate_pair_is_shown_with_a_replacement_character(
    fake_pi_env: Lab,
) -> None:
    """pi writes a lone surrogate as a `\\ud83d` escape (a model's text cut in the middle of
    an emoji): the worker and the transcript reader turn it into U+FFFD, so the job's row,
    its details and its log still answer."""
    env = fake_pi_env
    job = run_job(env, "[[cut-emoji]] please")
    assert settle(env, job) == "done"
    assert env.row(job)["summary"] == "cut: \ufffd"
    assert env.cli("ls", timeout=20).returncode == 0
    assert env.cli("show", job, timeout=20).returncode == 0
    assert "cut: \ufffd" in env.cli("logs", job, timeout=20).stdout


def test_the_extension_socket_refuses_a_lone_surrogate_too(fake_pi_env: Lab) -> None:
    """A worker's ext.sock runs the same server: the check is there before its handlers."""
    env = fake_pi_env
    job = run_job(env, "[[hold gate]] mine")
    wait_until(lambda: status_is(env, job, "running hold"), 20, what="the hold tool to run")
    raw = raw_unix(env.job_dir(job) / "ext.sock")
    for frame in (
        {"op": "ext_hello", "pid": os.getpid(), "name": LONE},
        {"op": "send", "to": job, "message": "x" + LONE},
    ):
        answer = raw.send(json.dumps({"id": 1, **frame}).encode() + b"\n")
        assert answer["error"]["code"] == "bad_request", answer
    assert raw.send(b'{"id": 2, "op": "ext_hello", "pid": 1}\n')["error"]["code"] == "unauthorized"
    raw.close()
    (env.work / "gate").touch()
    assert settle(env, job) == "done"
