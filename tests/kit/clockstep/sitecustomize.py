"""A wall-clock step for the processes of a lab (tests/integration/test_job_identity.py):
with this folder first on PYTHONPATH, every Python process of roost reads /proc/stat's btime
STEP seconds later once the file named by ROOST_TEST_CLOCK_STEP exists, as after a step of
the wall clock (NTP, a virtual machine's clock set again after a pause), which moves btime
while every process's start ticks since boot stay what they were."""

import os

STEP = 13.0
_flag = os.environ.get("ROOST_TEST_CLOCK_STEP")
if _flag:
    from roost.host import procid

    _real = procid.boot_time

    def _stepped() -> float:
        return _real() + (STEP if os.path.exists(_flag) else 0.0)

    procid.boot_time = _stepped
