"""What the pi in use can do: the one place where a pi version turns into behaviour.

roost supports two package lines: the current `@earendil-works/pi-coding-agent` (0.74 on,
1.x today) and the old `@mariozechner/pi-coding-agent` (up to 0.73.1). The rest of roost
asks a `PiFeatures` ("does this pi announce that a run settled?"), never a version.

Each feature names the release that brought it (its CHANGELOG). A pi whose version cannot
be read (a wrapper command, a test double) gets the oldest behaviour, which every pi
supports; a newer pi's own signals are still honoured when they arrive.
"""

from __future__ import annotations

from dataclasses import dataclass

from roost.pi.locate import PiInstall, parse_version

SETTLED_EVENT_SINCE = (0, 80, 4)  # RPC `agent_settled`
DISPOSITION_SINCE = (0, 99, 0)  # `data.disposition` on prompt / steer / follow_up responses
SETTLED_ABORTED_SINCE = (1, 1, 0)  # `agent_settled.aborted`
STATS_WHOLE_FILE_SINCE = (0, 81, 0)  # `get_session_stats` sums every entry of the file


@dataclass(frozen=True)
class PiFeatures:
    package: str | None
    version: str | None
    settled_event: bool = False
    """pi says `agent_settled` once a run has no automatic work left (retry, compaction,
    queued steers). Without it roost confirms a settle with a `get_state` round trip after
    `agent_end` and starts a run for a steer stranded at its end."""
    prompt_disposition: bool = False
    """A prompt's response says whether it `started` a run, was `queued` into one, or was
    `handled` by an extension (no message will follow, so the item is done at once)."""
    settled_aborted: bool = False
    """`agent_settled` carries `aborted`."""
    session_stats_whole_file: bool = False
    """`get_session_stats` sums the usage of every entry in the session file (0.73 summed
    only the live context): roost takes its figures after each settled run."""

    @property
    def label(self) -> str:
        """'@earendil-works/pi-coding-agent 1.6.0', or what is known of an unknown pi."""
        if self.package:
            return f"{self.package} {self.version or '(unknown version)'}"
        return "pi (version unknown)"

    def names(self) -> list[str]:
        """The features this pi has, by name (for `roost doctor`)."""
        return [
            name
            for name in ("settled_event", "prompt_disposition", "settled_aborted", "session_stats_whole_file")
            if getattr(self, name)
        ]


def features_of(install: PiInstall | None) -> PiFeatures:
    if install is None:
        return PiFeatures(None, None)
    version = parse_version(install.version)
    if version is None:
        return PiFeatures(install.package, install.version)
    return PiFeatures(
        install.package,
        install.version,
        settled_event=version >= SETTLED_EVENT_SINCE,
        prompt_disposition=version >= DISPOSITION_SINCE,
        settled_aborted=version >= SETTLED_ABORTED_SINCE,
        session_stats_whole_file=version >= STATS_WHOLE_FILE_SINCE,
    )
