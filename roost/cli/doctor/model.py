"""Does pi know the model roost would use, and has it credentials for it? (`roost doctor`,
`roost agents check`).

pi itself answers, without a network call: `pi --mode rpc --no-session --offline
--no-extensions [--model P/ID]` is asked `get_state` (the model pi resolved: its default from
settings.json, or the one given) and `get_available_models` (the models pi has credentials
for: its auth.json, the provider's API key variable, or an apiKey in models.json). A model
pi does not know makes it exit at start-up with `Error: Model "…" not found`. So the check
follows pi's own rules on both pi lines, whatever they become.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from roost.cli.doctor.pirpc import JOB_VARIABLES
from roost.host import paths
from roost.pi import agentfiles, problems

PROBE_TIMEOUT = 20.0


class Probe:
    __slots__ = ("argv", "model", "available", "stderr", "failure")

    def __init__(self, argv: list[str]) -> None:
        self.argv = argv
        self.model: dict[str, Any] | None = None  # get_state's model
        self.available: set[tuple[str, str]] = set()  # (provider, id) pi has credentials for
        self.stderr: list[str] = []
        self.failure: str | None = None  # pi did not answer: why


def probe(
    pi_argv: list[str], model: str | None, cwd: str | None = None, timeout: float = PROBE_TIMEOUT
) -> Probe:
    """Ask pi which model it would use (`model`: the `--model` given, or pi's default)."""
    from roost.cli.doctor.pirpc import LoadOutcome, answers

    argv = [*pi_argv, "--mode", "rpc", "--no-session", "--offline", "--no-extensions"]
    if model:
        argv += ["--model", model]
    result = Probe(argv)
    env = {k: v for k, v in os.environ.items() if k not in JOB_VARIABLES}
    env.setdefault("PI_SKIP_VERSION_CHECK", "1")
    requests = [{"id": "m-state", "type": "get_state"}, {"id": "m-models", "type": "get_available_models"}]
    deadline = time.monotonic() + timeout
    with tempfile.TemporaryFile() as errors:
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=errors,
                env=env,
                cwd=cwd or os.getcwd(),
                start_new_session=True,
            )
        except OSError as exc:
            result.failure = f"pi did not start: {exc}"
            return result
        assert proc.stdin is not None and proc.stdout is not None
        with contextlib.suppress(OSError):
            proc.stdin.write("".join(json.dumps(r) + "\n" for r in requests).encode())
            proc.stdin.flush()
        answered = answers(proc.stdout, len(requests), deadline, LoadOutcome(argv))
        with contextlib.suppress(OSError):
            proc.stdin.close()
        try:
            code: int | None = proc.wait(5)
        except subprocess.TimeoutExpired:
            code = None
            proc.kill()
            proc.wait()
        proc.stdout.close()
        errors.seek(0)
        result.stderr = errors.read().decode(errors="replace").splitlines()
    state, models = answered.get("m-state"), answered.get("m-models")
    if state is None or models is None or not state.get("success"):
        result.failure = (
            f"pi exited ({code}) before answering"
            if code is not None
            else f"pi did not answer within {timeout:.0f} s"
        )
        return result
    result.model = (state.get("data") or {}).get("model") or {}
    for entry in (models.get("data") or {}).get("models") or []:
        if isinstance(entry, dict):
            result.available.add((str(entry.get("provider")), str(entry.get("id"))))
    return result


def settings_default(cwd: str | None = None) -> str | None:
    """pi's default `provider/id` (or provider) from its settings: the agent dir's
    settings.json, under the project's `.pi/settings.json`."""
    from roost.host import trusted as trust

    found: dict[str, Any] = {}
    for path, follow in (
        (paths.agent_dir() / "settings.json", True),
        (Path(cwd or os.getcwd()) / ".pi" / "settings.json", False),
    ):
        with contextlib.suppress(OSError, ValueError):  # another user's file: not read
            data = json.loads(trust.read_text(path, follow=follow))
            if isinstance(data, dict):
                found.update({k: data[k] for k in ("defaultProvider", "defaultModel") if k in data})
    provider, model = found.get("defaultProvider"), found.get("defaultModel")
    if isinstance(provider, str) and provider:
        return f"{provider}/{model}" if isinstance(model, str) and model else provider
    return None


def verdict(
    result: Probe, model: str | None, source: str, default: str | None = None
) -> tuple[str, str, str | None]:
    """(level, detail, fix) for a probe of `model` (None: pi's default; `default` is what
    pi's settings name)."""
    if result.failure is not None:
        problem = problems.from_startup(result.stderr, None)
        if problem is not None:
            return "fail", f"{model or 'default'} ({source}): {problem.message}", problem.fix
        return (
            "fail",
            f"{model or 'default'} ({source}): {result.failure}",
            (f"see why: {' '.join(result.argv)}"),
        )
    found = result.model or {}
    provider, ident = str(found.get("provider") or ""), str(found.get("id") or "")
    broken = agentfiles.models_json_error()
    if broken:
        return "fail", f"pi could not read models.json: {broken}", problems.no_model(None, broken)
    if provider in ("", "unknown"):
        meant = problems.provider_of(model) or problems.provider_of(default) or default
        detail = (
            f"{model or default} ({source}): pi has no credentials for it"
            if meant
            else "none: pi has no model it can use"
        )
        return "fail", detail, problems.no_key(meant, None) if meant else problems.no_model(None)
    name = f"{provider}/{ident}"
    if (provider, ident) in result.available:
        return "ok", f"{name} ({source}; pi has credentials for it)", None
    if any(p == provider for p, _ in result.available):
        return (
            "warn",
            (
                f"{name} ({source}): pi has credentials for provider {provider!r} but "
                "does not list this model (it sends the id as given)"
            ),
            (f"check the id: pi --list-models {provider}"),
        )
    return (
        "fail",
        f"{name} ({source}): no credentials for provider {provider!r}",
        problems.no_key(provider, None),
    )


def check(
    pi_argv: list[str], model: str | None, source: str, cwd: str | None = None
) -> tuple[str, str, str | None]:
    default = None if model else settings_default(cwd)
    if not model and default:
        source = "pi's default (settings.json)"
    return verdict(probe(pi_argv, model, cwd), model, source, default)


def unknown(pi_argv: list[str], model: str) -> str | None:
    """pi's words when it does not know `model` (None: it does)."""
    result = probe(pi_argv, model)
    if result.failure is None:
        return None
    problem = problems.from_startup(result.stderr, None)
    return problem.message if problem is not None else None


def definition_problems(agents: dict[str, Any]) -> list[str]:
    """`roost agents check`: each definition whose model pi does not know (one pi start per
    distinct model), as `path: model "P/ID": pi's words`; nothing when pi is not found."""
    from roost.pi.locate import PiNotFound, find_pi

    models = sorted({d.model for d in agents.values() if d.model})
    if not models:
        return []
    try:
        argv = find_pi().argv
    except PiNotFound:
        return []
    said = {model: unknown(argv, model) for model in models}
    return [
        f"{d.path or d.name}: model {d.model!r}: {said[d.model]} ({problems.unknown_model(d.model, None)})"
        for d in agents.values()
        if d.model and said.get(d.model)
    ]
