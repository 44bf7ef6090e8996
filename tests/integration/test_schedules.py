"""Schedules and file triggers (README: Schedules), in real time, on a real roostd with the
fake pi: an `--every 2s` schedule, a roostd SIGKILL across a due time (the catch-up fires
exactly once; at several points around a due time: one event and one job each), an
on-change trigger on a real directory (a burst fires once), overlap skip and queue,
`--session same` (a reply to the same job), pause, resume, rm.

The fake pi holds a turn with `[[hold NAME]]` until the test creates the file NAME."""

from __future__ import annotations

import json
import time
from typing import Any

from kit.jobs import alive, settle
from kit.lab import Lab
from kit.wait import kill, wait_until


def fired(env: Lab, name: str | None = None) -> list[dict[str, Any]]:
    """The schedule.fired events (of the schedule `name`), oldest first."""
    path = env.roost_home / "events.jsonl"
    if not path.exists():
        return []
    events = [json.loads(line) for line in path.read_text().splitlines()]
    return [e for e in events if e["type"] == "schedule.fired" and (name is None or e["schedule"] == name)]


def row(env: Lab, name: str) -> dict[str, Any]:
    return json.loads(env.roost_ok("schedule", "show", name, "--json"))


def stamp(text: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def test_an_every_2s_schedule_fires_on_time_each_time(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    hooked = env.work / "hooked.jsonl"  # a hook on schedule.fired gets the event on stdin
    env.configure(hooks={"schedule.fired": ["sh", "-c", f"cat >> {hooked}; echo >> {hooked}"]})
    out = env.roost_ok("schedule", "add", "tick", "--every", "2s", "tick tock")
    assert out.startswith("tick  every 2s (")
    events = wait_until(lambda: (f := fired(env, "tick")) and len(f) >= 2 and f, 30, what="two firings")
    first, second = events[:2]
    assert [e["cause"] for e in (first, second)] == ["time", "time"]
    assert [e["outcome"] for e in (first, second)] == ["started", "started"]
    assert abs(stamp(second["due"]) - stamp(first["due"]) - 2.0) < 0.002
    for event in (first, second):  # each fired within 1 s of its time
        late = stamp(event["time"]) - stamp(event["due"])
        print(f"fired {late * 1000:.0f} ms after its due time")
        assert 0 <= late < 1.0, event
    jobs = [e["job"] for e in (first, second)]
    assert jobs[0]["id"] != jobs[1]["id"]
    assert [j["name"] for j in jobs] == ["tick-1", "tick-2"]
    record = env.record(jobs[0]["id"])
    assert record["task"].startswith(
        "tick tock\n\n[roost] This run was started by the schedule 'tick' because it was due"
    )
    assert settle(env, jobs[0]["id"]) == "done"
    assert env.row(jobs[0]["id"])["schedule"] == {"name": "tick", "cause": "time", "due": first["due"]}
    assert "⏲ tick (time)" in env.roost_ok("ls", "--wide")  # the META cell of ls and the view
    listing = env.roost_ok("schedule", "ls")
    assert "tick  every 2s" in listing and "last: time started" in listing
    shown = row(env, "tick")
    assert shown["fired"] >= 2 and shown["next"] is not None
    assert shown["last"]["cause"] == "time" and shown["jobs"][:2] == [j["id"] for j in jobs]
    # `roost events` shows it; pause stops the firings, rm removes the schedule
    shown_events = env.roost_ok("events", "--type", "schedule.fired")
    assert f"schedule tick fired (time, due {first['due']}): started" in shown_events
    wait_until(lambda: hooked.exists() and first["due"] in hooked.read_text(), 30, what="the hook's run")
    env.roost_ok("schedule", "pause", "tick")
    assert row(env, "tick")["paused"] and row(env, "tick")["next"] is None
    count = len(fired(env, "tick"))
    env.roost_ok("schedule", "resume", "tick")
    wait_until(lambda: len(fired(env, "tick")) > count, 30, what="a firing after resume")
    env.roost_ok("schedule", "rm", "tick")
    assert json.loads(env.roost_ok("schedule", "ls", "--json")) == []
    gone = env.roost("schedule", "show", "tick")
    assert gone.returncode == 2 and "no schedule named 'tick'" in gone.stderr


def test_a_sigkilled_roostd_catches_up_exactly_once(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    env.roost_ok("schedule", "add", "nightly", "--every", "2s", "--catch-up", "one", "scout")
    first = wait_until(lambda: fired(env, "nightly"), 30, what="the first firing")[0]
    daemon = env.daemon_pid()
    assert daemon is not None
    kill(daemon)  # right after a firing: it is on disk, so it never fires again
    # Across due times: roostd stays down for three of them.
    down_until = stamp(first["due"]) + 3 * 2 + 0.5
    wait_until(lambda: time.time() > down_until, 30, what="three due times to pass")
    env.roost_ok("schedule", "ls")  # a new roostd
    assert env.daemon_pid() not in (None, daemon)
    catch_up = wait_until(
        lambda: [e for e in fired(env, "nightly") if e["cause"] == "catch-up"], 30, what="the catch-up firing"
    )
    later = stamp(catch_up[0]["time"]) + 2.5
    wait_until(
        lambda: time.time() > later and len(fired(env, "nightly")) >= 3,
        30,
        what="a timed firing after the catch-up",
    )
    events = fired(env, "nightly")
    dues = [e["due"] for e in events]
    assert len(dues) == len(set(dues)), dues  # no firing twice
    assert [e["cause"] for e in events].count("catch-up") == 1
    assert events[0] == first and stamp(catch_up[0]["due"]) >= down_until - 2.5
    assert all(e["cause"] == "time" for e in events[2:])


def test_a_firing_cut_short_by_a_kill_runs_once(fake_pi_env: Lab) -> None:
    """roostd killed after a firing is on disk (`pending`) and before it noted its run: the
    next roostd finds the job it made and starts nothing, or starts the run it never made."""
    env = fake_pi_env
    env.roost_ok("schedule", "add", "nightly", "--every", "1h", "scout")
    env.roost_ok("schedule", "run-now", "nightly")
    first = wait_until(lambda: row(env, "nightly")["jobs"], 30, what="the first job")[0]
    for name in ("nightly-1", "nightly-2"):  # killed after its job was made / before
        daemon = env.daemon_pid()
        assert daemon is not None
        kill(daemon)
        book = env.roost_home / "schedules.json"
        data = json.loads(book.read_text())
        due = time.time()
        data["schedules"][0]["pending"] = {
            "cause": "run-now",
            "due": due,
            "paths": None,
            "name": name,
            "job": None,
        }
        book.write_text(json.dumps(data))
        env.roost_ok("schedule", "ls")  # a new roostd finishes the firing
        event = wait_until(
            lambda due=due: [e for e in fired(env, "nightly") if abs(stamp(e["due"]) - due) < 0.01],
            30,
            what=f"the firing that makes {name}",
        )
        assert event[0]["outcome"] == "started" and event[0]["job"]["name"] == name
        assert row(env, "nightly")["last"]["job"] == event[0]["job"]["id"]
        assert json.loads(book.read_text())["schedules"][0]["pending"] is None
    names = [r["name"] for r in env.cli_json("ls", "--json")]
    assert sorted(names) == ["nightly-1", "nightly-2"], names  # each made once
    assert env.row(first)["name"] == "nightly-1"


def test_catch_up_all_fires_each_missed_one_and_never_one_that_fired(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    env.roost_ok("schedule", "add", "each", "--every", "2s", "--catch-up", "all", "--overlap", "queue", "x")
    first = wait_until(lambda: fired(env, "each"), 30, what="the first firing")[0]
    settle(env, first["job"]["id"])
    daemon = env.daemon_pid()
    assert daemon is not None
    kill(daemon)  # the firing is on disk: the new roostd does not count it as missed
    down_until = time.time() + 2 * 2 + 0.5  # two due times pass
    wait_until(lambda: time.time() > down_until, 30, what="two due times to pass")
    env.roost_ok("schedule", "ls")  # a new roostd
    wait_until(
        lambda: (
            len([e for e in fired(env, "each") if e["cause"] == "catch-up" and e["outcome"] != "queued"]) >= 2
        ),
        30,
        what="the catch-ups",
    )
    events = [e for e in fired(env, "each") if e["outcome"] != "queued"]
    dues = [e["due"] for e in events]
    assert len(dues) == len(set(dues)), dues
    catch_ups = [stamp(e["due"]) for e in events if e["cause"] == "catch-up"]
    assert len(catch_ups) >= 2 and catch_ups == sorted(catch_ups)
    assert stamp(first["due"]) not in catch_ups


def test_catch_up_none_skips_what_was_missed(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    env.roost_ok("schedule", "add", "quiet", "--every", "2s", "--catch-up", "none", "x")
    first = wait_until(lambda: fired(env, "quiet"), 30, what="the first firing")[0]
    daemon = env.daemon_pid()
    assert daemon is not None
    kill(daemon)
    down_until = stamp(first["due"]) + 5
    wait_until(lambda: time.time() > down_until, 30, what="due times to pass")
    shown = row(env, "quiet")  # a new roostd
    assert shown["last"]["outcome"] in ("skipped", "started")
    wait_until(lambda: len(fired(env, "quiet")) >= 2, 30, what="the next timed firing")
    assert [e["cause"] for e in fired(env, "quiet")][:2] == ["time", "time"]


def test_a_burst_of_changes_fires_once_with_the_paths_as_data(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    watched = env.work / "watched"
    (watched / ".git").mkdir(parents=True)
    env.roost_ok(
        "schedule", "add", "docs", "--on-change", str(watched), "--debounce", "1s", "rebuild the docs"
    )
    assert row(env, "docs")["paths"] == [str(watched)]
    for n in range(10):
        (watched / f"f{n}.md").write_text("x")
    (watched / ".git" / "index").write_text("ignored")
    last_write = time.time()
    event = wait_until(lambda: fired(env, "docs"), 30, what="the firing")[0]
    print(f"fired {(stamp(event['time']) - last_write) * 1000:.0f} ms after the last write (debounce 1 s)")
    assert event["cause"] == "change" and event["outcome"] == "started"
    assert sorted(event["paths"]) == sorted(str(watched / f"f{n}.md") for n in range(10))
    task = env.record(event["job"]["id"])["task"]
    assert "<roost-changed-paths>" in task and json.dumps(str(watched / "f3.md")) in task
    assert settle(env, event["job"]["id"]) == "done"
    # one more change: one more firing, with that path alone (the burst gave one)
    (watched / "late.md").write_text("y")
    wait_until(lambda: len(fired(env, "docs")) >= 2, 30, what="the second firing")
    events = fired(env, "docs")
    assert len(events) == 2 and events[1]["paths"] == [str(watched / "late.md")]


def test_overlap_skip_and_queue(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    env.roost_ok("schedule", "add", "slow", "--every", "1h", "[[hold g1]] slow")
    assert env.roost_ok("schedule", "run-now", "slow").startswith("started job ")
    skipped = env.roost_ok("schedule", "run-now", "slow")
    assert skipped.startswith("skipped") and "is still running (--overlap skip)" in skipped
    (env.work / "g1").touch()
    events = fired(env, "slow")
    assert [e["outcome"] for e in events] == ["started", "skipped"]
    assert all(e["cause"] == "run-now" for e in events)
    settle(env, events[0]["job"]["id"])

    env.roost_ok("schedule", "add", "queued", "--every", "1h", "--overlap", "queue", "[[hold g2]] queued")
    env.roost_ok("schedule", "run-now", "queued")
    assert env.roost_ok("schedule", "run-now", "queued").startswith("queued")
    assert row(env, "queued")["queued"] == 1
    assert len([e for e in fired(env, "queued") if e["outcome"] == "started"]) == 1
    (env.work / "g2").touch()  # the first run ends: the queued firing runs
    started = wait_until(
        lambda: (s := [e for e in fired(env, "queued") if e["outcome"] == "started"]) and len(s) == 2 and s,
        30,
        what="the queued firing",
    )
    assert started[0]["job"]["id"] != started[1]["job"]["id"]
    assert row(env, "queued")["queued"] == 0


def test_session_same_replies_to_the_same_job(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    env.roost_ok("schedule", "add", "diary", "--every", "1h", "--session", "same", "write the diary")
    assert env.roost_ok("schedule", "run-now", "diary").startswith("started job ")
    job = row(env, "diary")["last"]["job"]
    assert settle(env, job) == "done"
    again = env.roost_ok("schedule", "run-now", "diary")
    assert again.startswith(f"replied job {job}")
    wait_until(
        lambda: (
            sum(1 for e in env.session(job) if e.get("type") == "message" and e["message"]["role"] == "user")
            == 2
        ),
        30,
        what="the second firing as a reply in the same session",
    )
    assert row(env, "diary")["jobs"] == [job]
    assert [e["outcome"] for e in fired(env, "diary")] == ["started", "replied"]


def test_refusals_are_one_clear_line(fake_pi_env: Lab) -> None:
    env = fake_pi_env
    cases = [
        (["schedule", "add", "x", "task"], "give one of --cron, --every, --at, --on-change"),
        (["schedule", "add", "x", "--every", "5", "t"], "is not a duration"),
        (["schedule", "add", "x", "--every", "0.5s", "t"], "too often"),
        (["schedule", "add", "x", "--cron", "61 * * * *", "t"], "Bad minute"),
        (["schedule", "add", "x", "--at", "2001-01-01T00:00", "t"], "is in the past"),
        (["schedule", "add", "x", "--tz", "Nowhere/Land", "--every", "1h", "t"], "unknown time zone"),
        (["schedule", "add", "bad name", "--every", "1h", "t"], "schedule name"),
        (["schedule", "add", "x", "--every", "1h", "--thinking", "huge", "t"], "thinking"),
    ]
    for args, words in cases:
        result = env.roost(*args)
        assert result.returncode in (1, 2), (args, result)
        assert words in result.stderr and len(result.stderr.strip().splitlines()) == 1, (args, result.stderr)
    env.roost_ok("schedule", "add", "x", "--every", "1h", "t")
    taken = env.roost("schedule", "add", "x", "--every", "1h", "t")
    assert taken.returncode == 1 and "a schedule named 'x' exists" in taken.stderr
    assert alive(env.daemon_pid() or 0)


def test_an_at_schedule_fires_once(fake_pi_env: Lab) -> None:
    from datetime import datetime, timedelta

    env = fake_pi_env
    env.roost_ok("schedule", "ls")  # roostd up: its start is not part of the 3 s
    when = (datetime.now().astimezone() + timedelta(seconds=3)).isoformat(timespec="seconds")
    env.roost_ok("schedule", "add", "once", "--at", when, "just once")
    event = wait_until(lambda: fired(env, "once"), 30, what="the firing")[0]
    assert event["cause"] == "time" and stamp(event["due"]) == stamp(when)
    shown = row(env, "once")
    assert shown["next"] is None and shown["fired"] == 1


def test_idle_schedules_cost_roostd_no_cpu(fake_pi_env: Lab) -> None:
    """100 schedules with nothing due: timers only, so roostd does nothing at all."""
    import psutil

    env = fake_pi_env
    env.roost_ok("schedule", "ls")  # roostd up
    daemon = psutil.Process(env.daemon_pid())

    def cpu_in(seconds: float) -> float:
        before = daemon.cpu_times()
        deadline = time.time() + seconds
        wait_until(lambda: time.time() > deadline, seconds + 10, what=f"{seconds} s to pass")
        after = daemon.cpu_times()
        return (after.user + after.system) - (before.user + before.system)

    baseline = cpu_in(5)
    for n in range(100):
        env.request(
            "schedule_add",
            name=f"s{n}",
            run={"task": "t", "cwd": str(env.work)},
            **({"every": "1h"} if n % 2 else {"cron": "0 3 * * *"}),
        )
    used = cpu_in(5)
    print(f"roostd CPU-seconds in 5 s: {used:.3f} with 100 idle schedules, {baseline:.3f} with none")
    assert used < 0.05


def test_a_missed_firing_is_one_event_and_one_job_wherever_the_kill_lands(fake_pi_env: Lab) -> None:
    """`--every 3s --overlap queue`, roostd SIGKILLed at several points around a due time
    and started again after the due times it missed: each restart makes one catch-up, one
    `schedule.fired` event and one job. A run that ended while roostd was down is no run
    to queue behind (its record still said `starting`: its worker had not reported yet),
    and a restart just before a due time races that timer without firing anything twice."""
    env = fake_pi_env
    env.roost_ok("schedule", "add", "tick", "--every", "3s", "--overlap", "queue", "tick")
    wait_until(lambda: fired(env, "tick"), 30, what="the first firing")

    def next_due() -> float:
        return stamp(row(env, "tick")["next"])

    def after(moment: float) -> None:
        wait_until(lambda: time.time() > moment, 30, what=f"{moment - time.time():.1f} s")

    # (when to kill, relative to a due time d; when to start again, relative to d)
    rounds: list[tuple[str, float, float]] = [
        ("before d, back 0.4 s past the next one", -0.4, 3.4),
        ("as d fired, its run just made, back 0.4 s past d + 6", 0.0, 6.4),
        ("after d, back 0.25 s before d + 6 (the timer races the catch-up)", 0.4, 5.75),
    ]
    for what, kill_at, back_at in rounds:
        due = next_due()
        seen = len(fired(env, "tick"))
        if kill_at:
            after(due + kill_at)
        else:
            wait_until(
                lambda due=due: [e for e in fired(env, "tick") if stamp(e["due"]) >= due - 0.01],
                30,
                what=f"the firing for d ({what})",
            )
        daemon = env.daemon_pid()
        assert daemon is not None
        kill(daemon)
        after(due + back_at)
        env.roost_ok("schedule", "ls")  # a new roostd
        catch_up = wait_until(
            lambda seen=seen: [e for e in fired(env, "tick")[seen:] if e["cause"] == "catch-up"],
            30,
            what=f"the catch-up ({what})",
        )[0]
        # The next timed firing after it: anything the restart would fire twice is out.
        later = stamp(catch_up["time"]) + 0.5
        wait_until(
            lambda later=later: [
                e
                for e in fired(env, "tick")
                if e["cause"] == "time" and stamp(e["due"]) > later and e["outcome"] == "started"
            ],
            30,
            what=f"a timed firing after the catch-up ({what})",
        )
        new = fired(env, "tick")[seen:]
        catch_ups = [e for e in new if e["cause"] == "catch-up"]
        assert [(e["outcome"], e["due"]) for e in catch_ups] == [("started", catch_up["due"])], (what, new)
        twice = [e for e in new if e["due"] == catch_up["due"] and e["seq"] != catch_up["seq"]]
        assert twice == [], (what, new)
    env.roost_ok("schedule", "pause", "tick")
    events = fired(env, "tick")
    made = [e["job"]["id"] for e in events if e["outcome"] == "started"]
    assert len(made) == len(set(made)), events  # one job a firing
    dues = [e["due"] for e in events if e["outcome"] != "queued"]
    assert len(dues) == len(set(dues)), events  # one firing a due time
    jobs = [r["id"] for r in env.cli_json("ls", "--json")]
    assert sorted(jobs) == sorted(made), (jobs, events)
