"""A throwaway roost and pi pointed at the scripted model: the `Sandbox`.

`roost demo` runs in one, the tests' `Lab` (tests/kit/lab.py) is one with the test
harness around it, and it is how to try an agent definition or a hook without a provider's
key. A sandbox is a short temp root (Unix socket paths are limited to 107 bytes, and a
job's `ext.sock` lives in ROOST_HOME/jobs/<id>/) holding

    rh/             ROOST_HOME (not created: roostd makes it)
    home/           HOME
    home/.pi/agent  PI_CODING_AGENT_DIR: models.json and settings.json naming the scripted
                    model (`make_agent_dir`), roost.json from `settings`
    work/           the cwd of its jobs

and the environment its roostd, workers and pi get (`pi_env`): nothing of the caller's roost
or pi (no `ROOST_*`, `PI_*`, `*_API_KEY`, `XDG_STATE_HOME`) but the choice of pi
(`ROOST_PI`, `ROOST_PI_PREFIX`, `ROOST_NODE`), offline; node's compile cache stays the
caller's (`XDG_CACHE_HOME`), so a sandbox's pi does not start cold.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import psutil

from roost.fakellm.server import FakeLLM

FAKE_PROVIDER = "fake"
FAKE_MODEL = "fake-model"

# Settings that make a pi deterministic: the scripted model is the default, the OpenAI SDK
# does not retry errors silently (each scripted error reaches pi's visible auto-retry once),
# and auto-retry back-off is short.
DEFAULT_PI_SETTINGS: dict[str, Any] = {
    "defaultProvider": FAKE_PROVIDER,
    "defaultModel": FAKE_MODEL,
    "defaultThinkingLevel": "off",
    "quietStartup": True,
    "enableInstallTelemetry": False,
    "retry": {"enabled": True, "maxRetries": 3, "baseDelayMs": 200, "provider": {"maxRetries": 0}},
}

KEEP_ROOST_VARS = frozenset({"ROOST_PI", "ROOST_PI_PREFIX", "ROOST_NODE"})
"""The caller's variables a sandbox keeps: they choose the pi program, nothing else."""


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


def make_agent_dir(
    root: Path,
    llm_base_url: str,
    *,
    settings: Mapping[str, Any] | None = None,
    context_window: int | None = None,
    max_tokens: int | None = None,
    cost: Mapping[str, float] | None = None,
) -> Path:
    """Write `<root>/models.json` (provider "fake" at `llm_base_url`) and `settings.json`.

    `settings` is merged over DEFAULT_PI_SETTINGS; `context_window` (pi's default for a
    custom model is 128000) makes compaction reachable. Returns `root`.
    """
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    model: dict[str, Any] = {"id": FAKE_MODEL}
    if context_window is not None:
        model["contextWindow"] = context_window
    if max_tokens is not None:
        model["maxTokens"] = max_tokens
    if cost is not None:  # prices per million tokens: {input, output, cacheRead, cacheWrite}
        model["cost"] = {
            key: float(cost.get(key, 0.0)) for key in ("input", "output", "cacheRead", "cacheWrite")
        }
    models = {
        "providers": {
            FAKE_PROVIDER: {
                "baseUrl": llm_base_url,
                "api": "openai-completions",
                "apiKey": "dummy-key",
                "models": [model],
            }
        }
    }
    (root / "models.json").write_text(json.dumps(models, indent=2) + "\n", encoding="utf-8")
    merged = _merge(DEFAULT_PI_SETTINGS, settings or {})
    (root / "settings.json").write_text(json.dumps(merged, indent=2) + "\n", encoding="utf-8")
    return root


def _cache_home(env: Mapping[str, str]) -> str:
    """The caller's XDG cache folder: `XDG_CACHE_HOME` when absolute, else ~/.cache."""
    explicit = env.get("XDG_CACHE_HOME", "")
    if os.path.isabs(explicit):
        return explicit
    return os.path.join(env.get("HOME") or os.path.expanduser("~"), ".cache")


def pi_env(
    agent_dir: Path,
    home: Path,
    *,
    extra: Mapping[str, str] | None = None,
    base: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Environment for an isolated pi: HOME and PI_CODING_AGENT_DIR in temp dirs, offline.

    Starts from `base` (default os.environ) so PATH and node still resolve, but drops every
    `*_API_KEY`, `PI_*` and `ROOST_*` variable so nothing of the real user leaks in, except
    `ROOST_PI` and `ROOST_PI_PREFIX`, which only choose the pi program.
    """
    src = dict(os.environ if base is None else base)
    env = {
        k: v
        for k, v in src.items()
        if k in KEEP_ROOST_VARS
        or not (k.endswith("_API_KEY") or k.startswith("PI_") or k.startswith("ROOST_"))
    }
    env.update(
        {
            "HOME": str(home),
            "PI_CODING_AGENT_DIR": str(agent_dir),
            "PI_OFFLINE": "1",
            "PI_SKIP_VERSION_CHECK": "1",
            "NO_COLOR": "1",
        }
    )
    # node's compile cache (roost/pi/preload.mjs: ${XDG_CACHE_HOME:-~/.cache}/roost) is
    # the caller's, not the temp HOME's: a folder of its own would start every pi cold.
    env["XDG_CACHE_HOME"] = _cache_home(src)
    if extra:
        env.update(extra)
    return env


def processes_of(root: Path) -> list[psutil.Process]:
    """Every process but this one whose environment or command line names `root` (or a path
    under it): roostd, workers and pi get ROOST_HOME, HOME and the agent dir under it in
    their environment, and a process started with a cleaned environment (a hook, a tool's
    child) still names the root in its arguments as a rule."""
    marker, under = str(root), str(root) + os.sep
    me = os.getpid()

    def names(value: str) -> bool:
        return value == marker or under in value

    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        if proc.pid == me:
            continue
        with contextlib.suppress(psutil.Error):
            if any(names(part) for part in proc.info["cmdline"] or ()) or any(
                names(value) for value in proc.environ().values()
            ):
                found.append(proc)
    return found


def kill_processes(procs: Iterable[psutil.Process]) -> list[int]:
    """SIGKILL each and wait (5 s at most) until they are gone; their pids."""
    procs = list(procs)
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.send_signal(signal.SIGKILL)
    psutil.wait_procs(procs, timeout=5)
    return [proc.pid for proc in procs]


class Sandbox:
    """A roost (+ pi, + the scripted model) under a temp root; see the module doc.

    `llm`: a FakeLLM to use (the caller starts and stops it), True for the sandbox's own
    (started now, stopped by `close()`), False for none. With a model, the agent dir's
    models.json points pi at it (`pi_settings`, `context_window` and the model's `prices`,
    per million tokens, go to make_agent_dir). `settings`: the user-level roost.json.
    `env`: extra variables. `keep`: `close()` leaves the root (and prints where). `tmp`:
    where the root is made (short: Unix socket paths are limited).
    """

    def __init__(
        self,
        *,
        llm: FakeLLM | bool = False,
        settings: Mapping[str, Any] | None = None,
        pi_settings: Mapping[str, Any] | None = None,
        context_window: int | None = None,
        prices: Mapping[str, float] | None = None,
        env: Mapping[str, str] | None = None,
        keep: bool = False,
        prefix: str = "roost-",
        hold_timeout: float = 120.0,
        tmp: str | Path = "/tmp",
    ) -> None:
        self.root = Path(tempfile.mkdtemp(prefix=prefix, dir=tmp))
        self.keep = keep
        self.roost_home = self.root / "rh"
        self.home = self.root / "home"
        self.agent_dir = self.home / ".pi" / "agent"
        self.work = self.root / "work"
        for directory in (self.home, self.agent_dir, self.work):
            directory.mkdir(parents=True, exist_ok=True)
        self._own_llm = llm is True
        self._llm = (
            FakeLLM(hold_timeout=hold_timeout).start()
            if llm is True
            else llm
            if isinstance(llm, FakeLLM)
            else None
        )
        if self._llm is not None:
            make_agent_dir(
                self.agent_dir,
                self._llm.base_url,
                settings=pi_settings,
                context_window=context_window,
                cost=prices,
            )
        if settings:
            self.configure(**settings)
        self.env: dict[str, str] = pi_env(
            self.agent_dir,
            self.home,
            extra={
                "ROOST_HOME": str(self.roost_home),
                "ROOST_LOG_LEVEL": "INFO",
                "PYTHONUNBUFFERED": "1",
            },
        )
        self.env.pop("XDG_STATE_HOME", None)
        self.env.update(env or {})

    @property
    def llm(self) -> FakeLLM:
        """The sandbox's scripted model (one made with `llm=False` has none)."""
        if self._llm is None:
            raise AttributeError("this sandbox has no model: make it with llm=True or llm=FakeLLM()")
        return self._llm

    def configure(self, **settings: Any) -> None:
        """Merge `settings` into the user-level `<agent dir>/roost.json` (a new mtime)."""
        path = self.agent_dir / "roost.json"
        data = json.loads(path.read_text()) if path.exists() else {}
        data.update(settings)
        before = path.stat().st_mtime_ns if path.exists() else None
        path.write_text(json.dumps(data))
        if before is not None and path.stat().st_mtime_ns == before:  # coarse clock: bump
            os.utime(path, ns=(before + 1_000_000, before + 1_000_000))

    def activate(self) -> None:
        """Make this process use the sandbox too (roost.wire.client, roost.host.paths): its
        environment's roost and pi variables replaced by the sandbox's."""
        for key in [k for k in os.environ if k.startswith(("PI_", "ROOST_"))]:
            del os.environ[key]
        os.environ.update(self.env)

    def processes(self) -> list[psutil.Process]:
        """Every live process of this sandbox (see `processes_of`)."""
        return processes_of(self.root)

    def shutdown(self) -> None:
        """Stop its roostd with its jobs, if one ever ran here (`roost daemon stop --jobs`)."""
        if self.roost_home.exists():
            with contextlib.suppress(Exception):
                subprocess.run(
                    [sys.executable, "-m", "roost.cli", "daemon", "stop", "--jobs"],
                    env=self.env,
                    cwd=self.work,
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    timeout=40,
                )

    def stop(self) -> None:
        """`shutdown()`, then kill every process of the sandbox that is left."""
        self.shutdown()
        kill_processes(self.processes())

    def close(self) -> None:
        """`stop()`, stop the sandbox's own model, and remove the root (unless `keep`)."""
        self.stop()
        if self._own_llm and self._llm is not None:
            self._llm.stop()
        if self.keep:
            print(f"sandbox: kept {self.root} (ROOST_HOME={self.roost_home})", file=sys.stderr)
        else:
            shutil.rmtree(self.root, ignore_errors=True)
