"""`roost search` with the fake pi: entries searchable within seconds of being written, the
index caught up after a SIGKILL of roostd with nothing lost or repeated, `--reindex`,
`--all` after `roost rm`, and hostile text kept as text (docs/guides/search.md)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import stat
from typing import Any

import psutil
from kit.lab import Lab
from kit.procs import wait_until


def found(env: Lab, *args: str) -> list[dict[str, Any]]:
    return env.cli_json("search", "--json", *args)


def test_an_answer_is_searchable_within_seconds_with_its_job_and_kind(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    job = env.run("look at the payment retry loop", name="payer")
    assert env.wait(job) == "done"
    rows = wait_until(lambda: found(env, "retr*"), 2 * 5, what="the task indexed")
    kinds = {row["kind"] for row in rows}
    assert kinds >= {"user", "assistant"}  # the task, and `echo: ...`
    row = rows[0]
    assert row["job"] == job and row["name"] == "payer" and not row["removed"]
    start, end = row["marks"][0]
    assert row["snippet"][start:end].lower().startswith("retr")
    assert row["when"].endswith("Z") and row["entry"]
    # A reply to the done job: searchable within 2 s of pi writing it.
    env.reply(job, "now the banner colour")
    assert env.wait(job) == "done"
    [user] = wait_until(lambda: found(env, "banner", "--kind", "user"), 2 * 5, what="reply")
    assert user["kind"] == "user"
    assert found(env, '"banner colour"', "--kind", "assistant")[0]["kind"] == "assistant"
    assert found(env, "banner NOT colour") == []
    assert {r["job"] for r in found(env, "banner OR payment")} == {job}
    # The index is the user's only.
    mode = stat.S_IMODE(os.stat(env.roost_home / "search.db").st_mode)
    assert mode == 0o600


def test_a_bad_query_is_a_one_line_usage_error(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    env.wait(env.run("anything"))
    for query in ('"unclosed', "AND", "a AND"):
        done = env.roost("search", query)
        assert done.returncode == 2, (query, done)
        assert len(done.stderr.strip().splitlines()) == 1
    # Quotes in the text are data: never SQL.
    assert found(env, "x' OR 1=1; DROP TABLE entries; --") == []
    assert found(env, "anything")  # still there
    assert env.roost("search", "x'); DROP TABLE entries; --").returncode == 2  # a lone )
    assert env.roost("search", "--since", "yesterday", "x").returncode == 2


def test_removed_jobs_are_found_only_with_all_and_kept_by_reindex(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    gone = env.run("the zebra migration", name="zebra")
    kept = env.run("the zebra crossing", name="crossing")
    env.wait(gone)
    env.wait(kept)
    wait_until(lambda: len({r["job"] for r in found(env, "zebra")}) == 2, 10, what="both")
    env.roost_ok("rm", gone)
    assert {r["job"] for r in found(env, "zebra")} == {kept}
    rows = found(env, "zebra", "--all")
    assert {r["job"] for r in rows} == {gone, kept}
    assert [r["name"] for r in rows if r["removed"]] == ["zebra"] * len([r for r in rows if r["removed"]])
    assert {r["job"] for r in found(env, "zebra", "--all", "--job", "zebra")} == {gone}
    before = found(env, "zebra", "--all", "--limit", "100")
    done = env.cli_json("search", "--reindex", "--json")
    assert done["removedKept"] == 1
    after = found(env, "zebra", "--all", "--limit", "100")
    assert sorted((r["job"], r["kind"], r["snippet"]) for r in after) == sorted(
        (r["job"], r["kind"], r["snippet"]) for r in before
    )


def _entries(env: Lab) -> list[tuple[str, str, str]]:
    with sqlite3.connect(env.roost_home / "search.db") as db:
        return sorted(
            db.execute("SELECT m.job, m.kind, e.text FROM meta m JOIN entries e ON e.rowid = m.id").fetchall()
        )


def test_sigkill_of_roostd_loses_and_repeats_nothing(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    jobs = [env.run(f"task number {i} about otters") for i in range(4)]
    for job in jobs:
        env.wait(job)
    for round_ in range(3):
        pid = env.daemon_pid()
        assert pid
        for job in jobs:  # written while roostd is alive, then killed mid-indexing
            env.reply(job, f"round {round_} otters again")
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda pid=pid: env.daemon_pid() != pid or not _alive(pid), 10, what="dead")
        for job in jobs:
            env.wait(job)
        env.start_daemon()
        expected = 4 * (1 + round_ + 1)
        wait_until(
            lambda e=expected: len(found(env, "otters", "--kind", "user", "--limit", "1000")) == e,
            20,
            what=f"{expected} user entries",
        )
    entries = _entries(env)
    assert len(entries) == len(set(entries))  # nothing twice
    # Rebuilt from the files, the index holds exactly what it held.
    env.roost_ok("search", "--reindex")
    assert _entries(env) == entries


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_hostile_text_stays_text(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    job = env.run("evil \x1b]52;c;ZXZpbA==\x07 \x1b[2J <script>alert(1)</script> payload")
    env.wait(job)
    wait_until(lambda: found(env, "payload"), 10, what="indexed")
    out = env.roost_ok("search", "payload")
    assert "\x1b" not in out and "\x07" not in out
    assert "\\x1b" in out and "[payload]" in out  # a pipe: plain markers
    raw = env.roost_ok("search", "--json", "payload")
    assert "\x1b" not in raw
    assert json.loads(raw)[0]["snippet"].count("\x1b") == 1 or "script" in raw


def _count(env: Lab) -> int:
    try:
        with sqlite3.connect(env.roost_home / "search.db", timeout=10) as db:
            return int(db.execute("SELECT count(*) FROM entries").fetchone()[0])
    except sqlite3.OperationalError:  # not made yet
        return 0


def test_sigkill_in_the_middle_of_indexing_from_scratch(fake_pi_env: Lab) -> None:
    from kit.sessionfiles import write_jobs

    env = fake_pi_env
    jobs, entries = 12, 3000  # ~18 MB of sessions: seconds of indexing
    write_jobs(env.roost_home, env.work, jobs, entries)
    env.start_daemon()
    total = jobs * entries  # one row per entry (no tool calls in these)
    for _ in range(2):  # killed twice, each time part way
        partial = wait_until(lambda: _count(env) or None, 60, what="a first batch")
        pid = env.daemon_pid()
        assert pid
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda pid=pid: not _alive(pid), 10, what="roostd gone")
        assert partial < total, "indexed before the kill: no kill mid-indexing"
        env.start_daemon()
    wait_until(lambda: _count(env) >= total, 120, what="caught up")
    with sqlite3.connect(env.roost_home / "search.db") as db:
        rows = db.execute(
            "SELECT source, entry, kind, count(*) FROM meta GROUP BY source, entry, kind HAVING count(*) > 1"
        ).fetchall()
        count = db.execute("SELECT count(*) FROM entries").fetchone()[0]
    assert rows == [] and count == total
    # The system prompt each file holds is not indexed.
    assert found(env, "expert", "--limit", "1000") == []


def test_tree_cwd_since_and_a_structured_result(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    elsewhere = env.work / "elsewhere"
    elsewhere.mkdir()
    parent = env.run("[[spawn the heron child task]] the heron parent", name="heron")
    env.wait(parent)
    child = wait_until(lambda: env.children(parent), 30, what="the child")[0]["id"]
    env.wait(child)
    loner = env.run("the heron loner", name="loner", cwd=elsewhere)
    env.wait(loner)
    schema = env.work / "schema.json"
    schema.write_text(
        json.dumps({"type": "object", "properties": {"bird": {"type": "string"}}, "required": ["bird"]})
    )
    typed = env.run_job("--output-schema", str(schema), '[[answers {"bird": "egret"}]] name a bird')
    env.wait(typed)
    everyone = {parent, child, loner}
    wait_until(
        lambda: {r["job"] for r in found(env, "heron", "--limit", "100")} >= everyone, 10, what="all three"
    )
    assert {r["job"] for r in found(env, "heron", "--tree", "heron", "--limit", "100")} == {parent, child}
    assert {r["job"] for r in found(env, "heron", "--tree", child, "--limit", "100")} == {child}
    assert {r["job"] for r in found(env, "heron", "--cwd", str(elsewhere))} == {loner}
    assert found(env, "heron", "--since", "2999-01-01") == []
    assert found(env, "heron", "--since", "2000-01-01T00:00:00Z")
    [result] = wait_until(lambda: found(env, "egret", "--kind", "result"), 10, what="result")
    assert result["job"] == typed and result["entry"] is None
