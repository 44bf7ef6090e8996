"""End-to-end tests of worktrees (issue 13): real git, the real pi with the roost extension,
the scripted model. A child in a worktree edits and commits; its report carries its branch,
log and diffstat; `roost diff`, `merge`, `rm` and `gc` work on what it left; conflicts
abort cleanly; bad input gets a clear error with nothing made; a worktree job survives a
roostd restart and a SIGKILLed worker."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path

from kit.lab import Lab
from kit.matchers import after_tool, fresh, new_user_has, task, wait_file_command
from kit.wait import kill_and_wait, wait_until

from roost.fakellm import text, tool_call, tool_calls

T = 90.0


def sh_git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def make_repo(path: Path, files: dict[str, str]) -> Path:
    """A repository on branch main with `files` committed; identity set locally."""
    sh_git(path, "init", "-q", "-b", "main")
    sh_git(path, "config", "user.email", "test@example.invalid")
    sh_git(path, "config", "user.name", "roost test")
    for name, body in files.items():
        (path / name).write_text(body)
    sh_git(path, "add", "-A")
    sh_git(path, "commit", "-q", "-m", "base")
    return path


def spawned(result_text: str) -> str:
    match = re.match(r'^spawned ([0-9a-f]{8}) "', result_text)
    assert match, result_text
    return match.group(1)


def spawn_params(request: dict) -> set[str]:
    """The parameters roost_spawn offers the model in a request."""
    for tool in request.get("tools") or []:
        function = tool.get("function") or {}
        if function.get("name") == "roost_spawn":
            return set((function.get("parameters") or {}).get("properties") or {})
    raise AssertionError("no roost_spawn in the request's tools")


def worktrees_of(lab: Lab) -> list[str]:
    root = lab.roost_home / "worktrees"
    return sorted(p.name for p in root.iterdir()) if root.is_dir() else []


def show(lab: Lab, job: str) -> dict:
    return json.loads(lab.cli("show", job, "--json").stdout)


def edit_and_commit(line: str, message: str, extra: str = "") -> str:
    return f"printf '{line}\\n' > f.txt && git commit -qam '{message}' && echo committed{extra}"


def test_child_in_worktree_edits_commits_reports_diff_merge(make_lab) -> None:
    lab = make_lab(agentChildWorktrees="ask")
    repo = make_repo(
        lab.work, {"f.txt": "base\n", "g.txt": "keep\n", "AGENTS.md": "Project rule MK-AGENTS-FILE.\n"}
    )
    gate = lab.root / "gate"
    llm = lab.llm
    llm.add(
        fresh("MK-WP"),
        tool_call("roost_spawn", {"task": "MK-WK edit f.txt", "name": "wt-kid", "worktree": True}),
    )
    llm.add(after_tool("MK-WP", "roost_spawn"), text("spawned the kid"))
    llm.add(task("MK-WP") & new_user_has('kind="report"'), text("got the report"))
    llm.add(
        fresh("MK-WK"),
        tool_call(
            "bash",
            {
                "command": edit_and_commit("kid line", "kid edit")
                + " && echo note > notes.txt && pwd && "
                + wait_file_command(gate)
            },
        ),
    )
    llm.add(after_tool("MK-WK", "bash"), text("kid done: edited f.txt"))

    parent = lab.run("MK-WP parent")
    # "ask": the model is offered worktree, branch and base.
    assert {"worktree", "branch", "base"} <= spawn_params(lab.wait_request(fresh("MK-WP")))
    spawn_text = lab.wait_tool_results("MK-WP", "roost_spawn")[0]["text"]
    kid = spawned(spawn_text)
    wt = lab.roost_home / "worktrees" / kid
    branch = f"roost/wt-kid-{kid}"
    assert f"in worktree {wt} on branch {branch}" in spawn_text
    first = lab.wait_request(fresh("MK-WK"))
    # pi read the worktree's AGENTS.md at start-up (written before pi boots; the rest of
    # the files while it boots).
    system = json.dumps([m for m in first["messages"] if m.get("role") == "system"])
    assert "MK-AGENTS-FILE" in system

    row = show(lab, kid)
    base = sh_git(repo, "rev-parse", "main").strip()
    # origin: the folder it was started in, its parent's (the list groups it there).
    assert row["worktree"] == {
        "path": str(wt),
        "branch": branch,
        "base": base,
        "origin": os.path.realpath(show(lab, parent)["cwd"]),
    }
    assert row["cwd"] == str(wt)
    listed = [r for r in lab.ls() if r["id"] == kid][0]
    assert listed["worktree"] == row["worktree"]
    assert [r for r in lab.ls() if r["id"] == parent][0]["worktree"] is None
    assert "worktree" in lab.cli("show", kid).stdout

    # While its run is in progress a merge is refused.
    wait_until(lambda: (wt / "notes.txt").exists(), T, "the kid's edit")
    busy = lab.cli("merge", kid, check=False)
    assert busy.returncode == 1 and "merge once it has settled" in busy.stderr, busy.stderr
    gate.touch()
    assert lab.wait(kid) == "done"

    # The bash ran in the worktree; the main checkout did not change.
    out = lab.tool_results_of("MK-WK", "bash")[0]["text"]
    assert str(wt) in out and "committed" in out
    assert (repo / "f.txt").read_text() == "base\n"
    assert sh_git(repo, "status", "--porcelain") == ""
    assert sh_git(repo, "branch", "--list", branch).strip()

    # The parent's report: the result, then branch, log, diffstat and uncommitted work.
    body = wait_until(lambda: [r["body"] for r in lab.reports_seen("MK-WP")], T, "the kid's report")[0]
    assert "kid done: edited f.txt" in body
    assert f"[worktree] branch {branch} (base {base[:12]}" in body
    assert "commits since base (1):" in body and "kid edit" in body
    assert re.search(r"f\.txt \| 2 \+-", body), body
    assert "UNCOMMITTED" in body and "notes.txt" in body

    # roost diff: committed and uncommitted changes against the base.
    patch = lab.cli("diff", kid).stdout
    assert "+kid line" in patch and "-base" in patch and "+note" in patch
    stat = lab.cli("diff", kid, "--stat").stdout
    assert "f.txt" in stat and "notes.txt" in stat and "2 files changed" in stat
    assert sh_git(wt, "status", "--porcelain").strip() == "?? notes.txt"  # every file there

    # roost merge: into the branch checked out where the parent runs (main).
    merged = lab.cli("merge", kid)
    assert f"{branch} merged into main" in merged.stdout
    assert "uncommitted" in merged.stderr  # notes.txt stays behind, and it says so
    assert (repo / "f.txt").read_text() == "kid line\n"
    assert not (repo / "notes.txt").exists()
    assert "Merge roost job wt-kid" in sh_git(repo, "log", "-1", "--format=%s")
    again = lab.cli("merge", kid)
    assert "already up to date" in again.stdout


def test_two_children_same_file_second_merge_conflicts(make_lab) -> None:
    lab = make_lab(agentChildWorktrees="always")
    repo = make_repo(lab.work, {"f.txt": "base\n"})
    llm = lab.llm
    llm.add(
        fresh("MK-TP"),
        tool_calls(
            ("roost_spawn", {"task": "MK-TA edit", "name": "kid-a"}),
            ("roost_spawn", {"task": "MK-TB edit", "name": "kid-b"}),
        ),
    )
    llm.add(after_tool("MK-TP", "roost_spawn"), text("two kids"))
    llm.add(task("MK-TP") & new_user_has('kind="report"'), text("noted"))
    for marker, line in (("MK-TA", "from a"), ("MK-TB", "from b")):
        llm.add(fresh(marker), tool_call("bash", {"command": edit_and_commit(line, line)}))
        llm.add(after_tool(marker, "bash"), text(f"{marker} done"))

    lab.run("MK-TP parent")
    results = lab.wait_tool_results("MK-TP", "roost_spawn", 2)
    kid_a, kid_b = (spawned(r["text"]) for r in results)
    assert lab.wait(kid_a) == "done" and lab.wait(kid_b) == "done"
    head = sh_git(repo, "rev-parse", "HEAD").strip()
    b_branch = show(lab, kid_b)["worktree"]["branch"]
    b_tip = sh_git(repo, "rev-parse", b_branch).strip()

    # A target checkout with uncommitted changes to tracked files: refused, untouched.
    (repo / "f.txt").write_text("my own edit\n")
    dirty = lab.cli("merge", kid_a, check=False)
    assert dirty.returncode == 1
    assert f"the checkout of main at {repo} has uncommitted changes (f.txt)" in dirty.stderr
    assert (repo / "f.txt").read_text() == "my own edit\n"
    assert sh_git(repo, "rev-parse", "HEAD").strip() == head
    sh_git(repo, "checkout", "--", "f.txt")

    assert "merged into main" in lab.cli("merge", kid_a).stdout
    merged_head = sh_git(repo, "rev-parse", "HEAD").strip()
    assert merged_head != head

    conflict = lab.cli("merge", kid_b, check=False)
    assert conflict.returncode == 1
    assert "conflicts in f.txt" in conflict.stderr and "nothing was changed" in conflict.stderr
    # Both sides untouched: main as after the first merge, clean; kid-b's branch and
    # worktree as they were; no merge in progress.
    assert sh_git(repo, "rev-parse", "HEAD").strip() == merged_head
    assert sh_git(repo, "status", "--porcelain") == ""
    assert (repo / "f.txt").read_text() == "from a\n"
    assert not (repo / ".git" / "MERGE_HEAD").exists()
    assert sh_git(repo, "rev-parse", b_branch).strip() == b_tip
    assert (lab.roost_home / "worktrees" / kid_b / "f.txt").read_text() == "from b\n"

    # --into another branch and --squash: a branch checked out nowhere is merged in a
    # checkout of roost's own, which is gone afterwards.
    sh_git(repo, "branch", "side", head)
    squashed = lab.cli("merge", kid_b, "--into", "side", "--squash")
    assert "squashed into side" in squashed.stdout
    assert sh_git(repo, "show", "side:f.txt") == "from b\n"
    assert sh_git(repo, "rev-list", "--count", f"{head}..side").strip() == "1"
    assert not [n for n in worktrees_of(lab) if n.startswith(".merge")]
    assert sh_git(repo, "rev-parse", "HEAD").strip() == merged_head


def test_rm_refuses_uncommitted_force_removes_and_gc_cleans_up(make_lab) -> None:
    lab = make_lab()
    repo = make_repo(lab.work, {"f.txt": "base\n"})
    llm = lab.llm
    llm.add(fresh("MK-RW"), tool_call("bash", {"command": "echo wip > wip.txt"}))
    llm.add(fresh("MK-RC"), tool_call("bash", {"command": edit_and_commit("c", "c edit")}))
    llm.add(fresh("MK-RG"), text("nothing to do"))
    llm.add(fresh("MK-RN"), text("nothing either"))
    for marker in ("MK-RW", "MK-RC"):
        llm.add(after_tool(marker, "bash"), text("done"))

    committed = lab.cli("run", "--worktree", "MK-RC commit").stdout.strip()
    gone = lab.cli("run", "--worktree", "--branch", "feature/gone", "MK-RG x").stdout.strip()
    clean = lab.cli("run", "--worktree", "MK-RN y").stdout.strip()
    wip = lab.cli("run", "--worktree", "--name", "wip", "MK-RW write").stdout.strip()
    for job in (wip, committed, gone, clean):
        assert lab.wait(job) == "done"
    wip_path = Path(show(lab, wip)["worktree"]["path"])
    wip_branch = show(lab, wip)["worktree"]["branch"]
    assert (wip_path / "wip.txt").exists()

    refused = lab.cli("rm", wip, check=False)
    assert refused.returncode == 1
    assert "uncommitted changes (wip.txt)" in refused.stderr and "--force" in refused.stderr
    assert wip_path.is_dir() and show(lab, wip)["id"] == wip

    forced = lab.cli("rm", "--force", wip)
    assert f"removed worktree {wip_path}" in forced.stdout
    assert f"kept branch {wip_branch}" in forced.stdout
    assert not wip_path.exists()
    assert sh_git(repo, "branch", "--list", wip_branch).strip()
    assert str(wip_path) not in sh_git(repo, "worktree", "list")

    # --delete-branch: refused while the branch has unmerged commits, unless --force.
    c_branch = show(lab, committed)["worktree"]["branch"]
    unmerged = lab.cli("rm", "--delete-branch", committed, check=False)
    assert unmerged.returncode == 1 and "1 commits not merged into main" in unmerged.stderr
    assert show(lab, committed)["worktree"]["branch"] == c_branch
    lab.cli("rm", "--delete-branch", "--force", committed)
    assert not sh_git(repo, "branch", "--list", c_branch).strip()
    # A branch with nothing unmerged goes with --delete-branch alone.
    n_branch = show(lab, clean)["worktree"]["branch"]
    assert f"deleted branch {n_branch}" in lab.cli("rm", "--delete-branch", clean).stdout

    # gc: a job removed behind roostd's back leaves its worktree; gc removes it and
    # prunes git's records; a worktree directory deleted by hand leaves a stale record.
    lab.cli("daemon", "stop", "--jobs")
    import shutil

    shutil.rmtree(lab.job_dir(gone))
    assert gone in worktrees_of(lab)
    assert "feature/gone" in sh_git(repo, "worktree", "list")
    stale_merge = lab.roost_home / "worktrees" / ".merge-0badc0de"  # a killed merge's
    sh_git(repo, "worktree", "add", "--quiet", "--detach", str(stale_merge))
    out = lab.cli("gc").stdout
    assert f"removed {lab.roost_home / 'worktrees' / gone}" in out
    assert f"removed {stale_merge}" in out and not stale_merge.exists()
    assert gone not in worktrees_of(lab)
    assert "feature/gone" not in sh_git(repo, "worktree", "list")
    assert sh_git(repo, "branch", "--list", "feature/gone").strip()  # branches are kept
    assert sh_git(repo, "worktree", "list").count("\n") == 1  # only the main checkout


def test_clear_errors_and_nothing_made(make_lab, tmp_path: Path) -> None:
    lab = make_lab(agentMaxWorktrees=1)
    plain = lab.root / "plain"
    plain.mkdir()
    not_git = lab.cli("run", "--worktree", "--cwd", str(plain), "MK-NEVER", check=False)
    assert not_git.returncode != 0
    assert "not inside a git repository" in not_git.stderr
    assert lab.ls() == [] and worktrees_of(lab) == []

    repo = make_repo(lab.work, {"f.txt": "base\n"})
    for bad in ("a..b", "-rf", "x y", "@{-1}", "refs/../x", "a~1"):
        out = lab.cli("run", "--worktree", "--branch", bad, "MK-NEVER", check=False)
        assert out.returncode != 0 and "bad branch name" in out.stderr, (bad, out.stderr)
    out = lab.cli("run", "--worktree", "--base", "no-such-ref", "MK-NEVER", check=False)
    assert out.returncode != 0 and "bad base 'no-such-ref'" in out.stderr
    out = lab.cli("run", "--branch", "x", "MK-NEVER", check=False)
    assert out.returncode != 0 and "need --worktree" in out.stderr
    sh_git(repo, "branch", "taken")
    out = lab.cli("run", "--worktree", "--branch", "taken", "MK-NEVER", check=False)
    assert out.returncode != 0 and "branch 'taken' already exists" in out.stderr
    assert lab.ls() == [] and worktrees_of(lab) == []
    assert sh_git(repo, "branch", "--format=%(refname:short)").split() == ["main", "taken"]
    assert sh_git(repo, "worktree", "list").count("\n") == 1
    no_wt = lab.cli("diff", lab.run("MK-PLAIN x"), check=False)
    assert no_wt.returncode == 1 and "has no worktree" in no_wt.stderr

    # Spawns: the policy (never by default), a hostile branch, the per-tree limit.
    llm = lab.llm
    llm.add(
        fresh("MK-EP"),
        tool_calls(
            ("roost_spawn", {"task": "MK-EK1 kid", "worktree": True}),
            ("roost_spawn", {"task": "MK-EK2 kid", "worktree": True, "branch": "../../evil"}),
        ),
    )
    llm.add(after_tool("MK-EP", "roost_spawn"), text("tried"))
    llm.add(
        task("MK-EP") & new_user_has("AGAIN"),
        tool_calls(
            ("roost_spawn", {"task": "MK-EK3 kid", "worktree": True, "name": "first"}),
            ("roost_spawn", {"task": "MK-EK4 kid", "worktree": True}),
        ),
    )
    for marker in ("MK-EK1", "MK-EK2", "MK-EK3", "MK-EK4", "MK-PLAIN"):
        llm.add(fresh(marker), text("kid"))
    parent = lab.run("MK-EP parent")
    # "never" (the default): not offered; asked for anyway, refused by roostd.
    assert not {"worktree", "branch", "base"} & spawn_params(lab.wait_request(fresh("MK-EP")))
    first = lab.wait_tool_results("MK-EP", "roost_spawn", 2)
    assert first[0]["text"].startswith("error:") and "agentChildWorktrees" in first[0]["text"]
    assert first[1]["text"].startswith("error:"), first[1]
    assert worktrees_of(lab) == []
    lab.wait(parent)
    lab.configure(agentChildWorktrees="ask")
    lab.reply(parent, "AGAIN")
    results = lab.wait_tool_results("MK-EP", "roost_spawn", 4)
    assert results[2]["text"].startswith("spawned "), results[2]
    assert results[3]["text"].startswith("error:") and "agentMaxWorktrees is 1" in results[3]["text"]
    assert len(worktrees_of(lab)) == 1
    lab.configure(agentChildWorktrees="ask", agentMaxWorktrees=8)
    llm.add(
        task("MK-EP") & new_user_has("BAD-BRANCH"),
        tool_call("roost_spawn", {"task": "MK-EK2 kid", "worktree": True, "branch": "../../evil"}),
    )
    lab.wait(parent)
    lab.reply(parent, "BAD-BRANCH")
    bad = lab.wait_tool_results("MK-EP", "roost_spawn", 5)[4]["text"]
    assert bad.startswith("error:") and "bad branch name '../../evil'" in bad
    assert len(worktrees_of(lab)) == 1


def test_worktree_job_survives_roostd_restart_and_worker_kill(make_lab) -> None:
    lab = make_lab()
    make_repo(lab.work, {"f.txt": "base\n"})
    llm = lab.llm
    llm.add(fresh("MK-SV"), tool_call("bash", {"command": "pwd"}))
    llm.add(
        task("MK-SV") & new_user_has("AGAIN"),
        tool_call("bash", {"command": "pwd && echo again >> again.txt"}),
    )
    llm.add(after_tool("MK-SV", "bash"), text("here"))
    job = lab.cli("run", "--worktree", "MK-SV where").stdout.strip()
    assert lab.wait(job) == "done"
    wt = show(lab, job)["worktree"]
    assert lab.tool_results_of("MK-SV", "bash")[0]["text"].strip() == wt["path"]

    # roostd killed and started again: the record, and with it the worktree, is kept.
    pid = int((lab.roost_home / "roostd.pid").read_text())
    kill_and_wait(pid)
    lab.cli("daemon", "start")
    assert show(lab, job)["worktree"] == wt
    # queued: the adopted worker has not reconnected to the new roostd yet
    assert lab.reply(job, "AGAIN 1") in ("started", "delivered", "queued")
    results = lab.wait_tool_results("MK-SV", "bash", 2)
    assert results[1]["text"].splitlines()[0] == wt["path"]
    assert lab.wait(job) == "done"

    # Its worker SIGKILLed: restarted by roostd, still in the worktree.
    worker = lab.record(job)["process"]["workerPid"]
    os.kill(worker, signal.SIGKILL)
    wait_until(
        lambda: (
            (p := lab.record(job).get("process", {}).get("workerPid"))
            and p != worker
            and lab.record(job).get("state") in ("done", "starting", "running")
        ),
        T,
        "a new worker",
    )
    assert lab.reply(job, "AGAIN 2") in ("started", "delivered", "queued")
    results = lab.wait_tool_results("MK-SV", "bash", 3)
    assert results[2]["text"].splitlines()[0] == wt["path"]
    assert lab.wait(job) == "done"
    assert (Path(wt["path"]) / "again.txt").read_text() == "again\nagain\n"
    assert show(lab, job)["worktree"] == wt


def test_tools_wait_for_the_worktree_to_be_written(make_lab) -> None:
    """The worktree's files are written while pi boots and the model answers: the first
    model request does not wait for them, the first tool call does (a git shim holds the
    worker's `checkout-index -a` until the test opens a gate)."""
    import shutil

    lab = make_lab()
    (lab.work / "data").mkdir()
    make_repo(lab.work, {f"data/f{i:04d}.txt": f"{i}\n" for i in range(300)})
    gate = lab.root / "checkout-gate"
    shim = lab.root / "shim"
    shim.mkdir()
    real_git = shutil.which("git")
    (shim / "git").write_text(
        "#!/bin/sh\n"
        'case " $* " in *" checkout-index -a "*)\n'
        f"  for i in $(seq 1 600); do [ -e '{gate}' ] && break; sleep 0.05; done;;\n"
        "esac\n"
        f'exec {real_git} "$@"\n'
    )
    (shim / "git").chmod(0o755)
    lab.env["PATH"] = f"{shim}:{lab.env['PATH']}"
    llm = lab.llm
    llm.add(
        fresh("MK-BIG"), tool_call("bash", {"command": "git status --porcelain | wc -l; ls data | wc -l"})
    )
    llm.add(after_tool("MK-BIG", "bash"), text("counted"))
    job = lab.cli("run", "--worktree", "MK-BIG count").stdout.strip()
    lab.wait_request(fresh("MK-BIG"))  # the model was asked before the files were there
    marker = lab.job_dir(job) / "checkout.pending"
    assert marker.exists()
    wt = Path(show(lab, job)["worktree"]["path"])
    assert not (wt / "data" / "f0100.txt").exists()
    import time

    time.sleep(1.0)  # the tool call is held meanwhile (nothing to wait for: it must not run)
    assert not lab.tool_results_of("MK-BIG", "bash")
    assert show(lab, job)["state"] == "running"
    gate.touch()
    assert lab.wait(job) == "done"
    counts = lab.tool_results_of("MK-BIG", "bash")[0]["text"].split()
    assert counts == ["0", "300"], counts
    assert not marker.exists()
    # A run that uses no tool ends (and reports) only once the files are all there.
    llm.add(task("MK-BIG") & new_user_has("QUIET"), text("nothing to run"))
    lab.reply(job, "QUIET")
    assert lab.wait(job) == "done"
