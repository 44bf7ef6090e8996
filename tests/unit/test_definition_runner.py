"""A definition's `runner` (roost.definitions.rules; supervise/placement.py): local or ray,
anything else an error at its line, kept in the job's record, refused in a project agent; and
roost.json's `runner` checked (roost.config)."""

from __future__ import annotations

from roost.definitions.rules import Definition, parse, project_violations


def test_runner_is_local_or_ray() -> None:
    defn, errors = parse('runner = "ray"\n', "far", "user", "/a/far.toml")
    assert not errors and defn is not None and defn.runner == "ray"
    assert Definition.from_json(defn.to_json()).runner == "ray"  # as a job's record keeps it
    assert defn.body() == {"runner": "ray"}
    bad, errors = parse('runner = "slurm"\n', "far", "user", "/a/far.toml")
    assert bad is None and "/a/far.toml:1:" in str(errors[0]) and "local, ray" in str(errors[0])


def test_a_project_agent_may_not_choose_where_it_runs() -> None:
    defn, _ = parse('runner = "ray"\n', "far", "project", "/repo/.pi/roost/agents/far.toml")
    assert defn is not None
    assert any("may not set runner" in problem for problem in project_violations(defn))


def test_roost_jsons_runner_keeps_its_known_fields_and_worktrees_shared_or_node() -> None:
    from roost.config import _runner

    kept = _runner({"kind": "ray", "worktrees": "node", "gitRemote": "up", "numCpus": 1, "color": "red"})
    assert kept == {"kind": "ray", "worktrees": "node", "gitRemote": "up", "numCpus": 1}
    assert "worktrees" not in (_runner({"kind": "ray", "worktrees": "nfs"}) or {})
    assert _runner({"kind": "slurm"}) is None
