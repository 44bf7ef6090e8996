"""`python -m roost.supervise`: roostd in the foreground (what `roost daemon run` and the
CLI's autostart execute; the CLI itself never imports this package)."""

import sys

from roost.supervise.daemon import main

sys.exit(main())
