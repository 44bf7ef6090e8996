"""roost web's diff, merge and event log pages, on a real roostd (fake pi) and real git: a
diff holding `</pre><script>` stays inert, a merge is reported, a conflict is named."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from kit.lab import Lab
from kit.webserver import WebServer

pytestmark = pytest.mark.timeout(120)


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
        env={
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@t",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@t",
            "PATH": "/usr/bin:/bin",
        },
    ).stdout


def repo(lab: Lab) -> Path:
    path = lab.work / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.name", "t")
    git(path, "config", "user.email", "t@t")
    (path / "page.html").write_text("<p>hello</p>\n")
    git(path, "add", ".")
    git(path, "commit", "-qm", "first")
    return path


def test_a_diff_is_escaped_and_merged(fake_pi_env: Lab) -> None:
    lab = fake_pi_env
    path = repo(lab)
    job = lab.run_job("--worktree", "--name", "editor", "hello", cwd=path)
    assert lab.wait(job) == "done"
    tree = Path(lab.row(job)["worktree"]["path"])
    (tree / "page.html").write_text("<p>hello</p>\n</pre><script>alert('diff')</script>\n")
    git(tree, "commit", "-qam", "<script>alert('msg')</script>")
    with WebServer(lab) as web:
        http = web.paired()
        page = http.get(f"{web.url}/job/{job}/diff")
        assert page.status_code == 200
        assert "&lt;/pre&gt;&lt;script&gt;alert(&#39;diff&#39;)&lt;/script&gt;" in page.text
        assert "</pre><script>" not in page.text and page.text.lower().count("<script") == 1
        assert 'class="d-add"' in page.text
        merged = web.post(http, f"/job/{job}/merge")
        assert merged.status_code == 200 and "merged into main" in merged.text
    assert "alert('diff')" in (path / "page.html").read_text()


def test_a_conflicting_merge_names_the_file(fake_pi_env: Lab) -> None:
    lab = fake_pi_env
    path = repo(lab)
    job = lab.run_job("--worktree", "hello", cwd=path)
    assert lab.wait(job) == "done"
    tree = Path(lab.row(job)["worktree"]["path"])
    (tree / "page.html").write_text("<p>theirs</p>\n")
    git(tree, "commit", "-qam", "theirs")
    (path / "page.html").write_text("<p>ours</p>\n")
    git(path, "commit", "-qam", "ours")
    with WebServer(lab) as web:
        http = web.paired()
        refused = web.post(http, f"/job/{job}/merge")
        assert "conflicts in page.html" in refused.text
        # The inbox keeps the conflict (roostd keeps nothing else of a refused merge).
        [entry] = [e for e in lab.cli_json("inbox", "--json") if e["kind"] == "conflict"]
        assert entry["job"]["id"] == job and "conflicts in page.html" in entry["text"]
        assert entry["id"] in http.get(web.url + "/inbox").text
    assert (path / "page.html").read_text() == "<p>ours</p>\n"
    # Resolved on the job's branch, the merge goes through and the entry is gone.
    (tree / "page.html").write_text("<p>ours</p>\n")
    git(tree, "commit", "-qam", "agree")
    git(tree, "merge", "-q", "-s", "ours", "main", "-m", "take ours")
    lab.roost_ok("merge", job)
    assert [e for e in lab.cli_json("inbox", "--json") if e["kind"] == "conflict"] == []


def test_the_event_log_filters(fake_pi_env: Lab) -> None:
    lab = fake_pi_env
    job = lab.run_job("--name", "<b>evt</b>", "--shell", "--", "false")
    lab.wait_state(job, "failed")
    with WebServer(lab) as web:
        http = web.paired()
        everything = http.get(f"{web.url}/events").text
        assert "job.created" in everything and "job.failed" in everything
        assert "&lt;b&gt;evt&lt;/b&gt;" in everything and "<b>evt" not in everything
        failed = http.get(f"{web.url}/events", params={"type": "job.failed", "job": job}).text
        assert "job.failed" in failed and "job.created" not in failed
