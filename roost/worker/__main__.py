"""`python -m roost.worker JOB_ID`: start pi first, then load the worker (see launch.py)."""

import sys

from roost.worker import joblock, launch

if len(sys.argv) not in (2, 3):
    print("usage: python -m roost.worker JOB_ID [GO_FD]", file=sys.stderr)
    sys.exit(2)
if len(sys.argv) == 3:
    joblock.wait_for_go(sys.argv[2])
early = launch.start(sys.argv[1])

from roost.worker.lifecycle import main  # noqa: E402 - heavy: imported while pi boots

sys.exit(main(early))
