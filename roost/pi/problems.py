"""pi's errors, classified: what a person must fix (configuration) or what may pass by itself.

Pure rules, no I/O: the worker hands in pi's words (a prompt's error response, the stderr
lines of a pi that exited at start-up, a run's final `errorMessage`) and what it read of the
agent dir; it gets back a `Problem` with pi's message on one line and ONE fix line.

A *configuration* problem (no API key, unknown model or provider, an extension that does not
load) cannot pass by restarting pi: the job fails at once, without restart backoff, and the
item that started the run stays in the mailbox for `roost start` after the fix. A *model*
problem is an error a run ended with (authentication refused, quota, a provider's 4xx/5xx
after pi's own retries): the run is over and its pi still runs, so a reply continues it.

The texts matched here were read from pi 0.73.1 and 1.6.0 in RPC mode (docs/pi-notes.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

MESSAGE_MAX = 300


class Kind(str, Enum):
    CONFIGURATION = "configuration"  # fail now, keep the item; `roost start` after the fix
    MODEL = "model"  # the run ended with the provider's error; a reply continues


@dataclass(frozen=True)
class Problem:
    kind: Kind
    message: str  # pi's own words, one line
    fix: str  # one line: what to do, ending with what to run then

    def text(self) -> str:
        """The row's `error`: pi's words, then the fix."""
        return f"pi: {self.message} — fix: {self.fix}"


# The API key variables pi reads for the providers people use most (pi's env-api-keys).
KEY_VARIABLES: dict[str, str] = {
    "anthropic": "ANTHROPIC_API_KEY",
    "openai": "OPENAI_API_KEY",
    "google": "GEMINI_API_KEY",
    "groq": "GROQ_API_KEY",
    "mistral": "MISTRAL_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
    "xai": "XAI_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "cerebras": "CEREBRAS_API_KEY",
    "zai": "ZAI_API_KEY",
    "github-copilot": "COPILOT_GITHUB_TOKEN",
    "huggingface": "HF_TOKEN",
    "fireworks": "FIREWORKS_API_KEY",
    "together": "TOGETHER_API_KEY",
    "azure": "AZURE_OPENAI_API_KEY",
    "vercel-ai-gateway": "AI_GATEWAY_API_KEY",
    "moonshotai": "MOONSHOT_API_KEY",
    "minimax": "MINIMAX_API_KEY",
}

_NO_KEY_FOR = re.compile(r"No API key found for (?!the selected model)(\S+)$")
_NO_KEY_SELECTED = "No API key found for the selected model"
_MODEL_NOT_FOUND = re.compile(r'Model "([^"]*)" not found')
_UNKNOWN_PROVIDER = re.compile(r'Unknown provider "([^"]*)"')
_EXTENSION = re.compile(r'Failed to load extension "([^"]*)"')
_HTTP = re.compile(r"^(\d{3})\b[: ]*(.*)$", re.S)
_JSON_MESSAGE = re.compile(r'"message"\s*:\s*"((?:[^"\\]|\\.)*)"')


def one_line(text: str, limit: int = MESSAGE_MAX) -> str:
    """The first paragraph of pi's text on one line (its doc links are left out)."""
    first = text.strip().split("\n\n", 1)[0]
    line = " ".join(first.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def key_advice(provider: str) -> str:
    """How to give pi credentials for `provider`."""
    variable = KEY_VARIABLES.get(provider)
    if variable:
        return f"run pi once and /login, or set {variable}"
    return f'run pi once and /login, or give provider "{provider}" an apiKey in models.json'


def then_start(job: str | None) -> str:
    """What to run after the fix (nothing for `roost doctor`, which has no job)."""
    return f" (then: roost start {job})" if job else ""


def no_key(provider: str, job: str | None) -> str:
    return f'no API key for provider "{provider}": {key_advice(provider)}{then_start(job)}'


def no_model(job: str | None, models_json_error: str | None = None) -> str:
    if models_json_error:
        return f"pi could not read models.json ({models_json_error}): correct it{then_start(job)}"
    return (
        "no model configured: run pi once and /login, set a provider's API key "
        "(e.g. ANTHROPIC_API_KEY), or add a local server to models.json "
        f"(docs: First steps, Pointing pi at a model){then_start(job)}"
    )


def unknown_model(model: str, job: str | None) -> str:
    again = (
        "or run the task again with one `pi --list-models` lists (roost run --model P/ID)"
        if job
        else "or choose one `pi --list-models` lists"
    )
    return f'pi does not know model "{model}": add it to models.json{then_start(job)}, {again}'


def unknown_provider(provider: str, job: str | None) -> str:
    again = (
        "or run the task again with a model `pi --list-models` lists (roost run --model P/ID)"
        if job
        else "or choose a model `pi --list-models` lists"
    )
    return f'pi does not know provider "{provider}": add it to models.json{then_start(job)}, {again}'


def from_prompt_error(
    error: str, job: str, *, provider: str | None = None, models_json_error: str | None = None
) -> Problem | None:
    """pi refused a prompt (its RPC response). None: not one roost knows (a transient
    refusal, e.g. a prompt sent while busy)."""
    message = one_line(error.removeprefix("prompt: "))
    found = _NO_KEY_FOR.search(message.split(". ")[0].rstrip("."))
    if found:
        return Problem(Kind.CONFIGURATION, message, no_key(found.group(1).strip(), job))
    if message.startswith(_NO_KEY_SELECTED):
        # pi 1.x falls back to no model when the default one has no key; the settings say
        # which provider was meant.
        fix = (
            no_key(provider, job) if provider and not models_json_error else no_model(job, models_json_error)
        )
        return Problem(Kind.CONFIGURATION, message, fix)
    found = _MODEL_NOT_FOUND.search(message)
    if found:
        return Problem(Kind.CONFIGURATION, message, unknown_model(found.group(1), job))
    return None


def from_startup(stderr: list[str], job: str | None, *, roost_extension: str = "") -> Problem | None:
    """pi exited before it answered: its stderr says why when it is a configuration
    problem (pi prints `Error: ...` and exits 1). None: not one roost knows."""
    for index, raw in enumerate(stderr):
        line = raw.strip()
        if not line.startswith("Error:"):
            continue
        message = one_line(line.removeprefix("Error:").strip())
        found = _MODEL_NOT_FOUND.search(message)
        if found:
            return Problem(Kind.CONFIGURATION, message, unknown_model(found.group(1), job))
        found = _UNKNOWN_PROVIDER.search(message)
        if found:
            return Problem(Kind.CONFIGURATION, message, unknown_provider(found.group(1), job))
        found = _EXTENSION.search(message)
        if found:
            where = next((one_line(s) for s in stderr[index + 1 : index + 2] if s.startswith(" ")), "")
            if where:
                message = f"{message} ({where})"
            path = found.group(1)
            if roost_extension and path == roost_extension:
                fix = f"roost's own extension does not load: run roost doctor{then_start(job)}"
            else:
                fix = (
                    f"correct or remove the extension {path} (`pi -ne` starts without "
                    f"extensions){then_start(job)}"
                )
            return Problem(Kind.CONFIGURATION, message, fix)
    return None


def from_run_error(error: str, job: str, provider: str | None = None) -> Problem:
    """A run ended with an error (pi's `errorMessage`, after its own retries)."""
    message = one_line(error)
    then = f'(then: roost reply {job} "continue")'
    found = _HTTP.match(message)
    status = int(found.group(1)) if found else None
    if found:
        detail = _JSON_MESSAGE.search(found.group(2))
        if detail:  # pi 1.x prints the provider's JSON body: its message is what matters
            message = one_line(f"{status}: {detail.group(1)}")
    who = f'provider "{provider}"' if provider else "the provider"
    if status in (401, 403):
        advice = key_advice(provider) if provider else "run pi once and /login, or set its API key"
        fix = (
            f"{who} refused the credentials: check them ({advice}); a changed variable "
            f"needs a new pi: roost stop {job}; roost start {job} {then}"
        )
    elif status == 429:
        fix = f"{who} says rate limit or quota: wait, or check your plan {then}"
    elif status == 404:
        fix = f"{who} does not serve this model: check the model id (pi --list-models) {then}"
    elif status is not None and status >= 500:
        fix = f"{who} failed (pi retried): try again later {then}"
    elif status is not None:
        fix = f"{who} refused the request: see the message {then}"
    else:
        fix = f"the model call failed: see the message {then}"
    return Problem(Kind.MODEL, message, fix)


def provider_of(model: str | None) -> str | None:
    """`provider/id` -> provider (None for a bare pattern)."""
    if model and "/" in model:
        return model.split("/", 1)[0] or None
    return None
