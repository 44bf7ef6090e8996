"""pi's code caches for the pis roost starts (roost/pi/preload.mjs, preloaded by
roost.pi.locate): node's compile cache in a folder of the user's, never the temp folder
every user shares, and jiti's cache (through which pi loads extensions) turned off when its
folder there is not the user's alone.

Each test runs node as roost runs pi, `NODE --import PRELOAD SCRIPT`, where SCRIPT does what
pi 1.x's cli.js does first (`enableCompileCache()`) and then loads a module, and says where
the cache went and what a child process (an agent's tool) sees.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from kit import intruder
from kit.testpi import node_has_compile_cache

from roost.pi import locate

PI_LIKE = """
import { enableCompileCache, getCompileCacheDir } from "node:module";
import { execFileSync } from "node:child_process";
const pis = enableCompileCache();  // what pi 1.x's cli.js does first
await import("./loaded.mjs");
console.log(JSON.stringify({
  status: pis.status,
  directory: getCompileCacheDir() ?? null,
  childEnv: execFileSync("env", { encoding: "utf8" })
    .split("\\n")
    .filter((l) => /COMPILE_CACHE|JITI/.test(l)),
}));
"""


def _nodes() -> tuple[str | None, str | None]:
    """A node with a compile cache (22.1 and later) and one without, of the two here: the
    one that runs pi and the one on PATH (CI: 22 from the pi prefix, and Debian's 20)."""
    with_cache = without = None
    for node in (locate.node_binary(), shutil.which("node")):
        if node is None:
            continue
        if node_has_compile_cache(node):
            with_cache = with_cache or node
        else:
            without = without or node
    return with_cache, without


NODE, OLD_NODE = _nodes()
CACHE_VARS = re.compile(r"COMPILE_CACHE|JITI|XDG_CACHE_HOME")
needs_cache = pytest.mark.skipif(NODE is None, reason="no node here has a compile cache (22.1 and later)")


def run_as_pi(node: str | None, tmp_path: Path, source: str, **env: str) -> object:
    """Run `source` (an ES module) as roost starts pi, with HOME and TMPDIR (the shared one)
    in `tmp_path` and none of the caller's cache settings; what it printed, as JSON."""
    assert node is not None
    script = tmp_path / "script.mjs"
    script.write_text(source)
    (tmp_path / "loaded.mjs").write_text("export const answer = 42;\n")
    (tmp_path / "tmp").mkdir(exist_ok=True)
    base = {k: v for k, v in os.environ.items() if not CACHE_VARS.search(k)}
    proc = subprocess.run(
        [node, "--import", locate.PRELOAD, str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**base, "HOME": str(tmp_path / "home"), "TMPDIR": str(tmp_path / "tmp"), **env},
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def run_pi_like(tmp_path: Path, **env: str) -> dict[str, object]:
    """What pi 1.x does first, run as roost starts pi on a node with a compile cache."""
    seen = run_as_pi(NODE, tmp_path, PI_LIKE, **env)
    assert isinstance(seen, dict)
    return seen


def test_pi_is_started_with_the_preload(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ROOST_PI", raising=False)  # the project's pinned pi, a known package
    install = locate.find_pi()
    assert install.argv[1:3] == ["--import", locate.PRELOAD]
    assert Path(locate.PRELOAD).is_file()


@needs_cache
def test_the_cache_is_in_the_users_cache_folder_and_nowhere_else(tmp_path: Path) -> None:
    seen = run_pi_like(tmp_path)
    folder = tmp_path / "home" / ".cache" / "roost"
    assert seen["status"] == 2  # pi's own call finds it on (ALREADY_ENABLED) and keeps it
    assert str(seen["directory"]).startswith(str(folder / "node-compile-cache") + os.sep)
    assert list(Path(str(seen["directory"])).iterdir())  # the module's code, cached
    assert os.stat(folder).st_mode & 0o777 == 0o700
    assert [p.name for p in (tmp_path / "tmp").iterdir()] == ["jiti"]  # jiti's: below
    assert seen["childEnv"] == []  # the agent's tools run as without roost


@needs_cache
def test_xdg_cache_home_is_followed(tmp_path: Path) -> None:
    seen = run_pi_like(tmp_path, XDG_CACHE_HOME=str(tmp_path / "xdg"))
    assert str(seen["directory"]).startswith(str(tmp_path / "xdg" / "roost" / "node-compile-cache"))
    assert seen["childEnv"] == []


@needs_cache
def test_a_folder_others_may_write_is_made_private(tmp_path: Path) -> None:
    folder = tmp_path / "xdg" / "roost"
    folder.mkdir(parents=True)
    folder.chmod(0o777)
    seen = run_pi_like(tmp_path, XDG_CACHE_HOME=str(tmp_path / "xdg"))
    assert str(seen["directory"]).startswith(str(folder))
    assert os.stat(folder).st_mode & 0o777 == 0o700


@needs_cache
def test_a_symlinked_folder_is_not_followed(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "xdg").mkdir()
    (tmp_path / "xdg" / "roost").symlink_to(elsewhere)
    seen = run_pi_like(tmp_path, XDG_CACHE_HOME=str(tmp_path / "xdg"))
    assert list(elsewhere.iterdir()) == []
    assert not str(seen["directory"]).startswith(str(tmp_path / "xdg"))  # pi's own default


@needs_cache
@pytest.mark.skipif(intruder.skip_reason() is not None, reason=str(intruder.skip_reason()))
def test_a_folder_of_another_user_is_not_used(tmp_path: Path) -> None:
    uid, gid = intruder.ids()
    folder = tmp_path / "xdg" / "roost"
    folder.mkdir(parents=True, mode=0o755)
    os.chown(folder, uid, gid)
    seen = run_pi_like(tmp_path, XDG_CACHE_HOME=str(tmp_path / "xdg"))
    assert list(folder.iterdir()) == []
    assert not str(seen["directory"]).startswith(str(folder))


@needs_cache
def test_the_persons_own_choice_stands(tmp_path: Path) -> None:
    chosen = tmp_path / "chosen"
    seen = run_pi_like(tmp_path, NODE_COMPILE_CACHE=str(chosen))
    assert str(seen["directory"]).startswith(str(chosen))
    assert not (tmp_path / "home" / ".cache").exists()
    off = run_pi_like(tmp_path, NODE_DISABLE_COMPILE_CACHE="1")
    assert off["directory"] is None


@pytest.mark.skipif(OLD_NODE is None, reason="every node here has a compile cache")
def test_a_node_without_a_compile_cache_runs_pi_as_before(tmp_path: Path) -> None:
    assert OLD_NODE is not None
    script = tmp_path / "plain.mjs"
    script.write_text('console.log("ran");\n')
    proc = subprocess.run(
        [OLD_NODE, "--import", locate.PRELOAD, str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "HOME": str(tmp_path / "home")},
    )
    assert proc.stdout == "ran\n", proc.stderr
    assert not (tmp_path / "home").exists()


# -- jiti's cache folder ----------------------------------------------------------------------
ENV_OF_A_TOOL = """
import { execFileSync } from "node:child_process";
const env = execFileSync("env", { encoding: "utf8" }).split("\\n");
console.log(JSON.stringify(env.filter((l) => /^JITI/.test(l))));
"""


def jiti_vars_of_a_tool(tmp_path: Path, **env: str) -> list[str]:
    """What an agent's tool started by this pi sees of jiti's switches (any node)."""
    found = run_as_pi(NODE or OLD_NODE, tmp_path, ENV_OF_A_TOOL, **env)
    assert isinstance(found, list)
    return found


def test_jitis_folder_is_made_the_users_when_nobody_has(tmp_path: Path) -> None:
    assert jiti_vars_of_a_tool(tmp_path) == []  # jiti caches as it would without roost
    folder = os.stat(tmp_path / "tmp" / "jiti")
    assert folder.st_uid == os.getuid() and folder.st_mode & 0o777 == 0o755


def test_a_jiti_folder_others_may_write_turns_jitis_cache_off(tmp_path: Path) -> None:
    (tmp_path / "tmp" / "jiti").mkdir(parents=True)
    (tmp_path / "tmp" / "jiti").chmod(0o777)
    assert jiti_vars_of_a_tool(tmp_path) == ["JITI_FS_CACHE=false"]


def test_a_jiti_symlink_turns_jitis_cache_off(tmp_path: Path) -> None:
    (tmp_path / "mine").mkdir()
    (tmp_path / "tmp").mkdir()
    (tmp_path / "tmp" / "jiti").symlink_to(tmp_path / "mine")
    assert jiti_vars_of_a_tool(tmp_path) == ["JITI_FS_CACHE=false"]


@pytest.mark.skipif(intruder.skip_reason() is not None, reason=str(intruder.skip_reason()))
def test_another_users_jiti_folder_turns_jitis_cache_off(tmp_path: Path) -> None:
    uid, gid = intruder.ids()
    (tmp_path / "tmp" / "jiti").mkdir(parents=True, mode=0o755)
    os.chown(tmp_path / "tmp" / "jiti", uid, gid)
    assert jiti_vars_of_a_tool(tmp_path) == ["JITI_FS_CACHE=false"]


def test_the_persons_jiti_switch_stands(tmp_path: Path) -> None:
    (tmp_path / "tmp" / "jiti").mkdir(parents=True)
    (tmp_path / "tmp" / "jiti").chmod(0o777)
    assert jiti_vars_of_a_tool(tmp_path, JITI_FS_CACHE="true") == ["JITI_FS_CACHE=true"]
