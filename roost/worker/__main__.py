"""`python -m roost.worker JOB_ID`: start pi first, then load the worker (see launch.py)."""

import sys

from roost.worker import joblock, launch

if len(sys.argv) != 2:
    print("usage: python -m roost.worker JOB_ID", file=sys.stderr)
    sys.exit(2)
joblock.wait_for_go()  # until roostd has recorded this process as the job's worker
early = launch.start(sys.argv[1])

from roost.worker.lifecycle import main  # noqa: E402 - heavy: imported while pi boots

sys.exit(main(early))
