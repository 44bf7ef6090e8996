"""The run note keeps a settled run's report until roostd answered it (roost.worker.runnote),
and a restarted worker reports only an answer of the run its note names (answers.final_answer)."""

from __future__ import annotations

from pathlib import Path

from roost.worker.answers import final_answer
from roost.worker.runnote import Keeper, RunNote, read


def test_a_pending_report_outlives_every_note_until_it_is_crossed_off(tmp_path: Path) -> None:
    keeper = Keeper(tmp_path / "run.json")
    keeper.save(RunNote(reports=[{"report": "ab12", "result": "R", "state": "done"}]))
    keeper.save(RunNote("reply", "2026-12-06T05:00:00.000Z"))  # the next run starts
    keeper.save(RunNote())  # and settles
    assert [r["report"] for r in read(keeper.path).reports] == ["ab12"]
    keeper.reported("ffff")  # not ours: nothing changes
    assert [r["report"] for r in read(keeper.path).reports] == ["ab12"]
    keeper.reported("ab12")
    assert read(keeper.path).reports == [] and keeper.note.reports == []


def answer(at: str, text: str = "done it") -> dict:
    return {
        "type": "message",
        "timestamp": at,
        "message": {"role": "assistant", "stopReason": "stop", "content": [{"type": "text", "text": text}]},
    }


def test_only_an_answer_written_after_the_note_is_the_runs() -> None:
    user = {
        "type": "message",
        "timestamp": "2026-12-06T05:00:01.000Z",
        "message": {"role": "user", "content": "go"},
    }
    since = 1796533200000.0  # 2026-12-06T05:00:00Z
    # The worker was killed after it noted the run and before pi took its item: the
    # session's last answer is the last run's, reported already.
    assert final_answer([answer("2026-12-06T04:59:59.000Z")], since) is None
    now = answer("2026-12-06T05:00:02.000Z", "this run's")
    assert final_answer([user, now], since) is now["message"]
    assert final_answer([now, user], since) is None  # input after it: not an answer
    assert final_answer([now], None) is None
