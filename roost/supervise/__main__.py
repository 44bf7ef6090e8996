"""`python -m roost.supervise`: roostd in the foreground (what `roost daemon run`, `roostd`
and the CLI's autostart execute; the CLI itself never imports this package)."""

import contextlib
import sys
from pathlib import Path

from roost.supervise.daemon import main

with contextlib.suppress(OSError):
    Path("/proc/self/comm").write_text("roostd")  # `pgrep roostd` and ps name it, however started
sys.exit(main())
