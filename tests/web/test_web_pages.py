"""The web's rendering and pages without a browser (Starlette's TestClient, no roostd):
Markdown rendered and still inert, agent messages and reports as badges, the job list's
groups, order and filters, the actions a state allows, Remove's confirmation, the diff
page of a merged branch, the inbox's budget and conflict entries, the nav."""

# ruff: noqa: F811  (home and calls: test_web_gate's fixtures, imported)
from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from test_web_gate import JOB, ORIGIN, calls, home, make, paired, row  # noqa: F401 (fixtures)

from roost.web import bridge, mdrender
from roost.web.app import fragment
from roost.web.entries import entry_items
from roost.web.pageparts import job_list, merge_state

HOSTILE_MD = """[x](javascript:alert(1)) [y](JAVASCRIPT:alert(2)) [d](data:text/html,hi)
![pixel](https://tracker.example.net/p.png) ![js](javascript:alert(3))
<img src=x onerror=alert(4)> <b onmouseover=alert(5)>b</b>

<div onclick="alert(6)">
an HTML block
</div>

<script>alert(7)</script>
"""


def inert(html: str) -> None:
    lower = html.lower()
    for bad in ("<script", "<img", "<div onclick", "<b ", "javascript:alert", "data:text"):
        if bad.startswith("javascript") or bad.startswith("data"):
            assert f'href="{bad}' not in lower, bad
        else:
            assert bad not in lower, bad


def test_markdown_is_rendered_with_tables_and_coloured_code() -> None:
    html = mdrender.render(
        "# Review\n\n**mostly fine**\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n"
        "```python\ndef f(x):\n    return x\n```\n"
    )
    assert "<h1>Review</h1>" in html and "<strong>mostly fine</strong>" in html
    assert "<table>" in html and "<td>1</td>" in html
    assert '<div class="hl">' in html and '<span class="k">def</span>' in html  # classes, no style
    assert "style=" not in html


def test_markdown_links_are_http_or_mailto_only_and_open_without_referrer() -> None:
    html = mdrender.render("[ok](https://example.org/a) [m](mailto:a@b.c) " + HOSTILE_MD)
    assert '<a href="https://example.org/a" rel="noopener noreferrer" target="_blank">ok</a>' in html
    assert 'href="mailto:a@b.c"' in html
    assert html.count("<a ") == 3  # the two links and the http image as a link; nothing else
    inert(html)


def test_an_image_is_a_link_and_never_loaded() -> None:
    html = mdrender.render("![a chart](https://tracker.example.net/p.png)")
    assert "<img" not in html
    assert 'href="https://tracker.example.net/p.png"' in html and "image: a chart" in html


def test_html_blocks_are_shown_escaped() -> None:
    html = mdrender.render(HOSTILE_MD)
    assert "&lt;div onclick=&quot;alert(6)&quot;&gt;" in html
    assert "&lt;script&gt;alert(7)&lt;/script&gt;" in html
    inert(html)


def test_the_code_stylesheet_is_pygments_own() -> None:
    shipped = (Path(mdrender.__file__).parent / "static" / "code.css").read_text()
    assert shipped.strip() == mdrender.code_css().strip()


def _agent_entry(kind: str, body: str, with_details_body: bool = True) -> dict[str, Any]:
    from roost.agents.envelope import agent_frame
    from roost.wire.protocol import CUSTOM_TYPE

    frame = agent_frame(
        {
            "kind": kind,
            "from": {"id": "5e5e5e5e", "name": "scout", "relation": "child"},
            "text": body,
            "result": body,
            "state": "done",
        },
        3,
    )
    details = dict(frame["details"])
    if not with_details_body:
        details.pop("body")
    return {
        "type": "custom_message",
        "customType": CUSTOM_TYPE,
        "content": frame["content"],
        "details": details,
        "timestamp": "2026-12-06T09:04:00.000Z",
    }


@pytest.mark.parametrize("with_details_body", [True, False])
def test_an_agent_message_is_a_badge_and_its_body(with_details_body: bool) -> None:
    [item] = entry_items(_agent_entry("message", "Found **3** call sites.", with_details_body))
    assert item.title == "message from scout (child)"
    assert item.text == "Found **3** call sites."  # no wire tags, no framing paragraph
    html = fragment("_items.html", items=[item])
    assert "agent-message" not in html and "another agent session" not in html
    assert '<span class="badge badge-message">message from scout (child)</span>' in html
    assert "<strong>3</strong>" in html


def test_a_report_reads_report_from_name_and_state() -> None:
    [item] = entry_items(_agent_entry("report", "All 12 tests pass."))
    assert item.title == "report from scout: done"
    assert item.text == "All 12 tests pass."


def test_the_transcript_has_no_tofu_glyph() -> None:
    tool = {
        "type": "message",
        "timestamp": "2026-12-06T09:00:00Z",
        "message": {"role": "toolResult", "content": [{"type": "text", "text": "ok"}], "toolName": "bash"},
    }
    html = fragment("_items.html", items=entry_items(tool))
    assert "⎿" not in html and ">result</span> bash" in html


def test_a_hostile_assistant_text_stays_inert_on_the_page(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    session = tmp_path / "s.jsonl"
    session.write_text(
        json.dumps(
            {
                "type": "message",
                "timestamp": "2026-12-06T09:00:00Z",
                "message": {"role": "assistant", "content": [{"type": "text", "text": HOSTILE_MD}]},
            }
        )
        + "\n"
    )
    shown = row(session=str(session))

    async def request(op: str, **args: Any) -> dict[str, Any]:
        return {"entries": []} if op == "inbox" else {"job": shown}

    monkeypatch.setattr(bridge, "request", request)
    with make(home, rows=[shown]) as c:
        paired(c)
        page = c.get(f"/job/{JOB}")
    assert "&lt;div onclick=&quot;alert(6)&quot;&gt;" in page.text
    body = page.text.split("<main>", 1)[1]
    inert(body)


# -- the job list -----------------------------------------------------------------------------------
def rows_of(*specs: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out = {}
    for n, spec in enumerate(specs):
        r = row(
            **{
                "id": f"j{n:07d}",
                "name": f"n{n}",
                "created": f"2026-12-01T10:00:{n:02d}Z",
                "question": None,
                "state": "done",
                **spec,
            }
        )
        out[r["id"]] = r
    return out


def test_worktree_jobs_are_grouped_under_their_repository_and_waiting_first() -> None:
    rows = rows_of(
        {"cwd": "/src/a"},
        {"cwd": "/src/b"},
        {
            "cwd": "/rh/worktrees/j0000002",
            "worktree": {"path": "/rh/worktrees/j0000002", "branch": "roost/x", "origin": "/src/a"},
        },
        {"cwd": "/src/b", "state": "needs_input", "question": "which?"},
    )
    groups = job_list(rows)
    assert [g["folder"] for g in groups] == ["/src/b", "/src/a"]  # the waiting group first
    assert [r["name"] for _, r in groups[0]["rows"]] == ["n3", "n1"]  # the waiting job first
    assert [r["name"] for _, r in groups[1]["rows"]] == ["n0", "n2"]  # the worktree job under its repo


def test_the_list_filters_by_state_and_text_without_script(home: Path) -> None:
    rows = list(
        rows_of(
            {"name": "alpha", "state": "failed", "error": "pi exited 1: overloaded"},
            {"name": "beta"},
            {"name": "gamma", "state": "needs_input", "question": "which one?"},
        ).values()
    )
    with make(home, rows=rows) as c:
        paired(c)
        every = c.get("/").text
        failed = c.get("/?state=failed").text
        text = c.get("/?q=gam").text
    assert all(n in every for n in ("alpha", "beta", "gamma"))
    assert "alpha" in failed and "beta" not in failed and "pi exited 1: overloaded" in failed
    assert "gamma" in text and "alpha" not in text and "which one?" in text
    assert 'data-live="/live/tree?state=failed&amp;q="' in failed  # the live part keeps the filter


def test_a_row_has_id_badges_and_cost(home: Path) -> None:
    r = row(
        worktree={"path": "/w", "branch": "roost/b", "origin": "/src"},
        schedule={"name": "nightly"},
        result={"ok": True},
        usage={"cost": 0.5, "budget": 2.0},
    )
    html = fragment("_tree.html", groups=job_list({JOB: r}), connected=True)
    assert f'<code class="id">{JOB}</code>' in html and "$0.5000" in html
    for badge in ("worktree", "schedule", "result", "budget"):
        assert f'class="b b-{badge}"' in html


def test_the_nav_marks_the_page_and_counts_the_inbox(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def request(op: str, **args: Any) -> dict[str, Any]:
        return {"entries": [{"id": "e1"}, {"id": "e2"}]} if op == "inbox" else {"job": row()}

    monkeypatch.setattr(bridge, "request", request)
    with make(home) as c:
        paired(c)
        tree, events = c.get("/").text, c.get("/events").text
    assert '<a href="/" aria-current="page">jobs' in tree
    assert '<a href="/events" aria-current="page">events' in events and 'href="/" aria-current' not in events
    assert 'title="2 waiting for you">2</span>' in tree


# -- actions ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("state", "shown", "hidden"),
    [
        ("running", ["/stop"], ["/start"]),
        ("stopped", ["/start"], ["/stop"]),
        ("failed", ["/start"], ["/stop"]),
        ("needs_input", ["/stop"], ["/start"]),
    ],
)
def test_a_job_page_offers_the_actions_its_state_allows(
    home: Path, monkeypatch: pytest.MonkeyPatch, state: str, shown: list[str], hidden: list[str]
) -> None:
    async def request(op: str, **args: Any) -> dict[str, Any]:
        return {"entries": []} if op == "inbox" else {"job": row(state=state)}

    monkeypatch.setattr(bridge, "request", request)
    with make(home, rows=[row(state=state)]) as c:
        paired(c)
        page = c.get(f"/job/{JOB}").text
    for action in shown:
        assert f'action="/job/{JOB}{action}"' in page
    for action in hidden:
        assert f'action="/job/{JOB}{action}"' not in page
    assert f'href="/job/{JOB}/rm"' in page  # Remove is a link to its confirmation
    assert page.index('id="transcript"') < page.index('id="reply"')  # the reply box under it


def test_remove_asks_first_and_says_what_it_removed(home: Path, calls: list[Any]) -> None:
    with make(home) as c:
        csrf = paired(c)
        asked = c.post(f"/job/{JOB}/rm", data={"csrf": csrf}, headers=ORIGIN)
        assert asked.status_code == 303 and asked.headers["location"] == f"/job/{JOB}/rm"
        assert [op for op, _ in calls] == []
        page = c.get(f"/job/{JOB}/rm")
        assert page.status_code == 200 and 'name="confirm" value="yes"' in page.text
        done = c.post(f"/job/{JOB}/rm", data={"csrf": csrf, "confirm": "yes"}, headers=ORIGIN)
    assert [op for op, _ in calls][-1] == "rm"
    assert done.headers["location"].startswith("/?notice=removed%20")
    assert JOB in done.headers["location"]


def test_the_events_page_shows_values_not_python(home: Path) -> None:
    import json

    home.mkdir(parents=True, exist_ok=True)
    (home / "events.jsonl").write_text(
        json.dumps(
            {
                "seq": 1,
                "time": "2026-12-06T09:00:00Z",
                "type": "job.state",
                "job": {"id": JOB, "name": "x"},
                "dialog": False,
                "busy": True,
                "paths": ["a", "b"],
            }
        )
        + "\n"
    )
    with make(home) as c:
        paired(c)
        page = c.get("/events").text
    assert "dialog=no" in page and "busy=yes" in page and "paths=[&#34;a&#34;, &#34;b&#34;]" in page
    assert "False" not in page and "True" not in page


def test_the_inbox_offers_a_budget_raise_and_links_a_conflict_to_its_diff(home: Path) -> None:
    entries = [
        {"id": "b1", "kind": "budget", "text": "budget exhausted", "job": {"id": JOB, "name": "x"}},
        {"id": "c1", "kind": "conflict", "text": "conflicts in a.py", "job": {"id": JOB, "name": "x"}},
    ]
    html = fragment("_inbox.html", entries=entries, csrf="t", read_only=False)
    assert f'action="/job/{JOB}/budget"' in html and "Raise the budget" in html
    assert f'href="/job/{JOB}/diff"' in html


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def test_the_diff_page_says_merged_and_offers_no_merge(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, wt = tmp_path / "repo", tmp_path / "wt"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "a.txt").write_text("a\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a")
    base = git(repo, "rev-parse", "HEAD")
    git(repo, "worktree", "add", "-q", "-b", "roost/x", str(wt))
    shown = row(
        dir=str(tmp_path), worktree={"path": str(wt), "branch": "roost/x", "base": base, "origin": str(repo)}
    )
    assert merge_state(shown) == "empty"
    (wt / "a.txt").write_text("b\n")
    git(wt, "commit", "-q", "-am", "b")
    assert merge_state(shown) == "open"

    async def request(op: str, **args: Any) -> dict[str, Any]:
        return {"entries": []} if op == "inbox" else {"job": shown}

    monkeypatch.setattr(bridge, "request", request)
    with make(home, rows=[shown]) as c:
        paired(c)
        assert f'action="/job/{JOB}/merge"' in c.get(f"/job/{JOB}/diff").text
        git(repo, "merge", "-q", "roost/x")
        assert merge_state(shown) == "merged"
        page = c.get(f"/job/{JOB}/diff").text
    assert 'id="merged"' in page and f'action="/job/{JOB}/merge"' not in page


def test_a_new_job_defaults_to_the_last_directory(home: Path) -> None:
    rows = list(rows_of({"cwd": "/src/old"}, {"cwd": "/src/newest"}).values())
    with make(home, rows=rows) as c:
        paired(c)
        page = c.get("/new").text
        tree = c.get("/").text
    assert page.index('value="/src/newest"') < page.index('value="/src/old"')
    assert 'href="/new"' in tree.split("<main>")[1].split('id="tree"')[0]  # at the top
