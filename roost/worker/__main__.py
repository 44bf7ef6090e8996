"""`python -m roost.worker JOB_ID`: start pi first, then load the worker (see launch.py).
`python -m roost.worker --standby`: the same, for a job roostd hands it later (standby.py)."""

import sys

from roost.locks import joblock
from roost.worker import launch

if len(sys.argv) != 2:
    print("usage: python -m roost.worker JOB_ID", file=sys.stderr)
    sys.exit(2)
if sys.argv[1] == "--standby":
    from roost.worker.standby import wait_for_job

    job_id = wait_for_job()  # its imports done, once roostd recorded it as the job's worker
else:
    joblock.wait_for_go()  # until roostd has recorded this process as the job's worker
    job_id = sys.argv[1]
early = launch.start(job_id)
if sys.argv[1] == "--standby":
    from roost.worker.standby import show_job

    show_job(job_id)  # its command line names its job now, as a worker started for it

from roost.worker.lifecycle import main  # noqa: E402 - heavy: imported while pi boots

sys.exit(main(early))
