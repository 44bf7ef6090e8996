"""End-to-end: a job's real pi keeps its code caches out of the temp folder every user
shares (roost/pi/preload.mjs; docs/security.md, door 1).

Here TMPDIR is a shared, sticky folder of the lab's, as /tmp is, where `jiti` (the folder of
jiti's cache, through which pi loads roost's extension) was made writable by all before the
job ran, as another user could. pi 1.x turns node's compile cache on itself and, left alone,
writes it to $TMPDIR/node-compile-cache; with roost it goes to the user's cache folder. On a
node without a compile cache (the old line on node 20) no cache folder is made.
"""

from __future__ import annotations

from collections.abc import Callable

from kit.lab import Lab
from kit.matchers import fresh
from kit.testpi import node_has_compile_cache

from roost.fakellm import FakeLLM, text
from roost.pi.locate import find_pi


def test_a_jobs_pi_keeps_its_code_caches_out_of_the_shared_temp_folder(
    make_lab: Callable[..., Lab], llm: FakeLLM
) -> None:
    install = find_pi()
    assert install.node is not None, f"pi is not started through a known package here: {install!r}"
    lab = make_lab(llm=llm)
    shared_tmp = lab.root / "tmp"
    shared_tmp.mkdir(mode=0o1777)
    shared_tmp.chmod(0o1777)
    planted = shared_tmp / "jiti"
    planted.mkdir()
    planted.chmod(0o777)
    cache_home = lab.root / "cache"
    lab.env.update(TMPDIR=str(shared_tmp), XDG_CACHE_HOME=str(cache_home))
    llm.add(fresh("CC-TASK"), text("CC-ANSWER"))
    job = lab.run_job("CC-TASK please")
    assert lab.wait(job, timeout=120) == "done"
    lab.cli("stop", job)  # node writes the cache as pi exits
    lab.wait_state(job, "stopped", timeout=60)

    assert sorted(p.name for p in shared_tmp.iterdir()) == ["jiti"]
    assert list(planted.iterdir()) == []  # jiti compiled roost's extension without caching it there
    cache = cache_home / "roost" / "node-compile-cache"
    if node_has_compile_cache(install.node):
        assert (cache_home / "roost").stat().st_mode & 0o777 == 0o700
        cached = [f for f in cache.rglob("*") if f.is_file()]
        assert cached, f"nothing cached in {cache}"
    else:
        assert not cache_home.exists()
