"""roostd's usage state beyond the job records (a leaf: `base.JobTable` names its type)."""

from __future__ import annotations

from roost.usage import log as usage_log
from roost.usage.account import Usage


class UsageBook:
    """Built once by `Daemon.__init__`; `roost.supervise.budget` keeps it up to date."""

    def __init__(self) -> None:
        self._removed: dict[str, Usage] | None = None  # tree -> removed jobs' usage
        self.tree_stopped: dict[str, str] = {}  # job -> why its tree's budget stopped it
        self.tree_warned: set[str] = set()  # roots warned about their tree's budget

    @property
    def removed(self) -> dict[str, Usage]:
        if self._removed is None:
            self._removed = usage_log.removed_tree_costs()
        return self._removed
