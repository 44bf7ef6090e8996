"""pi's own files in its agent dir, read as roost needs them: what pi says nothing of.

Read through `roost.host.trusted`: a regular file of the user's (or root's), bounded."""

from __future__ import annotations

import json

from roost.host import paths
from roost.host import trusted as trust


def default_provider() -> str | None:
    """The provider pi's settings choose (pi 1.x says only "the selected model" when its
    key is missing)."""
    try:
        settings = json.loads(trust.read_text(paths.agent_dir() / "settings.json"))
    except (OSError, ValueError):
        return None
    provider = settings.get("defaultProvider") if isinstance(settings, dict) else None
    return provider if isinstance(provider, str) and provider else None


def models_json_error() -> str | None:
    """Why pi could not read models.json (pi itself says nothing of it in RPC mode)."""
    try:
        json.loads(trust.read_text(paths.agent_dir() / "models.json", 16 << 20))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        return str(exc)
    return None
