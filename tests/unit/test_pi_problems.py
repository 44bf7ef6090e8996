"""pi's errors classified into configuration and model problems, each with one fix line
(roost.pi.problems). The inputs are pi's own texts, as 0.73.1 and 1.6.0 print them."""

from __future__ import annotations

import pytest

from roost.pi import problems
from roost.pi.problems import Kind

DOCS = (
    "\n\nUse /login to log into a provider via OAuth or API key. See:\n"
    "  /x/docs/providers.md\n  /x/docs/models.md"
)


def test_no_key_for_a_named_provider_names_its_variable() -> None:
    problem = problems.from_prompt_error(f"prompt: No API key found for anthropic.{DOCS}", "ab12cd34")
    assert problem is not None and problem.kind == Kind.CONFIGURATION
    assert problem.message == "No API key found for anthropic."
    assert problem.fix == (
        'no API key for provider "anthropic": run pi once and /login, or set '
        "ANTHROPIC_API_KEY (then: roost start ab12cd34)"
    )
    assert problem.text() == f"pi: {problem.message} — fix: {problem.fix}"


def test_a_provider_without_a_known_variable_gets_models_json() -> None:
    problem = problems.from_prompt_error("No API key found for local.", "j")
    assert problem is not None and "an apiKey in models.json" in problem.fix


def test_the_selected_model_without_a_key_uses_the_settings_provider() -> None:
    # pi 1.x falls back to no model when the default provider has no key.
    text = f"prompt: No API key found for the selected model.{DOCS}"
    with_settings = problems.from_prompt_error(text, "j", provider="openai")
    assert with_settings is not None and "set OPENAI_API_KEY" in with_settings.fix
    fresh = problems.from_prompt_error(text, "j")
    assert fresh is not None and fresh.fix.startswith("no model configured:")
    assert "docs: First steps, Pointing pi at a model" in fresh.fix
    assert fresh.fix.endswith("(then: roost start j)")
    broken = problems.from_prompt_error(
        text, "j", provider="fake", models_json_error="Expecting value: line 1 column 3"
    )
    assert broken is not None and "could not read models.json (Expecting value" in broken.fix


def test_a_transient_refusal_is_not_a_configuration_problem() -> None:
    assert problems.from_prompt_error("prompt: Agent is already processing.", "j") is None


@pytest.mark.parametrize(
    "line, fix_start",
    [
        (
            'Error: Model "nope/x" not found. Use --list-models to see available models.',
            'pi does not know model "nope/x"',
        ),
        (
            'Error: Unknown provider "nosuch". Use --list-models to see available providers/models.',
            'pi does not know provider "nosuch"',
        ),
    ],
)
def test_startup_errors(line: str, fix_start: str) -> None:
    stderr = [line, "Warning: No models available. Use /login ..."]
    problem = problems.from_startup(stderr, "j")
    assert problem is not None and problem.kind == Kind.CONFIGURATION
    assert problem.message == line.removeprefix("Error: ")
    assert problem.fix.startswith(fix_start) and "(then: roost start j)" in problem.fix


def test_an_extension_that_fails_to_load_names_the_file_and_where() -> None:
    stderr = [
        'Error: Failed to load extension "/a/syn.ts": Failed to load extension: '
        "ParseError: Missing semicolon.",
        " /a/syn.ts:1:35",
        "Hint: Start without extensions",
    ]
    problem = problems.from_startup(stderr, "j", roost_extension="/r/roost.ts")
    assert problem is not None and "(/a/syn.ts:1:35)" in problem.message
    assert problem.fix.startswith("correct or remove the extension /a/syn.ts")
    ours = problems.from_startup(
        ['Error: Failed to load extension "/r/roost.ts": x'], "j", roost_extension="/r/roost.ts"
    )
    assert ours is not None and "run roost doctor" in ours.fix


def test_an_unknown_startup_exit_is_left_to_the_restart_rules() -> None:
    assert problems.from_startup(["Segmentation fault"], "j") is None
    assert problems.from_startup([], "j") is None


@pytest.mark.parametrize(
    "error, message, fix_part",
    [
        (
            '401: {"message":"Incorrect API key provided","type":"server_error","param":null}',
            "401: Incorrect API key provided",
            'provider "openai" refused the credentials',
        ),
        ("401 Incorrect API key provided", "401 Incorrect API key provided", "refused the credentials"),
        (
            '429: {"message":"You exceeded your current quota"}',
            "429: You exceeded your current quota",
            "rate limit or quota",
        ),
        ("500 upstream exploded", "500 upstream exploded", "failed (pi retried)"),
        ("404 model not found", "404 model not found", "does not serve this model"),
        ("socket hang up", "socket hang up", "the model call failed"),
    ],
)
def test_run_errors(error: str, message: str, fix_part: str) -> None:
    problem = problems.from_run_error(error, "j", "openai")
    assert problem.kind == Kind.MODEL and problem.message == message
    assert fix_part in problem.fix and problem.fix.endswith('(then: roost reply j "continue")')


def test_provider_of() -> None:
    assert problems.provider_of("anthropic/claude-sonnet-4-5") == "anthropic"
    assert problems.provider_of("sonnet") is None and problems.provider_of(None) is None
